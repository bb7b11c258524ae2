#include "format/progress_tensors.h"

#include <algorithm>
#include <map>
#include <memory>

#include "ckptdoc/io/file_io.h"
#include "ckptdoc/io/mapped_file.h"

namespace ckptdoc::detail {
namespace {

// Checked between steps: small enough that a cancel lands within a fraction of a second, large enough that a
// file sink still copies each step inside the kernel.
constexpr uint64_t kStep = uint64_t{64} << 20;

// Passes bytes on, reporting the ones past `*reported` (what earlier pulls of this storage already reported).
class ProgressSink : public ByteSink {
 public:
  ProgressSink(ByteSink& inner, Progress& progress, uint64_t& reported)
      : inner_(inner), progress_(progress), reported_(reported) {}

  void write(std::span<const uint8_t> bytes) override {
    for (size_t at = 0; at < bytes.size(); at += kStep) {
      progress_.check();
      const size_t n = std::min<size_t>(kStep, bytes.size() - at);
      inner_.write(bytes.subspan(at, n));
      advance(n);
    }
  }
  uint64_t position() const override { return position_; }
  void write_file_range(const MappedFile& file, uint64_t offset, uint64_t length) override {
    for (uint64_t at = 0; at < length; at += kStep) {
      progress_.check();
      const uint64_t n = std::min(kStep, length - at);
      inner_.write_file_range(file, offset + at, n);
      advance(n);
    }
  }

 private:
  void advance(uint64_t n) {
    position_ += n;
    if (position_ > reported_) {
      progress_.add(position_ - reported_);
      reported_ = position_;
    }
  }
  ByteSink& inner_;
  Progress& progress_;
  uint64_t& reported_;
  uint64_t position_ = 0;
};

bool is_whole_storage(const Tensor& t) {
  return t.storage && t.storage_offset == 0 && t.is_contiguous() && t.storage->nbytes() == t.nbytes();
}

}  // namespace

ProgressTensors with_progress(const std::vector<NamedTensor>& tensors, Progress& progress) {
  ProgressTensors out;
  out.tensors.reserve(tensors.size());
  std::map<const Storage*, std::shared_ptr<Storage>> wrapped;  // aliases share one wrapped storage
  for (const auto& nt : tensors) {
    NamedTensor w = nt;
    if (is_whole_storage(nt.tensor)) {
      if (auto it = wrapped.find(nt.tensor.storage.get()); it != wrapped.end()) {
        w.tensor.storage = it->second;
      } else {
        const auto& source = nt.tensor.storage;
        auto s = std::make_shared<Storage>();
        s->key = source->key;
        s->dtype = source->dtype;
        s->numel = source->numel;
        s->location = source->location;
        auto reported = std::make_shared<uint64_t>(0);
        s->producer = [source, reported, p = &progress](ByteSink& sink) {
          ProgressSink counted(sink, *p, *reported);
          source->write_to(counted);
        };
        out.total_bytes += source->nbytes();
        wrapped[source.get()] = s;
        w.tensor.storage = std::move(s);
      }
    }
    out.tensors.push_back(std::move(w));
  }
  return out;
}

}  // namespace ckptdoc::detail
