#include "sources/deepspeed/output_folder_check.h"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/request_field.h"
#include "io/path_relation.h"
#include "io/writer_lock.h"
#include "sources/deepspeed/detect.h"

namespace fs = std::filesystem;

namespace ckptdoc::deepspeed::detail {

namespace {
// Fields are marked ("{force}") and named as the front end names them (request_field.h).
// `why` is a text with field marks ("{force}") and "{}" for each of `paths`, which are never rendered.
[[noreturn]] void refuse(ErrorKind kind, const std::string& file, const std::string& where,
                         const std::string& why, std::initializer_list<std::string_view> paths = {}) {
  throw Error(kind, file, request_text(where), request_text(why, paths));
}
}  // namespace

CheckedOutputFolder check_output_folder(const std::string& output, const std::vector<std::string>& inputs,
                                        bool force) {
  if (output.empty()) refuse(ErrorKind::InvalidRequest, "", "{output}", "an output folder is required");
  CheckedOutputFolder result;
  result.path = io::normalised_path(output);
  const std::string& out = result.path;
  for (const auto& input : inputs) {
    const std::string in = io::normalised_path(input);
    if (io::inside_or_equal(out, in))
      refuse(ErrorKind::InvalidRequest, "", "{output}",
             "the output {} is inside the input checkpoint {}; choose a new folder elsewhere (the input is "
             "never "
             "modified)",
             {out, in});
    if (io::inside_or_equal(in, out))
      refuse(ErrorKind::InvalidRequest, "", "{output}",
             "the output {} contains the input checkpoint; choose a new folder", {out});
  }
  // Before anything looks at `out`: a killed replacement's old output goes back where it was.
  result.restored_from = restore_interrupted_replacement(out);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(out, ec))) return result;
  if (!fs::is_directory(out, ec))
    refuse(ErrorKind::OutputExists, "", "{output}", "{} exists and is not a folder", {out});
  result.existed = true;
  if (fs::is_empty(out, ec)) return result;
  if (!force)
    refuse(ErrorKind::OutputExists, "", "{output}",
           "{} exists and is not empty (pass {force} to replace a checkpoint there)", {out});
  // --force replaces what an earlier run (or DeepSpeed) wrote there, recognised by its content, nothing else.
  std::string foreign;
  if (!holds_only_a_deepspeed_checkpoint(out, &foreign))
    refuse(ErrorKind::OutputExists, "", "{force}",
           "{} holds {}, which is not part of a DeepSpeed checkpoint; {force} replaces only a folder that "
           "holds a "
           "DeepSpeed checkpoint and nothing else. Choose another output folder, or move those files away "
           "yourself",
           {out, foreign});
  return result;
}

namespace {

struct Leftover {
  fs::path path;
  std::string kind;  // "partial-", "replaced-" or "tmp-"
  fs::file_time_type changed;
};

// What killed writers left beside `output` ("<name>.ckptdoc-<kind><pid>") that is provably theirs alone: no
// process of that id runs here, and it was last changed over a minute ago or the file system proves no one
// holds the claim every ckptdoc writer takes. A recent leftover may be a live writer's on another host
// (shared storage) or in another pid namespace.
std::vector<Leftover> dead_leftovers(const fs::path& out) {
  std::vector<Leftover> found;
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  const std::string prefix = out.filename().string() + ".ckptdoc-";
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = name.substr(prefix.size());
    std::string kind;
    for (const char* k : {"partial-", "replaced-", "tmp-"})
      if (rest.rfind(k, 0) == 0) rest = rest.substr(std::char_traits<char>::length(k)), kind = k;
    if (kind.empty() || rest.empty() || rest.size() > 9 ||
        rest.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(rest));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer may still run
    std::error_code tec;
    const auto changed = fs::last_write_time(it->path(), tec);
    if (tec || (now - changed < std::chrono::minutes(1) && !io::provably_abandoned(it->path().string())))
      continue;
    found.push_back({it->path(), kind, changed});
  }
  return found;
}

}  // namespace

std::vector<std::string> remove_dead_leftovers(const std::string& output) {
  std::vector<std::string> removed;
  const fs::path out = fs::path(output).lexically_normal();
  std::error_code ec;
  const bool out_exists = fs::exists(fs::symlink_status(out, ec));
  for (const auto& left : dead_leftovers(out)) {
    // Without `out`, a replaced-aside folder is the only copy of the output it held: never removed here.
    if (left.kind == "replaced-" && !out_exists) continue;
    std::error_code rec;
    fs::remove_all(left.path, rec);
    if (!rec) removed.push_back(left.path.string());
  }
  return removed;
}

std::string restore_interrupted_replacement(const std::string& output) {
  const fs::path out = fs::path(output).lexically_normal();
  std::error_code ec;
  if (fs::exists(fs::symlink_status(out, ec))) return {};
  const Leftover* newest = nullptr;
  const auto left = dead_leftovers(out);
  for (const auto& l : left)
    if (l.kind == "replaced-" && (!newest || l.changed > newest->changed)) newest = &l;
  if (!newest) return {};
  fs::rename(newest->path, out, ec);  // fails harmlessly when another process made `out` meanwhile
  return ec ? std::string() : newest->path.string();
}

void check_output_file(const std::string& output, bool force) {
  std::error_code ec;
  const bool exists = fs::exists(fs::symlink_status(output, ec));
  if (exists && fs::is_directory(output, ec))
    refuse(ErrorKind::InvalidRequest, output, "{output}",
           "is a folder: name a file, or pass --max-shard-size to write a sharded folder into it");
  if (exists && !force)
    refuse(ErrorKind::OutputExists, output, "{output}", "exists (pass {force} to replace it)");
}

}  // namespace ckptdoc::deepspeed::detail
