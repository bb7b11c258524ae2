// ckptdoc diff: two sources' tensors compared element by element, streamed (see analysis/diff.h).
#include "ckptdoc/analysis/diff.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "ckptdoc/error.h"
#include "format/tensor_stream.h"

namespace ckptdoc::analysis {
namespace {

std::string strip_module(std::string s) {
  while (s.rfind("module.", 0) == 0) s = s.substr(7);
  return s;
}

// Bytes one thread writes (a producer) and another reads, a few chunks at a time.
class Pipe : public ByteSink {
 public:
  void write(std::span<const uint8_t> bytes) override {
    while (!bytes.empty()) {
      const size_t n = std::min(bytes.size(), kChunk);
      std::unique_lock<std::mutex> lock(m_);
      room_.wait(lock, [&] { return chunks_.size() < 4 || abandoned_; });
      if (abandoned_) throw Cancelled();
      chunks_.emplace_back(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      written_ += n;
      ready_.notify_one();
      bytes = bytes.subspan(n);
    }
  }
  uint64_t position() const override { return written_; }
  void close(std::exception_ptr error = nullptr) {
    std::lock_guard<std::mutex> lock(m_);
    closed_ = true;
    error_ = std::move(error);
    ready_.notify_all();
  }
  void abandon() {
    std::lock_guard<std::mutex> lock(m_);
    abandoned_ = true;
    room_.notify_all();
  }
  // Exactly n bytes into out; throws when the writer failed or stopped short.
  void read(uint8_t* out, size_t n) {
    while (n > 0) {
      std::unique_lock<std::mutex> lock(m_);
      ready_.wait(lock, [&] { return !chunks_.empty() || closed_; });
      if (chunks_.empty()) {
        if (error_) std::rethrow_exception(error_);
        throw Error(ErrorKind::Corrupt, "", "", "a tensor's producer wrote fewer bytes than its size");
      }
      auto& front = chunks_.front();
      const size_t take = std::min(n, front.size() - offset_);
      std::memcpy(out, front.data() + offset_, take);
      out += take;
      n -= take;
      offset_ += take;
      if (offset_ == front.size()) {
        chunks_.pop_front();
        offset_ = 0;
        room_.notify_one();
      }
    }
  }

 private:
  static constexpr size_t kChunk = size_t{4} << 20;
  std::mutex m_;
  std::condition_variable ready_, room_;
  std::deque<std::vector<uint8_t>> chunks_;
  size_t offset_ = 0;
  uint64_t written_ = 0;
  bool closed_ = false, abandoned_ = false;
  std::exception_ptr error_;
};

void to_double(const uint8_t* p, DType d, size_t n, double* out) {
  for (size_t i = 0; i < n; ++i) {
    switch (d) {
      case DType::F32: {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        out[i] = f;
        break;
      }
      case DType::F64:
        std::memcpy(&out[i], p + 8 * i, 8);
        break;
      case DType::F16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = half_to_float(h);
        break;
      }
      case DType::BF16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_float(h);
        break;
      }
      case DType::I64: {
        int64_t v;
        std::memcpy(&v, p + 8 * i, 8);
        out[i] = static_cast<double>(v);
        break;
      }
      case DType::I32: {
        int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        out[i] = v;
        break;
      }
      case DType::I16: {
        int16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = v;
        break;
      }
      case DType::I8:
        out[i] = static_cast<int8_t>(p[i]);
        break;
      case DType::U8:
      case DType::Bool:
        out[i] = p[i];
        break;
      default:
        throw Error(ErrorKind::Unsupported, "", "",
                    "cannot compare values of dtype " + std::string(dtype_name(d)));
    }
  }
}

// A's bytes arrive through write(); B's are pulled from its pipe in step, element for element.
class CompareSink : public ByteSink {
 public:
  CompareSink(TensorDiff& d, Pipe& b, const DiffOptions& o, DiffHistogram* h) : d_(d), b_(b), o_(o), h_(h) {}
  void write(std::span<const uint8_t> bytes) override {
    const size_t ea = element_size(d_.dtype_a), eb = element_size(d_.dtype_b);
    written_ += bytes.size();
    while (!bytes.empty()) {
      if (!carry_.empty() || bytes.size() < ea) {  // an element split between writes
        const size_t take = std::min(bytes.size(), ea - carry_.size());
        carry_.insert(carry_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(take));
        bytes = bytes.subspan(take);
        if (carry_.size() == ea) {
          compare(carry_.data(), 1, eb);
          carry_.clear();
        }
        continue;
      }
      const size_t n = std::min(bytes.size() / ea, size_t{1} << 18);
      compare(bytes.data(), n, eb);
      bytes = bytes.subspan(n * ea);
    }
  }
  uint64_t position() const override { return written_; }

