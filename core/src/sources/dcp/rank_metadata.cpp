// Per-rank metadata. Without collectives torch 2.10 plans each rank alone (state_dict_saver.py,
// _save_state_dict with use_collectives=False), so nothing is deduplicated across ranks and no rank knows the
// whole: ckptdoc merges what torch's own loader reads only rank by rank (state_dict_loader.py,
// read_metadata(rank)).
#include <algorithm>
#include <filesystem>
#include <map>

#include "ckptdoc/error.h"
#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/sources/dcp/metadata.h"

namespace ckptdoc::dcp {
namespace {

// The rank of `__<rank>.metadata`, or -1 (more than 9 digits is no rank torch wrote).
long long rank_of(const std::string& name) {
  const size_t digits = name.size() - std::string("__.metadata").size();
  if (!is_rank_metadata_name(name) || digits > 9) return -1;
  return std::stoll(name.substr(2, digits));
}

std::string entry_text(const Entry& e) {
  return e.kind == EntryKind::Bytes ? std::string("a bytes item") : e.dtype + " " + shape_text(e.size);
}

}  // namespace

std::vector<std::string> rank_metadata_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::map<long long, std::string> by_rank;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (const long long rank = rank_of(it->path().filename().string()); rank >= 0 && it->is_regular_file(ec))
      by_rank[rank] = it->path().string();
  std::vector<std::string> out;
  out.reserve(by_rank.size());
  for (auto& [rank, path] : by_rank) out.push_back(std::move(path));
  return out;
}

Metadata merge_rank_metadata(std::vector<Metadata> ranks) {
  Metadata out;
  if (ranks.empty()) return out;
  out.path = ranks.front().path;
  std::map<std::string, Entry> entries;
  std::map<std::string, std::string> first_path;  // key -> the file that named it first
  for (auto& md : ranks) {
    out.merged_from.push_back(md.path);
    if (out.version.empty()) out.version = md.version;
    for (auto& u : md.unreferenced_items) out.unreferenced_items.push_back(std::move(u));
    for (auto& h : md.hazards) out.hazards.push_back(std::move(h));
    for (auto& e : md.entries) {
      auto [it, added] = entries.try_emplace(e.key, e);
      if (added) {
        first_path[e.key] = md.path;
        continue;
      }
      Entry& have = it->second;
      if (have.kind != e.kind || have.dtype != e.dtype || have.size != e.size)
        throw Error(ErrorKind::Inconsistent, md.path, "key '" + e.key + "'",
                    "is " + entry_text(e) + " where " + first_path[e.key] + " says " + entry_text(have));
      if (!have.bytes_item)
        have.bytes_item = std::move(e.bytes_item);
      else if (e.bytes_item)
        have.bytes_replicas.push_back(std::move(*e.bytes_item));
      for (auto& c : e.chunks) {
        auto same = std::find_if(have.chunks.begin(), have.chunks.end(), [&](const Chunk& h) {
          return h.offsets == c.offsets && h.sizes == c.sizes;
        });
        if (same == have.chunks.end())
          have.chunks.push_back(std::move(c));
        else if (!same->item)
          same->item = std::move(c.item);
        else if (c.item)
          same->replicas.push_back(std::move(*c.item));
      }
    }
  }
  for (auto& [key, e] : entries) {
    std::sort(e.chunks.begin(), e.chunks.end(),
              [](const Chunk& a, const Chunk& b) { return a.offsets < b.offsets; });
    out.entries.push_back(std::move(e));
  }
  return out;
}

}  // namespace ckptdoc::dcp
