#pragma once
// The ImGui view's recent checkpoints, one path a line in $XDG_CONFIG_HOME/ckptdoc/imgui-recent (default
// ~/.config), newest first, at most 10. Read once at start; written (atomically) when a path is added.
#include <string>
#include <vector>

namespace ckptdoc::imgui_view {

class RecentFiles {
 public:
  static constexpr size_t kMax = 10;
  void load();
  void add(const std::string& path);  // moves it to the front and saves
  void clear();
  const std::vector<std::string>& paths() const { return paths_; }
  static std::string file();  // where the list lives

 private:
  void save() const;
  std::vector<std::string> paths_;
};

}  // namespace ckptdoc::imgui_view
