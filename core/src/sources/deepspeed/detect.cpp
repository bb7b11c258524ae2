#include "sources/deepspeed/detect.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string_view>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/foreign_paths.h"
#include "sources/deepspeed/content_roles.h"
#include "sources/deepspeed/file_roles.h"

namespace fs = std::filesystem;

namespace ckptdoc::deepspeed::detail {
namespace {

std::string strip(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws));
  const auto last = s.find_last_not_of(ws);
  s.erase(last == std::string::npos ? 0 : last + 1);
  return s;
}

std::string read_latest(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return strip(ss.str());
}

Location in_tag_dir(const fs::path& dir) {
  const fs::path abs = fs::absolute(dir).lexically_normal();
  fs::path clean = abs;
  if (!clean.has_filename()) clean = clean.parent_path();
  Location loc;
  loc.tag_dir = clean.string();
  loc.tag = clean.filename().string();
  loc.save_dir = clean.parent_path().string();
  return loc;
}

// A tag names one folder inside the save folder: DeepSpeed writes `latest` as a bare folder name. Anything
// else
// (`../other/global_step5`, an absolute path, a link that leads out) is never followed, so no command reads
// or writes outside the folder it was given.
bool is_tag_name(const std::string& t) {
  return !t.empty() && t != "." && t != ".." && t.find('/') == std::string::npos &&
         t.find('\0') == std::string::npos;
}

bool stays_inside(const fs::path& save_dir, const std::string& tag) {
  std::error_code ec;
  if (!fs::is_symlink(save_dir / tag, ec)) return true;
  const fs::path target = fs::canonical(save_dir / tag, ec);
  if (ec) return false;
  const fs::path parent = fs::canonical(save_dir, ec);
  return !ec && target.parent_path() == parent;
}

std::string tag_folders_listed(const fs::path& save_dir) {
  std::error_code ec;
  std::vector<std::string> tags;
  for (fs::directory_iterator it(save_dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && has_rank_files(it->path().string()))
      tags.push_back(it->path().filename().string());
  std::sort(tags.begin(), tags.end());
  if (tags.empty()) return "no tag folder with DeepSpeed rank files is here";
  std::string list;
  for (const auto& t : tags) list += (list.empty() ? "" : ", ") + t;
  return "tag folders here: " + list;
}

// The tag a `latest`-style file names, checked; throws naming the file and its content otherwise.
std::string checked_tag_from(const fs::path& file, const std::string& t) {
  if (is_tag_name(t) && stays_inside(file.parent_path(), t)) return t;
  throw Error(ErrorKind::PathEscape, file.string(), "",
              expected_found(
                  "the name of a tag folder inside " + file.parent_path().string(),
                  "'" + t + "', which " + (is_tag_name(t) ? "is a link that leads out of it" : "is a path")) +
                  ". ckptdoc follows no path out of the save folder; pass --tag to choose one (" +
                  tag_folders_listed(file.parent_path()) + ")");
}

}  // namespace

bool has_rank_files(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> others;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (classify_file_name(it->path().filename().string())) return true;
    if (it->is_regular_file(ec)) others.push_back(it->path());
  }
  // Renamed rank files: recognised by what they hold (only when no name says so; reads pickles only).
  for (const auto& p : others)
    if (classify_file_by_content(p.string())) return true;
  return false;
}

namespace {

// Sorted entries of a folder; false (and `foreign` set) when it cannot be read.
bool entries_of(const fs::path& dir, std::vector<fs::path>& entries, std::string* foreign) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    entries.push_back(it->path());
  if (ec) {
    *foreign = "an unreadable folder " + dir.string() + " (" + ec.message() + ")";
    return false;
  }
  std::sort(entries.begin(), entries.end());
  return true;
}

bool ends_with_pt(const std::string& name) {
  return name.size() > 3 && name.compare(name.size() - 3, 3, ".pt") == 0;
}

// "'a/b/c' (what)": an entry a folder should not hold, as the refusal names it (built by appending: it runs
// per entry).
std::string quoted_entry(std::initializer_list<std::string_view> parts, std::string_view what = {}) {
  std::string s = "'";
  for (const auto& p : parts) s.append(s.size() > 1 ? "/" : "").append(p);
  s.append("'");
  if (!what.empty()) s.append(" ").append(what);
  return s;
}

