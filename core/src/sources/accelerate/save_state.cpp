// The layout of an Accelerate save_state folder: which subfolders are DCP parts, which files are beside them.
#include "sources/accelerate/save_state.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/dcp/metadata.h"

namespace ckptdoc::accelerate {
namespace {

namespace fs = std::filesystem;
constexpr int kMaxListed = 4096;  // a save_state folder holds a handful of entries; never walk a huge one

// `<prefix><digits>` -> the number; -1 otherwise.
int indexed(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  int n = -1;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size();
  const auto [p, ec] = std::from_chars(first, last, n);
  return ec == std::errc() && p == last && n >= 0 ? n : -1;
}

}  // namespace

bool is_save_state_folder(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return false;
  int looked = 0;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end && looked < kMaxListed;
       it.increment(ec), ++looked)
    if (indexed(it->path().filename().string(), "pytorch_model_fsdp_") >= 0 &&
        dcp::is_dcp_folder(it->path().string()))
      return true;
  return false;
}

SaveState read_save_state(const std::string& dir) {
  SaveState s;
  s.dir = dir;
  std::error_code ec;
  int looked = 0;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end && looked < kMaxListed;
       it.increment(ec), ++looked) {
    const std::string name = it->path().filename().string();
    if (it.depth() == 0 && it->is_directory(ec)) {
      const int model = indexed(name, "pytorch_model_fsdp_");
      const int optimizer = indexed(name, "optimizer_");
      if (model >= 0 || optimizer >= 0) {
        s.parts.push_back({name, model >= 0 ? "model" : "optimizer", model >= 0 ? model : optimizer});
        it.disable_recursion_pending();  // the DCP reader lists and names the part's own files
        continue;
      }
    }
    if (it->is_regular_file(ec)) s.other_files.push_back(fs::relative(it->path(), dir, ec).string());
  }
  std::sort(s.parts.begin(), s.parts.end(), [](const Part& a, const Part& b) {
    return a.role != b.role ? a.role == "model" : a.index < b.index;
  });
  std::sort(s.other_files.begin(), s.other_files.end());
  if (std::none_of(s.parts.begin(), s.parts.end(), [](const Part& p) { return p.role == "model"; }))
    throw Error(ErrorKind::NotFound, dir, "",
                "no pytorch_model_fsdp_<i>/ folder: not an Accelerate FSDP save_state folder");
  return s;
}

}  // namespace ckptdoc::accelerate
