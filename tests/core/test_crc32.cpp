// zip CRC-32 (crc32_update): the carry-less-multiplication path for large buffers gives exactly what the
// definition of CRC-32 gives (a bit-by-bit reference written here), for every length, alignment and chunking.
#include <QtTest>
#include <random>
#include <vector>

#include "ckptdoc/format/zip_reader.h"

using namespace ckptdoc;

namespace {

// The definition: reflected polynomial 0xEDB88320, initial and final complement, one bit at a time.
uint32_t reference_crc(const uint8_t* p, size_t n, uint32_t crc = 0) {
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int b = 0; b < 8; ++b) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

std::vector<uint8_t> random_bytes(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(g());
  return v;
}

}  // namespace

class TestCrc32 : public QObject {
  Q_OBJECT

 private slots:
  void knownValue() {
    const std::string s = "123456789";
    QCOMPARE(crc32({reinterpret_cast<const uint8_t*>(s.data()), s.size()}), 0xCBF43926u);
  }
  void everyLengthAndAlignment() {
    const auto data = random_bytes(5000, 1);
    for (size_t offset = 0; offset < 17; ++offset)
      for (size_t n = 0; n + offset <= data.size(); n += (n < 600 ? 1 : 97))
        QCOMPARE(crc32({data.data() + offset, n}), reference_crc(data.data() + offset, n));
  }
  void chunkedUpdatesAgree() {
    const auto data = random_bytes(1 << 20, 2);
    const uint32_t whole = reference_crc(data.data(), data.size());
    std::mt19937 g(3);
    for (int round = 0; round < 20; ++round) {
      uint32_t c = 0;
      for (size_t at = 0; at < data.size();) {
        const size_t n = std::min<size_t>(data.size() - at, g() % 70000);
        c = crc32_update(c, {data.data() + at, n});
        at += n;
      }
      QCOMPARE(c, whole);
    }
  }
  void allZerosAndAllOnes() {
    for (uint8_t v : {uint8_t{0}, uint8_t{0xFF}}) {
      const std::vector<uint8_t> data(100000, v);
      QCOMPARE(crc32({data.data(), data.size()}), reference_crc(data.data(), data.size()));
    }
  }
};

QTEST_GUILESS_MAIN(TestCrc32)
#include "test_crc32.moc"