// A universal tag folder's zero/: optimizer_state.pt and one folder of .pt files per param.
bool only_universal_param_files(const fs::path& zero, const std::string& rel, std::string* foreign) {
  std::vector<fs::path> entries;
  if (!entries_of(zero, entries, foreign)) return false;
  std::error_code ec;
  for (const auto& p : entries) {
    const std::string name = p.filename().string();
    if (fs::is_symlink(p, ec)) return *foreign = quoted_entry({rel, name}, "(a symbolic link)"), false;
    if (fs::is_regular_file(p, ec) && name == "optimizer_state.pt") continue;
    if (!fs::is_directory(p, ec)) return *foreign = quoted_entry({rel, name}, "(a file)"), false;
    std::vector<fs::path> states;
    if (!entries_of(p, states, foreign)) return false;
    for (const auto& f : states)
      if (fs::is_symlink(f, ec) || !fs::is_regular_file(f, ec) || !ends_with_pt(f.filename().string()))
        return *foreign = quoted_entry({rel, name, f.filename().string()}), false;
  }
  return true;
}

// A tag folder: rank files (by name, or by content for a .pt file) and a universal zero/ folder, nothing
// else.
bool only_rank_files(const fs::path& tag, std::string* foreign) {
  std::vector<fs::path> entries;
  if (!entries_of(tag, entries, foreign)) return false;
  const std::string rel = tag.filename().string();
  std::error_code ec;
  for (const auto& p : entries) {
    const std::string name = p.filename().string();
    if (fs::is_symlink(p, ec)) return *foreign = quoted_entry({rel, name}, "(a symbolic link)"), false;
    if (fs::is_directory(p, ec) && name == "zero") {
      if (!only_universal_param_files(p, rel + "/zero", foreign)) return false;
      continue;
    }
    if (fs::is_regular_file(p, ec) &&
        (classify_file_name(name) || (ends_with_pt(name) && classify_file_by_content(p.string()))))
      continue;
    *foreign = quoted_entry({rel, name}, fs::is_directory(p, ec) ? "(a folder DeepSpeed does not write)"
                                                                 : "(a file DeepSpeed does not write)");
    return false;
  }
  return true;
}

// The folders directly in `dir` that hold a PyTorch Distributed Checkpoint's .metadata (torchtitan's
// checkpoint folder keeps one per save, step-N/), sorted.
std::vector<fs::path> dcp_folders_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && fs::is_regular_file(it->path() / ".metadata", ec)) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

// The highest step-N among `folders` (torchtitan's CheckpointManager resumes from it); empty when none is so
// named.
std::string highest_step_folder(const std::vector<fs::path>& folders) {
  static const std::regex step_name(R"(step-(\d+))");
  std::string highest;
  long long highest_step = -1;
  for (const auto& f : folders) {
    std::smatch m;
    const std::string name = f.filename().string();
    if (std::regex_match(name, m, step_name) && m[1].length() < 18 && std::stoll(m[1]) > highest_step)
      highest_step = std::stoll(m[1]), highest = name;
  }
  return highest;
}

// `dir` holds DCP folders and no checkpoint itself: which to name, and the one torchtitan resumes from (its
// CheckpointManager takes the highest step-N holding .metadata).
Error dcp_folders_refusal(const std::string& dir, const std::vector<fs::path>& folders) {
  std::string list;
  for (const auto& f : folders) list += (list.empty() ? "" : ", ") + f.string();
  const std::string highest = highest_step_folder(folders);
  return {ErrorKind::InvalidRequest, dir, "",
          "holds no checkpoint itself but " + std::to_string(folders.size()) +
              " PyTorch Distributed Checkpoint folder" + (folders.size() > 1 ? "s" : "") + ": " + list +
              "; pass the one to open" +
              (highest.empty() ? ""
                               : " (a torchtitan checkpoint folder: its CheckpointManager resumes from the "
                                 "highest step-N, " +
                                     highest + ")")};
}

