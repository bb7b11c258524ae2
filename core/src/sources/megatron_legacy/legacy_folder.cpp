// The legacy Megatron folder: tracker, iteration folder and mp_rank_* folders (legacy_folder.h).
#include "legacy_folder.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckptdoc/error.h"

namespace ckptdoc::megatron_legacy {
namespace fs = std::filesystem;

namespace {

constexpr const char* kTracker = "latest_checkpointed_iteration.txt";
constexpr uintmax_t kMaxTracker = 1 << 10;  // a number or "release"

std::optional<std::string> tracker_text(const fs::path& save) {
  std::error_code ec;
  const fs::path p = save / kTracker;
  if (!fs::is_regular_file(p, ec) || fs::file_size(p, ec) > kMaxTracker || ec) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in) return std::nullopt;
  std::string t = s.str();
  const auto b = t.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return std::string();
  return t.substr(b, t.find_last_not_of(" \t\r\n") - b + 1);
}

// "mp_rank_01_000" -> {1, 0}; nullopt for any other name.
std::optional<std::vector<int>> rank_numbers(const std::string& name) {
  const std::string prefix = "mp_rank_";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  std::vector<int> out;
  std::stringstream parts(name.substr(prefix.size()));
  std::string part;
  while (std::getline(parts, part, '_')) {
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    out.push_back(std::stoi(part));
  }
  if (out.empty() || out.size() > 3) return std::nullopt;
  return out;
}

bool holds_rank_folders(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || fs::exists(dir / "metadata.json", ec)) return false;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && it->path().filename().string().rfind("mp_rank_", 0) == 0) return true;
  return false;
}

std::optional<std::string> iteration_folder_name(const std::string& named) {
  if (named == "release") return named;
  if (named.empty() || named.size() > 18 || named.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  char buf[32];
  std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(std::stoll(named)));
  return std::string(buf);
}

std::optional<int64_t> iteration_of_name(const std::string& name) {
  if (name.size() <= 5 || name.size() > 23 || name.rfind("iter_", 0) != 0 ||
      name.find_first_not_of("0123456789", 5) != std::string::npos)
    return std::nullopt;
  return std::stoll(name.substr(5));
}

}  // namespace

bool is_legacy_path(const std::string& path) {
  try {
    const fs::path p(path);
    if (const auto named = tracker_text(p)) {
      const auto folder = iteration_folder_name(*named);
      std::error_code ec;
      return folder && !fs::is_symlink(fs::symlink_status(p / *folder, ec)) &&
             holds_rank_folders(p / *folder);
    }
    return holds_rank_folders(p);
  } catch (const std::exception&) {
    return false;
  }
}

LegacyFolder resolve(const std::string& path) {
  LegacyFolder f;
  const fs::path p(path);
  std::error_code ec;
  fs::path dir = p;
  if (fs::is_regular_file(p / kTracker, ec)) {
    f.save_dir = p.string();
    f.tracker = (p / kTracker).string();
    const auto named = tracker_text(p);
    if (!named) throw Error(ErrorKind::Io, f.tracker, "", "cannot be read (or is over 1 KiB)");
    const auto folder = iteration_folder_name(*named);
    if (!folder)
      throw Error(ErrorKind::Corrupt, f.tracker, "",
                  "names '" + named->substr(0, 64) + "', which is not an iteration number (nor \"release\")");
    dir = p / *folder;
    if (fs::is_symlink(fs::symlink_status(dir, ec)) || !fs::is_directory(dir, ec))
      throw Error(
          ErrorKind::NotFound, f.tracker, "",
          "names " + *named + ", but " + dir.string() + " is not a folder (symbolic links are not followed)");
  }
  f.dir = dir.string();
  f.iteration = iteration_of_name(dir.filename().string());
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("mp_rank_", 0) != 0) continue;
    const auto numbers = rank_numbers(name);
    if (!numbers || !it->is_directory(ec) || it->is_symlink(ec))
      throw Error(ErrorKind::Unsupported, it->path().string(), "",
                  "is not an mp_rank_TT[_PPP][_EEE] folder of Megatron-LM's legacy layout");
    RankFolder r;
    r.name = name;
    r.numbers = *numbers;
    r.model_file = (it->path() / kModelFile).string();
    r.shown = name + "/" + kModelFile;
    std::error_code ec2;
    for (fs::directory_iterator file(it->path(), ec2), fend; !ec2 && file != fend; file.increment(ec2)) {
      const std::string fname = file->path().filename().string();
      if (fname == "distrib_optim.pt")
        r.distrib_optim = true;
      else if (fname != kModelFile)
        r.others.push_back(std::string(name).append("/").append(fname));
    }
    std::sort(r.others.begin(), r.others.end());
    f.ranks.push_back(std::move(r));
  }
  if (ec) throw Error(ErrorKind::Io, f.dir, "", "cannot be listed: " + ec.message());
  if (f.ranks.empty())
    throw Error(ErrorKind::NotFound, f.dir, "", "holds no mp_rank_* folder: not a legacy Megatron iteration");
  std::sort(f.ranks.begin(), f.ranks.end(),
            [](const RankFolder& a, const RankFolder& b) { return a.numbers < b.numbers; });
  return f;
}

void place_ranks(LegacyFolder& folder, int pp_size, int ep_size) {
  const size_t want = 1 + (pp_size > 1) + (ep_size > 1);
  for (auto& r : folder.ranks) {
    if (r.numbers.size() != want)
      throw Error(ErrorKind::Unsupported, folder.dir + "/" + r.name, "",
                  "does not fit the saved pipeline size " + std::to_string(pp_size) + " and expert size " +
                      std::to_string(ep_size) + " (Megatron-LM names it mp_rank_TT" +
                      (pp_size > 1 ? "_PPP" : "") + (ep_size > 1 ? "_EEE" : "") + ")");
    r.tp = r.numbers[0];
    r.pp = pp_size > 1 ? r.numbers[1] : 0;
    r.ep = ep_size > 1 ? r.numbers.back() : 0;
  }
}

}  // namespace ckptdoc::megatron_legacy
