#include "deepspeed/output_folder_check.h"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/request_field.h"
#include "deepspeed/detect.h"
#include "io/path_relation.h"
#include "io/writer_lock.h"

namespace fs = std::filesystem;

namespace ckptdoc::deepspeed::detail {

namespace {
// Fields are marked ("{force}") and named as the front end names them (request_field.h).
[[noreturn]] void refuse(ErrorKind kind, const std::string& file, const std::string& where,
                         const std::string& why) {
  throw Error(kind, file, request_text(where), request_text(why));
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
    if (io::inside_or_equal(out, in)) {
      std::string why = "the output " + out;
      why += " is inside the input checkpoint " + in;
      why += "; choose a new folder elsewhere (the input is never modified)";
      refuse(ErrorKind::InvalidRequest, "", "{output}", why);
    }
    if (io::inside_or_equal(in, out))
      refuse(ErrorKind::InvalidRequest, "", "{output}",
             "the output " + out + " contains the input checkpoint; choose a new folder");
  }
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(out, ec))) return result;
  if (!fs::is_directory(out, ec))
    refuse(ErrorKind::OutputExists, "", "{output}", out + " exists and is not a folder");
  result.existed = true;
  if (fs::is_empty(out, ec)) return result;
  if (!force)
    refuse(ErrorKind::OutputExists, "", "{output}",
           out + " exists and is not empty (pass {force} to replace a checkpoint there)");
  // --force replaces what an earlier run (or DeepSpeed) wrote there, recognised by its content, nothing else.
  std::string foreign;
  if (!holds_only_a_deepspeed_checkpoint(out, &foreign))
    refuse(
        ErrorKind::OutputExists, "", "{force}",
        out + " holds " + foreign +
            ", which is not part of a DeepSpeed checkpoint; {force} replaces only a folder that holds a "
            "DeepSpeed checkpoint and nothing else. Choose another output folder, or move those files away "
            "yourself");
  return result;
}

std::vector<std::string> remove_dead_leftovers(const std::string& output) {
  std::vector<std::string> removed;
  const fs::path out = fs::path(output).lexically_normal();
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  const std::string prefix = out.filename().string() + ".ckptdoc-";
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = name.substr(prefix.size());
    bool ours = false;
    for (const char* kind : {"partial-", "replaced-", "tmp-"})
      if (rest.rfind(kind, 0) == 0) rest = rest.substr(std::char_traits<char>::length(kind)), ours = true;
    if (!ours || rest.empty() || rest.size() > 9 || rest.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(rest));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer may still run
    std::error_code tec;
    const auto changed = fs::last_write_time(it->path(), tec);
    // A recent leftover may be a live writer's on another host (shared storage) or in another pid namespace,
    // unless the file system proves its writer gone (no one holds the claim every ckptdoc writer takes).
    if (tec || (now - changed < std::chrono::minutes(1) && !io::provably_abandoned(it->path().string())))
      continue;
    std::error_code rec;
    fs::remove_all(it->path(), rec);
    if (!rec) removed.push_back(it->path().string());
  }
  return removed;
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
