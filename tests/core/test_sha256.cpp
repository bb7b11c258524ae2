// SHA-256 (io/sha256.h), what integrity.json's hashes are checked with: the FIPS 180-2 appendix B examples,
// every split of a message into update() pieces (the padding crosses a block for lengths 56-63), and a file
// read in chunks smaller and larger than itself. Real files hashed by megatron-core:
// test_realds_megatron_integrity.
#include <QCryptographicHash>
#include <QTest>
#include <random>

#include "ckptdoc/error.h"
#include "ckptdoc/io/sha256.h"
#include "test_support.h"

using namespace ckptdoc;

namespace {

std::string digest(const std::string& s) {
  io::Sha256 h;
  h.update({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  return h.hex_digest();
}

std::string qt_digest(const std::string& s) {
  return QCryptographicHash::hash(QByteArray(s.data(), static_cast<qsizetype>(s.size())),
                                  QCryptographicHash::Sha256)
      .toHex()
      .toStdString();
}

}  // namespace

class TestSha256 : public QObject {
  Q_OBJECT

 private slots:
  void fipsExamples() {
    QCOMPARE(digest("abc"), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    QCOMPARE(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
             std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    QCOMPARE(digest(std::string(1000000, 'a')),
             std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    QCOMPARE(digest(""), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  }

  // Every length up to three blocks, fed whole and in two pieces cut everywhere, against Qt's SHA-256.
  void piecesAndLengths() {
    std::mt19937 rng(5);
    for (size_t n = 0; n <= 192; ++n) {
      std::string s(n, '\0');
      for (auto& c : s) c = static_cast<char>(rng());
      const std::string want = qt_digest(s);
      QCOMPARE(digest(s), want);
      for (size_t cut = 0; cut <= n; cut += 7) {
        io::Sha256 h;
        h.update({reinterpret_cast<const uint8_t*>(s.data()), cut});
        h.update({reinterpret_cast<const uint8_t*>(s.data()) + cut, n - cut});
        QCOMPARE(h.hex_digest(), want);
      }
    }
  }

  void fileInChunks() {
    test::TempDir dir;
    std::string s(300000, '\0');
    std::mt19937 rng(9);
    for (auto& c : s) c = static_cast<char>(rng());
    const auto path = dir.file("bytes");
    test::write_text(path, s);
    for (const size_t chunk : {size_t{1000}, size_t{65536}, size_t{1} << 20}) {
      uint64_t seen = 0;
      QCOMPARE(io::sha256_of_file(path, chunk, [&](size_t n) { seen += n; }), qt_digest(s));
      QCOMPARE(seen, uint64_t{s.size()});
    }
    try {
      io::sha256_of_file(dir.file("absent"), 1000, {});
      QFAIL("no error for an absent file");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::Io);
      QCOMPARE(e.file(), dir.file("absent"));
    }
  }
};

QTEST_GUILESS_MAIN(TestSha256)
#include "test_sha256.moc"
