#include "recent_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace ckptdoc::imgui_view {

std::string RecentFiles::file() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  const fs::path base = xdg && *xdg ? fs::path(xdg) : fs::path(home ? home : ".") / ".config";
  return (base / "ckptdoc" / "imgui-recent").string();
}

void RecentFiles::load() {
  paths_.clear();
  std::ifstream in(file());
  for (std::string line; std::getline(in, line) && paths_.size() < kMax;)
    if (!line.empty()) paths_.push_back(line);
}

void RecentFiles::add(const std::string& path) {
  paths_.erase(std::remove(paths_.begin(), paths_.end(), path), paths_.end());
  paths_.insert(paths_.begin(), path);
  if (paths_.size() > kMax) paths_.resize(kMax);
  save();
}

void RecentFiles::clear() {
  paths_.clear();
  save();
}

// A small settings file, written through a temp file and a rename so a crash never leaves half a list.
void RecentFiles::save() const {
  std::error_code ec;
  const fs::path f = file();
  fs::create_directories(f.parent_path(), ec);
  const fs::path tmp = f.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& p : paths_) out << p << "\n";
    if (!out) return;
  }
  fs::rename(tmp, f, ec);
}

}  // namespace ckptdoc::imgui_view
