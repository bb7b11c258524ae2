// What DeepSpeed's reader needs to know of weights-only sources: which paths it hands to them, and the
// catalog it shows for one (see weights_only.h).
#include "sources/deepspeed/weights_only.h"

#include <filesystem>

#include "sources/deepspeed/content_roles.h"
#include "sources/deepspeed/detect.h"
#include "sources/deepspeed/file_roles.h"

namespace fs = std::filesystem;

namespace ckptdoc::deepspeed::detail {

bool is_weights_path(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_regular_file(p, ec)) {
    const std::string name = p.filename().string();
    if (name == "latest" || classify_file_name(name)) return false;
    // A DeepSpeed rank file under another name (renamed, copied out of its folder) is read as what it is.
    return !(classify_file_by_content_head(path) && classify_file_by_content(path));
  }
  if (!fs::is_directory(p, ec)) return false;
  if (fs::exists(p / "latest", ec) || has_rank_files(path)) return false;
  bool weights = false;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_directory(ec) && has_rank_files(it->path().string())) return false;
    // Hugging Face's names (or any safetensors file): a lone *.bin beside a checkpoint is not a weights
    // folder.
    if (it->is_regular_file(ec) && hugging_face_weights_name(name) && !weights::not_weights(name))
      weights = true;
  }
  // A DeepSpeed checkpoint further down (`run/checkpoint/`): the checkpoint decides (detect.cpp opens it, or
  // asks which to open when weights sit beside it).
  return weights && checkpoints_below(path).empty();
}

Catalog catalog_of(const weights::WeightsSource& s) {
  Catalog c;
  const bool folder = s.is_folder();
  c.kind = s.kind_name();
  c.description = s.description();
  c.weights_only = true;
  c.single_file = !folder;
  c.save_dir = s.root();
  c.tag_dir = folder ? s.root() : s.path();
  c.tag = fs::path(c.tag_dir).filename().string();
  c.wrapper = OptimizerWrapper::None;
  c.lp_dtype = s.main_dtype();
  if (s.index()) {
    CheckpointFile f;
    f.path = s.index()->path;
    f.abs_path = (fs::path(s.root()) / f.path).string();
    std::error_code ec;
    f.bytes = fs::file_size(f.abs_path, ec);
    c.files.push_back(f);
  }
  for (const auto& wf : s.files()) {
    CheckpointFile f;
    f.path = wf.path;
    f.abs_path = wf.abs_path;
    f.bytes = wf.bytes;
    c.files.push_back(f);
  }
  for (const auto& t : s.tensors()) c.module_keys.push_back(t.name);
  c.problems = s.problems();
  return c;
}

}  // namespace ckptdoc::deepspeed::detail
