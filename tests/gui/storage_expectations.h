#pragma once
// A self-reporting source (PyTorch DCP, Accelerate FSDP, Megatron-core) as the CLI reports it and as a view
// shows it, in one shape so that a test compares them whole: the storage files with the items each holds, the
// stored keys, and the findings with the verdict.
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace ckptdoc::gui {
class MainWindow;
}

namespace ckptdoc::test {

struct StorageShown {
  // file (relative to the opened folder) -> its items (key, byte offset, length), sorted
  std::map<std::string, std::vector<std::tuple<std::string, uint64_t, uint64_t>>> files;
  std::vector<std::string> keys;                                            // in metadata order
  std::vector<std::tuple<std::string, std::string, std::string>> findings;  // code, severity, message
  std::string verdict;
};

// `ckptdoc inspect PATH --json` and `ckptdoc diagnose PATH --json` (its exit code in *diagnose_exit).
StorageShown cli_storage(const std::string& path, int* diagnose_exit = nullptr);
// The Storage tab's map and keys table, the Overview's findings model and verdict label of `w`.
StorageShown qt_storage(gui::MainWindow& w);
// The ImGui script's save-storage and save-findings files (the keys are not in them: left empty).
StorageShown imgui_storage(const std::string& storage_tsv, const std::string& findings_tsv);
// One line per difference, empty when equal (keys compared when both have them).
std::string storage_difference(const StorageShown& cli, const StorageShown& view);

}  // namespace ckptdoc::test
