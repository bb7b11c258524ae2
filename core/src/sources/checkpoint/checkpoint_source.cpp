// The DeepSpeed family as one source: rank files, universal folders, live snapshots and Hugging Face weights,
// all opened by deepspeed::Checkpoint::open into the catalog, which every command reads. Its folder also
// holds the writers of DeepSpeed's files, above repair/: run_repair's Runner (run.cpp, runner.h) and the
// universal converters (to_universal.cpp, to_zero.cpp).
#include <memory>

#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/source.h"

namespace ckptdoc::sources {

namespace {

class CheckpointSource final : public Source {
 public:
  std::string_view name() const override { return "checkpoint"; }
  std::string_view description() const override {
    return "a DeepSpeed, universal, live-snapshot or Hugging Face weights checkpoint";
  }
  // Every path the sources before it decline: its open says why one is not a checkpoint.
  bool probe(const std::string& /*path*/) const override { return true; }
  bool can(Command /*command*/) const override { return true; }
  bool reads_into_catalog() const override { return true; }
};

}  // namespace

std::shared_ptr<const Source> make_checkpoint_source() {
  return std::make_shared<CheckpointSource>();
}

}  // namespace ckptdoc::sources
