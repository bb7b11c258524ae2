#pragma once
// Mergeable statistics and histograms computed by the compute backends. Bin indices are computed from IEEE
// bits with integer operations only, so CPU and CUDA give identical counts; sums are accumulated in double
// and agree within floating-point tolerance.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace ckptdoc {

// The counts of N bins, held compactly: only the range from the first to the last non-zero bin, each count
// of the range in the fewest bytes (1, 2, 4 or 8) that hold the range's largest. A diagnosis keeps 9 or more
// histograms per param whose 256 bins are mostly empty (2 KB each, dense); packed they take tens to a few
// hundred bytes. Reads are O(1) and read like an array of N counts; add() increments in place unless the
// bin lies outside the range or the count outgrows its width (then the counts are re-laid once).
template <size_t N>
class BinCounts {
  static_assert(N > 0 && N < 65536);

 public:
  using value_type = uint64_t;
  using Dense = std::array<uint64_t, N>;

  BinCounts() = default;
  explicit BinCounts(const Dense& d) { assign(d); }
  BinCounts(const BinCounts& o) { copy_from(o); }
  BinCounts& operator=(const BinCounts& o) {
    if (this != &o) copy_from(o);
    return *this;
  }
  BinCounts(BinCounts&& o) noexcept : data_(std::move(o.data_)), lo_(o.lo_), n_(o.n_), width_(o.width_) {
    o.lo_ = o.n_ = 0;
    o.width_ = 0;
  }
  BinCounts& operator=(BinCounts&& o) noexcept {
    data_ = std::move(o.data_);
    lo_ = o.lo_;
    n_ = o.n_;
    width_ = o.width_;
    o.lo_ = o.n_ = 0;
    o.width_ = 0;
    return *this;
  }

  static constexpr size_t size() { return N; }
  uint64_t operator[](size_t i) const { return i >= lo_ && i - lo_ < n_ ? load(i - lo_) : 0; }
  bool empty() const { return n_ == 0; }  // every count zero
  // The stored range [first(), first() + stored()): every non-zero bin lies in it.
  size_t first() const { return lo_; }
  size_t stored() const { return n_; }
  size_t heap_bytes() const { return size_t{n_} * width_; }  // what the counts take on the heap

  void add_to(Dense& d) const {
    for (size_t k = 0; k < n_; ++k) d[lo_ + k] += load(k);
  }
  Dense dense() const {
    Dense d{};
    add_to(d);
    return d;
  }
  void assign(const Dense& d) {
    size_t lo = 0, hi = N;
    while (lo < N && d[lo] == 0) ++lo;
    while (hi > lo && d[hi - 1] == 0) --hi;
    uint64_t mx = 0;
    for (size_t i = lo; i < hi; ++i) mx = mx > d[i] ? mx : d[i];
    lay_out(d.data() + lo, lo, hi - lo, width_for(mx));
  }
  void set(size_t i, uint64_t v) {
    if (i >= N) return;
    if (i >= lo_ && i - lo_ < n_ && v <= max_of(width_)) {
      store(i - lo_, v);
      return;
    }
    Dense d = dense();
    d[i] = v;
    assign(d);
  }
  void add(size_t i, uint64_t v = 1) {
    if (i >= N || v == 0) return;
    if (i >= lo_ && i - lo_ < n_) {
      const uint64_t now = load(i - lo_);
      if (max_of(width_) - now >= v) {
        store(i - lo_, now + v);
        return;
      }
    }
    Dense d = dense();
    d[i] += v;
    assign(d);
  }
  void merge(const BinCounts& o) {
    if (o.n_ == 0) return;
    if (n_ == 0) {
      *this = o;
      return;
    }
    Dense d = dense();
    o.add_to(d);
    assign(d);
  }