 private:
  void compare(const uint8_t* a, size_t n, size_t eb) {
    bbuf_.resize(n * eb);
    b_.read(bbuf_.data(), bbuf_.size());
    va_.resize(n);
    vb_.resize(n);
    to_double(a, d_.dtype_a, n, va_.data());
    to_double(bbuf_.data(), d_.dtype_b, n, vb_.data());
    for (size_t i = 0; i < n; ++i) {
      const double x = va_[i], y = vb_[i];
      if (x == y || (std::isnan(x) && std::isnan(y))) {
        ++d_.exact;
        ++d_.close;
        if (std::isfinite(y)) d_.sum_sq_b += y * y;
        if (h_) ++h_->above.zeros;
        continue;
      }
      if (!std::isfinite(x) || !std::isfinite(y)) {
        ++d_.nonfinite;
        d_.max_abs = INFINITY;
        if (h_) ++h_->above.nonfinite;
        continue;
      }
      const double diff = std::fabs(x - y);
      if (h_) (x > y ? h_->above : h_->below).add(static_cast<float>(diff));
      if (diff > d_.max_abs) d_.max_abs = diff;
      d_.sum_sq_diff += diff * diff;
      d_.sum_sq_b += y * y;
      if (diff <= o_.atol + o_.rtol * std::fabs(y)) ++d_.close;
    }
  }
  TensorDiff& d_;
  Pipe& b_;
  const DiffOptions& o_;
  DiffHistogram* h_;
  std::vector<uint8_t> carry_, bbuf_;
  std::vector<double> va_, vb_;
  uint64_t written_ = 0;
};

void compare_values(const NamedTensor& a, const NamedTensor& b, TensorDiff& d, const DiffOptions& o) {
  Pipe pipe;
  std::thread producer([&] {
    try {
      detail::stream_row_major("B", b.name, b.tensor, pipe);
      pipe.close();
    } catch (...) {
      pipe.close(std::current_exception());
    }
  });
  auto histogram = o.histograms ? std::make_shared<DiffHistogram>() : nullptr;
  try {
    CompareSink sink(d, pipe, o, histogram.get());
    detail::stream_row_major("A", a.name, a.tensor, sink);
  } catch (...) {
    pipe.abandon();
    producer.join();
    throw;
  }
  pipe.abandon();  // B wrote everything A had, or more (caught as a size error below, never here)
  producer.join();
  d.histogram = std::move(histogram);
}

}  // namespace

DiffWhat parse_diff_what(const std::string& s) {
  if (s == "fp32") return DiffWhat::Fp32;
  if (s == "lp") return DiffWhat::Lp;
  if (s == "exp_avg") return DiffWhat::ExpAvg;
  if (s == "exp_avg_sq") return DiffWhat::ExpAvgSq;
  throw Error(ErrorKind::InvalidRequest, "", "--what",
              expected_found("fp32, lp, exp_avg or exp_avg_sq", "'" + s + "'"));
}

std::string_view diff_what_name(DiffWhat w) {
  switch (w) {
    case DiffWhat::Fp32:
      return "fp32";
    case DiffWhat::Lp:
      return "lp";
    case DiffWhat::ExpAvg:
      return "exp_avg";
    case DiffWhat::ExpAvgSq:
      return "exp_avg_sq";
  }
  return "";
}

double TensorDiff::rel_l2() const {
  if (sum_sq_diff == 0) return 0;
  return sum_sq_b > 0 ? std::sqrt(sum_sq_diff / sum_sq_b) : INFINITY;
}

double TensorDiff::exact_fraction() const {
  return numel ? double(exact) / double(numel) : 1.0;
}