// `dir` holds no checkpoint itself, but DeepSpeed checkpoints (`below`), Hugging Face weights files and
// folders other sources read (`foreign`, found a few levels down by the registry) are there: all named, so
// the user picks one and nothing is opened in their place.
Error things_below_refusal(const std::string& dir, const std::vector<std::string>& below,
                           const std::vector<ForeignCheckpoint>& foreign,
                           const std::vector<std::string>& weights) {
  std::string list;
  const auto add = [&list](const std::string& item) { list += (list.empty() ? "" : ", ") + item; };
  for (const auto& b : below) add(b);
  for (const auto& f : foreign) add(f.path + " (" + f.description + ")");
  for (const auto& w : weights) add((fs::path(dir) / w).string() + " (Hugging Face weights)");
  // Save folders of one run side by side (torchtitan's checkpoint/step-N): the one it resumes from.
  std::vector<fs::path> siblings;
  for (const auto& f : foreign)
    if (fs::path(f.path).parent_path() == fs::path(foreign.front().path).parent_path())
      siblings.emplace_back(f.path);
  const std::string highest = below.empty() && weights.empty() && siblings.size() == foreign.size()
                                  ? highest_step_folder(siblings)
                                  : "";
  const size_t count = below.size() + foreign.size() + weights.size();
  return {ErrorKind::InvalidRequest, dir, "",
          "holds no checkpoint itself but " + std::to_string(count) + (count > 1 ? " things" : " thing") +
              " below it that " + (count > 1 ? "are" : "is") + ": " + list + "; pass the one to open" +
              (highest.empty() ? ""
                               : " (torchtitan's CheckpointManager resumes from the highest step-N, " +
                                     (siblings.front().parent_path() / highest).string() + ")")};
}

}  // namespace

bool hugging_face_weights_name(const std::string& name) {
  static const std::regex names(
      R"((model|pytorch_model|adapter_model|diffusion_pytorch_model|tf_model|flax_model)(-\d+-of-\d+)?\.(safetensors|bin|h5|msgpack)(\.index\.json)?)");
  // Accelerate's FSDP FULL_STATE_DICT save_state: the whole model as torch.save (fsdp_utils.save_fsdp_model).
  static const std::regex fsdp_full(R"(pytorch_model_fsdp(_\d+)?\.bin)");
  if (std::regex_match(name, names) || std::regex_match(name, fsdp_full)) return true;
  return name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0;
}

std::vector<std::string> checkpoints_below(const std::string& dir) {
  constexpr int kDepth = 3;
  constexpr size_t kMaxFolders = 4000;
  std::vector<std::string> found;
  std::vector<std::pair<fs::path, int>> queue{{fs::path(dir), 0}};
  size_t visited = 0;
  std::error_code ec;
  for (size_t i = 0; i < queue.size() && visited < kMaxFolders; ++i) {
    const auto [folder, depth] = queue[i];
    ++visited;
    std::vector<fs::path> children;
    bool rank_files = false;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_symlink(ec)) continue;
      if (it->is_directory(ec))
        children.push_back(it->path());
      else if (classify_file_name(it->path().filename().string()))
        rank_files = true;
    }
    ec.clear();
    if (depth > 0) {
      const bool save_folder =
          fs::is_regular_file(folder / "latest", ec) || fs::is_regular_file(folder / "latest_universal", ec);
      if (save_folder || rank_files) {
        found.push_back(folder.string());
        continue;  // a checkpoint's own folders are not searched
      }
    }
    if (depth < kDepth)
      for (auto& c : children) queue.emplace_back(std::move(c), depth + 1);
  }
  std::sort(found.begin(), found.end());
  return found;
}

bool holds_only_a_deepspeed_checkpoint(const std::string& dir, std::string* foreign) {
  std::error_code ec;
  int tags = 0;
  std::vector<fs::path> entries;
  if (!entries_of(dir, entries, foreign)) return false;
  for (const auto& p : entries) {
    const std::string name = p.filename().string();
    if (fs::is_symlink(p, ec)) {
      *foreign = "'" + name + "' (a symbolic link)";
      return false;
    }
    if (fs::is_regular_file(p, ec) && (name == "latest" || name == "latest_universal" ||
                                       name == "zero_to_fp32.py" || name == "zero_to_torch.py"))
      continue;
    if (fs::is_directory(p, ec) && has_rank_files(p.string())) {
      if (!only_rank_files(p, foreign)) return false;
      ++tags;
      continue;
    }
    *foreign = "'" + name + "' (" +
               (fs::is_directory(p, ec) ? "a folder without DeepSpeed rank files" : "a file") + ")";
    return false;
  }
  if (tags == 0) {
    *foreign = "no tag folder with DeepSpeed rank files";
    return false;
  }
  return true;
}

