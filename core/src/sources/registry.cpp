// The sources ckptdoc reads, in probe order: adding a format is its folder under core/src/sources/ and one
// line in builtin_sources() (with its factory's declaration beside it).
#include "ckptdoc/sources/registry.h"

#include <algorithm>
#include <filesystem>
#include <mutex>

#include "ckptdoc/sources/deepspeed/foreign_paths.h"

namespace ckptdoc::sources {

// Each defined in its source's folder.
std::shared_ptr<const Source> make_megatron_legacy_source();
std::shared_ptr<const Source> make_megatron_source();
std::shared_ptr<const Source> make_dcp_source();
std::shared_ptr<const Source> make_accelerate_source();
std::shared_ptr<const Source> make_weights_folder_source();
std::shared_ptr<const Source> make_checkpoint_source();

namespace {

const std::vector<std::shared_ptr<const Source>>& builtin_sources() {
  static const std::vector<std::shared_ptr<const Source>> list{
      make_megatron_legacy_source(),  // sources/megatron_legacy/: Megatron-LM's mp_rank_*/model_optim_rng.pt
      make_megatron_source(),        // sources/megatron/: before dcp, whose probe takes its iteration folders
      make_dcp_source(),             // sources/dcp/: PyTorch Distributed Checkpoint folders
      make_accelerate_source(),      // sources/accelerate/: Accelerate FSDP save_state folders (DCP parts)
      make_weights_folder_source(),  // sources/weights_folder/: read by the catalog, repaired by itself
      make_checkpoint_source(),      // sources/checkpoint/: last, it takes every path the others decline
  };
  return list;
}

struct Registered {
  std::mutex mutex;
  std::vector<std::shared_ptr<const Source>> sources;
};

Registered& registered() {
  static Registered r;
  return r;
}

// The folders up to three levels below `dir` that a source other than the catalog's reads (probes look at
// names and small headers only), not searched inside; bounded like deepspeed::checkpoints_below, symbolic
// links not followed.
std::vector<deepspeed::ForeignCheckpoint> foreign_checkpoints_below(const std::string& dir) {
  namespace fs = std::filesystem;
  constexpr int kDepth = 3;
  constexpr size_t kMaxFolders = 4000;
  std::vector<deepspeed::ForeignCheckpoint> found;
  std::vector<std::pair<fs::path, int>> queue{{fs::path(dir), 0}};
  std::error_code ec;
  for (size_t i = 0; i < queue.size() && i < kMaxFolders; ++i) {
    const auto [folder, depth] = queue[i];
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_symlink(ec) || !it->is_directory(ec)) continue;
      if (const auto source = find_source(it->path().string()); !source->reads_into_catalog())
        found.push_back({it->path().string(), std::string(source->description())});
      else if (depth + 1 < kDepth)
        queue.emplace_back(it->path(), depth + 1);
    }
    ec.clear();
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return found;
}

// Checkpoint::open refuses a path another source reads, naming the commands that read it: installed at
// start-up, in every program that links the registry (the front ends all dispatch through find_source).
[[maybe_unused]] const bool kForeignPathsRefused = [] {
  deepspeed::set_foreign_path_check([](const std::string& path) {
    if (const auto source = find_source(path); !source->reads_into_catalog())
      throw source->refusal(path, std::nullopt);
  });
  deepspeed::set_foreign_below_search(foreign_checkpoints_below);
  return true;
}();

}  // namespace

std::vector<std::shared_ptr<const Source>> all_sources() {
  std::vector<std::shared_ptr<const Source>> out;
  {
    Registered& r = registered();
    const std::lock_guard<std::mutex> lock(r.mutex);
    out = r.sources;
  }
  const auto& builtin = builtin_sources();
  out.insert(out.end(), builtin.begin(), builtin.end());
  return out;
}

std::shared_ptr<const Source> find_source(const std::string& path) {
  for (auto& s : all_sources())
    if (s->probe(path)) return s;
  return builtin_sources().back();  // the catalog source's probe accepts everything; kept should it change
}

std::shared_ptr<const Source> source_for(const std::string& path, Command command) {
  auto s = find_source(path);
  if (!s->can(command)) throw s->refusal(path, command);
  return s;
}

void register_source(std::shared_ptr<const Source> source) {
  Registered& r = registered();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.sources.push_back(std::move(source));
}

void unregister_source(std::string_view name) {
  Registered& r = registered();
  const std::lock_guard<std::mutex> lock(r.mutex);
  std::erase_if(r.sources, [&](const auto& s) { return s->name() == name; });
}

}  // namespace ckptdoc::sources
