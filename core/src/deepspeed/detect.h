#pragma once
// Where a DeepSpeed checkpoint's tag folder is, given a save folder, a tag folder or one rank file (§2).
#include <optional>
#include <string>

namespace ckptdoc::deepspeed::detail {

struct Location {
  std::string save_dir;  // folder holding `latest` (or the tag folder's parent)
  std::string tag;
  std::string tag_dir;   // absolute
  bool from_latest = false;
};

// Throws ckptdoc::Error when no tag folder can be found (nothing usable).
Location locate_checkpoint(const std::string& path, const std::optional<std::string>& tag);

// True when the folder holds at least one file named like a DeepSpeed rank file.
bool has_rank_files(const std::string& dir);

}  // namespace ckptdoc::deepspeed::detail