Location locate_checkpoint(const std::string& path, const std::optional<std::string>& tag) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::exists(p, ec)) throw Error(ErrorKind::NotFound, path, "", "no such file or folder");
  if (fs::is_regular_file(p, ec)) {
    if (p.filename() == "latest") return locate_checkpoint(p.parent_path().string(), tag);
    return in_tag_dir(fs::absolute(p).parent_path());
  }
  if (!fs::is_directory(p, ec)) throw Error(ErrorKind::Unsupported, path, "", "not a file or folder");

  if (tag) {
    if (!is_tag_name(*tag) || !stays_inside(p, *tag))
      throw Error(ErrorKind::PathEscape, path, "tag '" + *tag + "'",
                  "a tag is the name of one folder inside the save folder, not a path (" +
                      tag_folders_listed(p) + ")");
    const fs::path t = p / *tag;
    if (fs::is_directory(t, ec)) {
      Location loc = in_tag_dir(t);
      loc.tag = *tag;
      return loc;
    }
    if (fs::absolute(p).lexically_normal().filename() == *tag && has_rank_files(path)) return in_tag_dir(p);
    throw Error(ErrorKind::NotFound, path, "tag '" + *tag + "'",
                "no tag folder of that name (" + tag_folders_listed(p) + ")");
  }
  if (fs::is_regular_file(p / "latest", ec)) {
    const std::string t = read_latest(p / "latest");
    if (!t.empty()) checked_tag_from(p / "latest", t);
    if (!t.empty() && fs::is_directory(p / t, ec)) {
      Location loc = in_tag_dir(p / t);
      loc.tag = t;
      loc.from_latest = true;
      return loc;
    }
    if (!has_rank_files(path)) {
      throw Error(ErrorKind::NotFound, (p / "latest").string(), "",
                  expected_found("the name of a tag folder next to it", "'" + t + "', which does not exist") +
                      "; pass --tag to choose another tag (" + tag_folders_listed(p) + ")");
    }
  }
  // A save folder holding only a universal checkpoint: `latest_universal` names its tag (§7.1).
  if (!fs::exists(p / "latest", ec) && fs::is_regular_file(p / "latest_universal", ec)) {
    const std::string t = read_latest(p / "latest_universal");
    if (!t.empty()) checked_tag_from(p / "latest_universal", t);
    if (!t.empty() && fs::is_directory(p / t, ec)) {
      Location loc = in_tag_dir(p / t);
      loc.tag = t;
      loc.from_latest = true;
      return loc;
    }
    throw Error(ErrorKind::NotFound, (p / "latest_universal").string(), "",
                expected_found("the name of a universal checkpoint folder next to it",
                               "'" + t + "', which does not exist"));
  }
  if (has_rank_files(path)) return in_tag_dir(p);

  std::vector<std::string> tags;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && has_rank_files(it->path().string()))
      tags.push_back(it->path().filename().string());
  }
  std::sort(tags.begin(), tags.end());
  if (tags.size() == 1) return in_tag_dir(p / tags[0]);
  if (tags.empty()) {
    // One folder too high (`run/` holding `checkpoint/`): the checkpoint below is opened and the report says
    // which; several, or one beside Hugging Face weights, are listed for the user to choose.
    const auto below = checkpoints_below(path);
    std::vector<std::string> weights;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec) && hugging_face_weights_name(it->path().filename().string()))
        weights.push_back(it->path().filename().string());
    std::sort(weights.begin(), weights.end());
    // Folders other sources read (a torchtitan run's checkpoint/step-N, a Megatron save), found by the
    // registry: a DeepSpeed checkpoint beside them is not opened in their place.
    const std::vector<ForeignCheckpoint> foreign = foreign_checkpoints_below(path);
    const std::vector<fs::path> direct_dcp = dcp_folders_in(p);
    if (below.size() == 1 && weights.empty() && foreign.empty()) {
      Location loc = locate_checkpoint(below.front(), std::nullopt);
      loc.opened_below = fs::absolute(p).lexically_normal().string();
      return loc;
    }
    if (below.empty() && weights.empty() && !direct_dcp.empty() && foreign.size() <= direct_dcp.size())
      throw dcp_folders_refusal(path, direct_dcp);
    if (!below.empty() || !foreign.empty()) throw things_below_refusal(path, below, foreign, weights);
    throw Error(ErrorKind::NotFound, path, "",
                "not a DeepSpeed checkpoint: no `latest` file, no tag folder and no "
                "*_model_states.pt / *_optim_states.pt files");
  }
  std::string list;
  for (const auto& t : tags) list += (list.empty() ? "" : ", ") + t;
  throw Error(ErrorKind::InvalidRequest, path, "",
              "several tag folders (" + list + ") and no `latest` file; pass --tag to choose one");
}

}  // namespace ckptdoc::deepspeed::detail