bool DiffResult::equal() const {
  if (!removed.empty() || !added.empty() || !shape_changed.empty()) return false;
  return std::all_of(compared.begin(), compared.end(), [](const TensorDiff& d) { return d.same(); });
}

DiffResult diff(const DiffSide& a, const DiffSide& b, const DiffOptions& options, Progress* progress) {
  DiffResult r;
  r.a = a.what;
  r.b = b.what;
  const auto& ta = a.tensors;
  const auto& tb = b.tensors;
  std::map<std::string, size_t> in_b;
  for (size_t i = 0; i < tb.size(); ++i) in_b.emplace(strip_module(tb[i].name), i);
  std::map<std::string, size_t> in_a;
  for (size_t i = 0; i < ta.size(); ++i) in_a.emplace(strip_module(ta[i].name), i);
  for (const auto& t : tb)
    if (!in_a.count(strip_module(t.name))) r.added.push_back(strip_module(t.name));

  std::vector<std::pair<size_t, size_t>> pairs;
  uint64_t total = 0;
  for (size_t i = 0; i < ta.size(); ++i) {
    const std::string name = strip_module(ta[i].name);
    if (in_a.at(name) != i) continue;  // the same name twice after stripping: the first one counts
    const auto it = in_b.find(name);
    if (it == in_b.end()) {
      r.removed.push_back(name);
      continue;
    }
    const Tensor &x = ta[i].tensor, &y = tb[it->second].tensor;
    TensorDiff d;
    d.name = name;
    d.shape_a = x.shape;
    d.shape_b = y.shape;
    d.dtype_a = x.dtype;
    d.dtype_b = y.dtype;
    if (x.shape != y.shape) {
      r.shape_changed.push_back(std::move(d));
      continue;
    }
    d.numel = static_cast<uint64_t>(x.numel());
    r.compared.push_back(std::move(d));
    pairs.emplace_back(i, it->second);
    total += x.nbytes() + y.nbytes();
  }
  if (progress) progress->set_stage("comparing tensors", total);
  for (size_t k = 0; k < pairs.size(); ++k) {
    if (progress) progress->check();
    const auto& [i, j] = pairs[k];
    try {
      compare_values(ta[i], tb[j], r.compared[k], options);
    } catch (const Error& e) {
      throw Error(e.kind(), e.file(),
                  "tensor '" + r.compared[k].name + "'" + (e.where().empty() ? "" : ", " + e.where()),
                  e.detail());
    }
    if (progress) progress->add(ta[i].tensor.nbytes() + tb[j].tensor.nbytes());
  }
  std::stable_sort(r.compared.begin(), r.compared.end(), [](const TensorDiff& x, const TensorDiff& y) {
    if (x.same() != y.same()) return !x.same();
    if (x.rel_l2() != y.rel_l2()) return x.rel_l2() > y.rel_l2();
    return x.max_abs > y.max_abs;
  });
  return r;
}

std::string diff_json(const DiffResult& r) {
  using nlohmann::json;
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(v > 0 ? "inf" : "nan"); };
  json shapes = json::array();
  for (const auto& d : r.shape_changed)
    shapes.push_back({{"name", d.name}, {"shape_a", d.shape_a}, {"shape_b", d.shape_b}});
  json tensors = json::array();
  for (const auto& d : r.compared)
    tensors.push_back({{"name", d.name},
                       {"dtype_a", std::string(dtype_name(d.dtype_a))},
                       {"dtype_b", std::string(dtype_name(d.dtype_b))},
                       {"shape", d.shape_a},
                       {"numel", d.numel},
                       {"max_abs_diff", num(d.max_abs)},
                       {"rel_l2", num(d.rel_l2())},
                       {"exact_fraction", d.exact_fraction()},
                       {"close_fraction", d.numel ? double(d.close) / double(d.numel) : 1.0},
                       {"nonfinite_mismatches", d.nonfinite},
                       {"equal", d.same()}});
  json j{{"a", r.a},           {"b", r.b},
         {"equal", r.equal()}, {"removed", r.removed},
         {"added", r.added},   {"shape_changed", shapes},
         {"tensors", tensors}};
  return j.dump(2);
}

}  // namespace ckptdoc::analysis
