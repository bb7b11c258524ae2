#include "deepspeed/detect.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "ckptdoc/error.h"
#include "deepspeed/content_roles.h"
#include "deepspeed/file_roles.h"

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

bool holds_only_a_deepspeed_checkpoint(const std::string& dir, std::string* foreign) {
  std::error_code ec;
  int tags = 0;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(it->path());
  if (ec) {
    *foreign = "an unreadable folder (" + ec.message() + ")";
    return false;
  }
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    const std::string name = p.filename().string();
    if (fs::is_symlink(p, ec)) {
      *foreign = "'" + name + "' (a symbolic link)";
      return false;
    }
    if (fs::is_regular_file(p, ec) && (name == "latest" || name == "latest_universal" || name == "zero_to_fp32.py"))
      continue;
    if (fs::is_directory(p, ec) && has_rank_files(p.string())) {
      ++tags;
      continue;
    }
    *foreign = "'" + name + "' (" + (fs::is_directory(p, ec) ? "a folder without DeepSpeed rank files" : "a file") + ")";
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
  if (!fs::exists(p, ec)) throw Error(path, "", "no such file or folder");
  if (fs::is_regular_file(p, ec)) {
    if (p.filename() == "latest") return locate_checkpoint(p.parent_path().string(), tag);
    return in_tag_dir(fs::absolute(p).parent_path());
  }
  if (!fs::is_directory(p, ec)) throw Error(path, "", "not a file or folder");

  if (tag) {
    const fs::path t = p / *tag;
    if (fs::is_directory(t, ec)) {
      Location loc = in_tag_dir(t);
      loc.tag = *tag;
      return loc;
    }
    if (fs::absolute(p).lexically_normal().filename() == *tag && has_rank_files(path)) return in_tag_dir(p);
    throw Error(path, "tag '" + *tag + "'", "no tag folder of that name");
  }
  if (fs::is_regular_file(p / "latest", ec)) {
    const std::string t = read_latest(p / "latest");
    if (!t.empty() && fs::is_directory(p / t, ec)) {
      Location loc = in_tag_dir(p / t);
      loc.tag = t;
      loc.from_latest = true;
      return loc;
    }
    if (!has_rank_files(path)) {
      throw Error((p / "latest").string(), "",
                  expected_found("the name of a tag folder next to it", "'" + t + "', which does not exist") +
                      "; pass --tag to choose another tag");
    }
  }
  // A save folder holding only a universal checkpoint: `latest_universal` names its tag (§7.1).
  if (!fs::exists(p / "latest", ec) && fs::is_regular_file(p / "latest_universal", ec)) {
    const std::string t = read_latest(p / "latest_universal");
    if (!t.empty() && fs::is_directory(p / t, ec)) {
      Location loc = in_tag_dir(p / t);
      loc.tag = t;
      loc.from_latest = true;
      return loc;
    }
    throw Error((p / "latest_universal").string(), "",
                expected_found("the name of a universal checkpoint folder next to it", "'" + t + "', which does not exist"));
  }
  if (has_rank_files(path)) return in_tag_dir(p);

  std::vector<std::string> tags;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && has_rank_files(it->path().string())) tags.push_back(it->path().filename().string());
  }
  std::sort(tags.begin(), tags.end());
  if (tags.size() == 1) return in_tag_dir(p / tags[0]);
  if (tags.empty()) {
    throw Error(path, "", "not a DeepSpeed checkpoint: no `latest` file, no tag folder and no "
                          "*_model_states.pt / *_optim_states.pt files");
  }
  std::string list;
  for (const auto& t : tags) list += (list.empty() ? "" : ", ") + t;
  throw Error(path, "", "several tag folders (" + list + ") and no `latest` file; pass --tag to choose one");
}

}  // namespace ckptdoc::deepspeed::detail
