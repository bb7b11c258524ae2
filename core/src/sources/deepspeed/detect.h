#pragma once
// Where a DeepSpeed checkpoint's tag folder is, given a save folder, a tag folder or one rank file (§2).
#include <optional>
#include <string>
#include <vector>

namespace ckptdoc::deepspeed::detail {

struct Location {
  std::string save_dir;  // folder holding `latest` (or the tag folder's parent)
  std::string tag;
  std::string tag_dir;  // absolute
  bool from_latest = false;
  std::string opened_below;  // the folder the user named, when it held no checkpoint itself and this one, the
                             // only checkpoint below it, was opened instead
};

// Whether a file name is one Hugging Face gives weights (model.safetensors, pytorch_model-00001-of-00002.bin,
// adapter_model.bin, their *.index.json): a folder is a weights folder only with such a name (or any
// *.safetensors file); a lone *.bin or *.pt beside a checkpoint is not (zero_to_fp32.py's output, a copy).
bool hugging_face_weights_name(const std::string& name);

// DeepSpeed checkpoints below `dir` (not `dir` itself), at most 3 levels down: save folders holding `latest`
// (or `latest_universal`), and tag folders with rank files and no such parent. Sorted; bounded work (at most
// a few thousand folders are visited, links are not followed).
std::vector<std::string> checkpoints_below(const std::string& dir);

// Throws ckptdoc::Error when no tag folder can be found (nothing usable).
Location locate_checkpoint(const std::string& path, const std::optional<std::string>& tag);

// True when the folder holds at least one DeepSpeed rank file: named like one, or else recognised by its
// content (content_roles.h).
bool has_rank_files(const std::string& dir);

// Whether `dir` holds a DeepSpeed save folder and nothing else: `latest`, `latest_universal`,
// `zero_to_fp32.py`, `zero_to_torch.py` and tag folders holding only rank files (a universal tag folder: its
// zero/ param files too), at every depth. When not, `foreign` names the first entry that is not part of one,
// relative to `dir` (or says that no tag folder is there), so --force never removes a file DeepSpeed or
// ckptdoc did not write.
bool holds_only_a_deepspeed_checkpoint(const std::string& dir, std::string* foreign);

}  // namespace ckptdoc::deepspeed::detail
