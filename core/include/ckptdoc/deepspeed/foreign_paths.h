#pragma once
// Paths another reader takes (a Megatron-core or DCP folder, ...): Checkpoint::open refuses them naming the
// commands that read them. Which readers there are is the source registry's knowledge (sources/registry.cpp),
// one layer up, so the registry installs the check here instead of deepspeed/ asking it.
#include <functional>
#include <string>

namespace ckptdoc::deepspeed {

// Throws the refusal (a ckptdoc::Error) when another source reads `path`; returns when the catalog reads it.
using ForeignPathCheck = std::function<void(const std::string& path)>;

// Installed once, at start-up, by sources/registry.cpp; until then (or in a program without the registry)
// every path is left to Checkpoint::open.
void set_foreign_path_check(ForeignPathCheck check);
void check_not_foreign_path(const std::string& path);

}  // namespace ckptdoc::deepspeed