  friend bool operator==(const BinCounts& a, const BinCounts& b) {
    for (size_t i = 0; i < N; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = uint64_t;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = uint64_t;
    const_iterator() = default;
    const_iterator(const BinCounts* c, size_t i) : c_(c), i_(i) {}
    uint64_t operator*() const { return (*c_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator t = *this;
      ++i_;
      return t;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) { return a.i_ == b.i_; }

   private:
    const BinCounts* c_ = nullptr;
    size_t i_ = 0;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, N}; }

 private:
  static uint8_t width_for(uint64_t mx) {
    return mx <= 0xffu ? 1 : mx <= 0xffffu ? 2 : mx <= 0xffffffffu ? 4 : 8;
  }
  static uint64_t max_of(uint8_t w) { return w >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * w)) - 1u; }
  uint64_t load(size_t k) const {
    const uint8_t* p = data_.get() + k * width_;
    switch (width_) {
      case 1:
        return *p;
      case 2: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return v;
      }
      case 4: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return v;
      }
      default: {
        uint64_t v;
        std::memcpy(&v, p, 8);
        return v;
      }
    }
  }
  void store(size_t k, uint64_t v) {
    uint8_t* p = data_.get() + k * width_;
    switch (width_) {
      case 1:
        *p = static_cast<uint8_t>(v);
        break;
      case 2: {
        const auto x = static_cast<uint16_t>(v);
        std::memcpy(p, &x, 2);
        break;
      }
      case 4: {
        const auto x = static_cast<uint32_t>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      default:
        std::memcpy(p, &v, 8);
        break;
    }
  }
  void lay_out(const uint64_t* counts, size_t lo, size_t n, uint8_t width) {
    if (n == 0) {
      data_.reset();
      lo_ = n_ = 0;
      width_ = 0;
      return;
    }
    data_.reset(new uint8_t[n * width]);
    lo_ = static_cast<uint16_t>(lo);
    n_ = static_cast<uint16_t>(n);
    width_ = width;
    for (size_t k = 0; k < n; ++k) store(k, counts[k]);
  }
  void copy_from(const BinCounts& o) {
    if (o.n_ == 0) {
      data_.reset();
    } else {
      data_.reset(new uint8_t[size_t{o.n_} * o.width_]);
      std::memcpy(data_.get(), o.data_.get(), size_t{o.n_} * o.width_);
    }
    lo_ = o.lo_;
    n_ = o.n_;
    width_ = o.width_;
  }

  std::unique_ptr<uint8_t[]> data_;
  uint16_t lo_ = 0, n_ = 0;
  uint8_t width_ = 0;
};

// Log-magnitude histogram: 4 bins per power of two, from 2^kLogMinExp up to 2^kLogMaxExp. Bin i covers
// [2^(kLogMinExp + i/4) rounded to the top two mantissa bits, ...). Values below the range (but non-zero)
// count in `underflow`, above in `overflow`, exact zeros in `zeros`, NaN/Inf in `nonfinite`.
struct LogHistogram {
  static constexpr int kLogMinExp = -40;  // 2^-40 ~ 9.1e-13
  static constexpr int kLogMaxExp = 24;   // 2^24 ~ 1.7e7
  static constexpr int kBins = (kLogMaxExp - kLogMinExp) * 4;
  BinCounts<kBins> counts;
  uint64_t zeros = 0, underflow = 0, overflow = 0, nonfinite = 0;

  // Lower edge of bin i as a value (2^e * (1 + m/4)).
  static double lower_edge(int i);
  static double log10_lower_edge(int i);
  // The bin of a finite non-zero |x| (float bits), or -1 below, kBins above the range.
  static int bin_of(float abs_value);
  void add(float value);
  void merge(const LogHistogram& o);
  uint64_t total() const;
  size_t heap_bytes() const { return counts.heap_bytes(); }
};

// Distance in units in the last place of the lp dtype between the stored lp value and round_to_lp(fp32):
// bucket 0 = equal, bucket k (1..16) = distance in [2^(k-1), 2^k), bucket 17 = 65536 or more (or NaN
// mismatch).
struct UlpHistogram {
  static constexpr int kBuckets = 18;
  BinCounts<kBuckets> counts;
  static int bucket_of(uint32_t distance);
  static std::string bucket_label(int b);
  void merge(const UlpHistogram& o);
  size_t heap_bytes() const { return counts.heap_bytes(); }
};

// Statistics of one tensor (or one partition) of values.
struct ValueStats {
  uint64_t count = 0;
  uint64_t nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0, subnormals = 0, negatives = 0;
  double min = 0, max = 0;  // over finite values; meaningless when finite_count() == 0
  double sum = 0, sum_sq = 0;
  LogHistogram log_abs;           // log|v| histogram (moments use it on a log axis)
  LogHistogram log_abs_negative;  // log|v| of negative values only: with log_abs gives a signed view

  uint64_t finite_count() const { return count - nan - pos_inf - neg_inf; }
  double mean() const;
  double rms() const;
  void merge(const ValueStats& o);
  size_t heap_bytes() const { return log_abs.heap_bytes() + log_abs_negative.heap_bytes(); }
};

// lp (fp16/bf16) weights compared with their fp32 masters.
struct DivergenceStats {
  uint64_t count = 0;
  uint64_t exact = 0;         // lp == round_to_lp(fp32), bit for bit
  uint64_t nonfinite = 0;     // either side NaN/Inf (excluded from the sums)
  double max_abs = 0;         // max |fp32 - upcast(lp)|
  double sum_abs = 0;         // sum |fp32 - upcast(lp)|
  double sum_sq_diff = 0;     // sum (fp32 - upcast(lp))^2
  double sum_sq_lp = 0;       // sum upcast(lp)^2
  double sum_sq_fp32 = 0;     // sum fp32^2
  LogHistogram log_abs_diff;  // |fp32 - upcast(lp)|
  UlpHistogram ulp;

  double mean_abs() const;
  double rel_l2() const;  // ||fp32 - lp|| / ||lp||
  double exact_fraction() const;
  void merge(const DivergenceStats& o);
  size_t heap_bytes() const { return log_abs_diff.heap_bytes() + ulp.heap_bytes(); }
};

}  // namespace ckptdoc
