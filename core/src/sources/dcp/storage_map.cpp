// The storage map of a DCP folder: each storage item the metadata names, placed in its file by offset.
#include "sources/dcp/storage_map.h"

#include <algorithm>
#include <filesystem>
#include <map>

namespace ckptdoc::dcp {

namespace fs = std::filesystem;

void add_to_storage_map(const Checkpoint& ckpt, const std::string& prefix, sources::StorageMap& map) {
  std::map<std::string, sources::StorageFile> files;
  for (const auto& name : ckpt.storage_files()) {
    sources::StorageFile f;
    f.name = prefix + name;
    std::error_code ec;
    const auto size = fs::file_size(fs::path(ckpt.dir()) / name, ec);
    f.present = !ec;
    f.size = ec ? 0 : size;
    files.emplace(name, std::move(f));
  }
  auto place = [&](const std::string& key, const StorageItem& item, const Chunk* chunk) {
    sources::StoredItem s;
    s.key = key;
    s.offset = item.offset;
    s.length = item.length;
    s.tensor = chunk != nullptr;
    if (chunk) {
      s.offsets = chunk->offsets;
      s.sizes = chunk->sizes;
    }
    auto& f = files[item.file];
    if (f.name.empty()) f.name = prefix + item.file;
    f.extent = std::max(f.extent, item.offset + item.length);
    f.items.push_back(std::move(s));
  };
  for (const auto& e : ckpt.metadata().entries) {
    sources::StoredKey k;
    k.key = e.key;
    k.tensor = e.kind == EntryKind::Tensor;
    k.dtype = e.dtype;
    k.shape = e.size;
    auto add_place = [&](const std::optional<StorageItem>& item, const Chunk* chunk) {
      sources::ChunkPlace c;
      if (chunk) {
        c.offsets = chunk->offsets;
        c.sizes = chunk->sizes;
      }
      if (item) {
        c.file = prefix + item->file;
        c.offset = item->offset;
        c.length = item->length;
        place(e.key, *item, chunk);
      }
      k.chunks.push_back(std::move(c));
    };
    if (k.tensor)
      for (const auto& c : e.chunks) add_place(c.item, &c);
    else
      add_place(e.bytes_item, nullptr);
    map.keys.push_back(std::move(k));
  }
  for (auto& [name, f] : files) {
    std::stable_sort(
        f.items.begin(), f.items.end(),
        [](const sources::StoredItem& a, const sources::StoredItem& b) { return a.offset < b.offset; });
    map.files.push_back(std::move(f));
  }
}

void sort_storage_map(sources::StorageMap& map) {
  std::stable_sort(
      map.files.begin(), map.files.end(),
      [](const sources::StorageFile& a, const sources::StorageFile& b) { return a.name < b.name; });
}

analysis::Finding finding_of_problem(const Problem& problem) {
  // Everything the source said (its repair, evidence, details) stays; its one file and key become the
  // files and params the views name.
  analysis::Finding f = problem;
  f.files.clear();
  f.params.clear();
  if (!problem.file.empty()) f.files.push_back(problem.file);
  if (!problem.key.empty()) f.params.push_back(problem.key);
  f.file.clear();
  f.key.clear();
  return f;
}

sources::SourceDiagnosis diagnosis_of(const std::vector<Problem>& problems, const std::string& verdict,
                                      bool clean, const std::vector<std::string>& not_checked) {
  sources::SourceDiagnosis d;
  for (const auto& p : problems) d.findings.push_back(finding_of_problem(p));
  d.verdict = verdict;
  d.clean = clean;
  d.not_checked = not_checked;
  return d;
}

}  // namespace ckptdoc::dcp
