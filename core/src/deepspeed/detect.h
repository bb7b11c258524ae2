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

// True when the folder holds at least one DeepSpeed rank file: named like one, or else recognised by its
// content (content_roles.h).
bool has_rank_files(const std::string& dir);

// Whether `dir` holds a DeepSpeed save folder and nothing else: `latest`, `latest_universal`,
// `zero_to_fp32.py` and tag folders (folders holding rank files). When not, `foreign` names the first entry
// that is not part of one (or says that no tag folder is there).
bool holds_only_a_deepspeed_checkpoint(const std::string& dir, std::string* foreign);

}  // namespace ckptdoc::deepspeed::detail
