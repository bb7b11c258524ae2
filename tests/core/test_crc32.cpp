// CRC-32 of torch zip records: the carry-less-multiply path must give what the bit-by-bit definition gives,
// for every length, alignment and starting CRC (it is used for every record ckptdoc writes and verifies).
#include <QTest>
#include <random>

#include "ckptdoc/format/zip_reader.h"
#include "test_support.h"

using namespace ckptdoc;

namespace {

// The definition: reflected polynomial 0xEDB88320, one bit at a time.
uint32_t crc_bitwise(uint32_t crc, const uint8_t* p, size_t n) {
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

}  // namespace

class TestCrc32 : public QObject {
  Q_OBJECT

 private slots:
  void knownValue() {
    const std::string s = "123456789";
    QCOMPARE(crc32(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size())), 0xCBF43926u);
  }

  void matchesTheDefinition() {
    std::mt19937 rng(7);
    std::vector<uint8_t> buf(70016);  // room for the longest span (69990) at the largest offset (15)
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    for (size_t n :
         {0, 1, 15, 16, 63, 64, 255, 256, 257, 271, 272, 300, 1000, 4095, 4096, 4097, 65536, 69990}) {
      for (size_t offset : {0, 1, 3, 8, 15}) {
        for (uint32_t start : {0u, 0xCBF43926u, 0xFFFFFFFFu}) {
          const auto span = std::span<const uint8_t>(buf.data() + offset, n);
          QCOMPARE(crc32_update(start, span), crc_bitwise(start, span.data(), n));
        }
      }
    }
  }

  // Records are checksummed in pieces as they stream: the pieces must chain.
  void chainsAcrossPieces() {
    std::vector<uint8_t> buf(1 << 20);
    std::mt19937 rng(3);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    uint32_t c = 0;
    size_t done = 0;
    for (size_t step : {300, 1, 4096, 17, 100000, 65535}) {
      c = crc32_update(c, std::span<const uint8_t>(buf.data() + done, step));
      done += step;
    }
    c = crc32_update(c, std::span<const uint8_t>(buf.data() + done, buf.size() - done));
    QCOMPARE(c, crc_bitwise(0, buf.data(), buf.size()));
  }
};

CKPTDOC_TEST_MAIN(TestCrc32)
#include "test_crc32.moc"
