#pragma once
// Paths another reader takes (a Megatron-core or DCP folder, ...): Checkpoint::open refuses them naming the
// commands that read them. Which readers there are is the source registry's knowledge (sources/registry.cpp),
// one layer up, so the registry installs the check here instead of deepspeed/ asking it.
#include <functional>
#include <string>
#include <vector>

namespace ckptdoc::deepspeed {

// Throws the refusal (a ckptdoc::Error) when another source reads `path`; returns when the catalog reads it.
using ForeignPathCheck = std::function<void(const std::string& path)>;

// Installed once, at start-up, by sources/registry.cpp; until then (or in a program without the registry)
// every path is left to Checkpoint::open.
void set_foreign_path_check(ForeignPathCheck check);
void check_not_foreign_path(const std::string& path);

// A folder below a path that holds no checkpoint itself, read by another source: named in the refusal, so
// "one folder too high" lists what is there whatever its format instead of saying nothing is.
struct ForeignCheckpoint {
  std::string path;
  std::string description;  // the source's words: "a PyTorch Distributed Checkpoint"
};
using ForeignBelowSearch = std::function<std::vector<ForeignCheckpoint>(const std::string& dir)>;

// Installed with the check above by sources/registry.cpp; until then nothing is found.
void set_foreign_below_search(ForeignBelowSearch search);
std::vector<ForeignCheckpoint> foreign_checkpoints_below(const std::string& dir);

}  // namespace ckptdoc::deepspeed
