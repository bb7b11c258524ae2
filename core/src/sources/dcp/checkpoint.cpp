// dcp::Checkpoint: storage items read in place. Each item is a whole torch.save zip inside a `.distcp` file,
// so TorchFile reads it over a MappedFile::view of that range: tensors stay views on the one map of the file.
// A zstd item is decoded into memory first; a tensor of a safetensors-serialized file is a view on that
// file's safetensors part (serialization_format.h).
#include "ckptdoc/sources/dcp/checkpoint.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "ckptdoc/dtype.h"
#include "ckptdoc/error.h"
#include "ckptdoc/format/safetensors.h"
#include "sources/dcp/serialization_format.h"
#include "sources/dcp/zstd_item.h"

namespace ckptdoc::dcp {

std::string item_name(const StorageItem& item) {
  return item.file + " [offset " + std::to_string(item.offset) + ", " + std::to_string(item.length) +
         " bytes]";
}

std::shared_ptr<Checkpoint> Checkpoint::open(const std::string& dir) {
  auto c = std::make_shared<Checkpoint>();
  c->dir_ = dir;
  const std::string metadata = (std::filesystem::path(dir) / ".metadata").string();
  std::error_code ec;
  if (std::filesystem::exists(metadata, ec)) {
    c->metadata_ = read_metadata(metadata);
    c->safetensors_starts_ = safetensors_serialized_files(dir, c->metadata_);
    return c;
  }
  // torch's loader, too, reads .metadata when there is one and a rank's own file only without it.
  if (const auto per_rank = rank_metadata_files(dir); !per_rank.empty()) {
    std::vector<Metadata> ranks;
    ranks.reserve(per_rank.size());
    for (const auto& f : per_rank) ranks.push_back(read_metadata(f));
    c->metadata_ = merge_rank_metadata(std::move(ranks));
    c->safetensors_starts_ = safetensors_serialized_files(dir, c->metadata_);
    return c;
  }
  throw Error(
      ErrorKind::NotFound, metadata, "",
      "missing: the folder holds .distcp files but no .metadata (nor per-rank __<rank>.metadata). torch "
      "writes the metadata last, after every rank's files, so this save did not finish (or the file "
      "was lost); without it no item can be located");
}

std::vector<std::string> Checkpoint::storage_files() const {
  std::set<std::string> names;
  for (const auto& e : metadata_.entries) {
    if (e.bytes_item) names.insert(e.bytes_item->file);
    for (const auto& r : e.bytes_replicas) names.insert(r.file);
    for (const auto& c : e.chunks) {
      if (c.item) names.insert(c.item->file);
      for (const auto& r : c.replicas) names.insert(r.file);
    }
  }
  return {names.begin(), names.end()};
}

std::shared_ptr<const MappedFile> Checkpoint::file(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = files_.find(name);
  if (it != files_.end()) return it->second;
  auto f = MappedFile::open((std::filesystem::path(dir_) / name).string());
  files_.emplace(name, f);
  return f;
}

bool Checkpoint::in_safetensors(const StorageItem& item) const {
  const auto it = safetensors_starts_.find(item.file);
  return it != safetensors_starts_.end() && it->second == item.offset;
}

TorchFile Checkpoint::open_item(const StorageItem& item) const {
  const auto whole = file(item.file);
  const std::string path = (std::filesystem::path(dir_) / item.file).string();
  if (item.offset > whole->size() || item.length > whole->size() - item.offset)
    throw Error(ErrorKind::Truncated, path, "item at offset " + std::to_string(item.offset),
                std::to_string(item.length) + " bytes run past the end of the file (" +
                    std::to_string(whole->size()) + " bytes): the file was cut short");
  if (in_safetensors(item)) return safetensors_item(item, whole, path);
  const std::string name = path + " [item at offset " + std::to_string(item.offset) + "]";
  if (!item.zstd) return TorchFile::open(MappedFile::view(whole, item.offset, item.length, name));
  // Decoded into memory (bounded by the metadata), then read like any other item.
  auto decoded = decode_zstd_item(whole->slice(item.offset, item.length, "zstd item"), item.max_decoded, path,
                                  "key '" + item.key + "', " + item_name(item));
  whole->check_unchanged();
  return TorchFile::open(MappedFile::from_memory(name + " (zstd decoded)", std::move(decoded)));
}

namespace {

// torch writes each tensor's chunk offsets into the part's __metadata__ (DCP_SHARDING_INFO, {key:
// {"saved_offsets": [...]}}): they must be the chunk's .metadata places the item at.
void check_sharding_info(const SafetensorsFile& part, const StorageItem& item) {
  const std::string where = "key '" + item.key + "'";
  const auto info = part.metadata.find("DCP_SHARDING_INFO");
  if (info == part.metadata.end())
    throw Error(ErrorKind::Inconsistent, part.path, where,
                "no DCP_SHARDING_INFO in the safetensors part's __metadata__, which torch's "
                "serialization_format=SAFETENSORS always writes");
  const auto json = nlohmann::json::parse(info->second, nullptr, false);
  const nlohmann::json* offsets = nullptr;
  if (json.is_object() && json.contains(item.key) && json[item.key].is_object() &&
      json[item.key].contains("saved_offsets"))
    offsets = &json[item.key]["saved_offsets"];
  if (!offsets || !offsets->is_array())
    throw Error(ErrorKind::Inconsistent, part.path, where + ", DCP_SHARDING_INFO",
                "no saved_offsets of the key");
  std::vector<int64_t> saved;
  for (const auto& o : *offsets) saved.push_back(o.is_number_integer() ? o.get<int64_t>() : -1);
  if (saved != item.chunk_offsets)
    throw Error(ErrorKind::Inconsistent, part.path, where + ", DCP_SHARDING_INFO",
                "saved_offsets " + offsets->dump() + " are not the chunk's offsets in .metadata");
}

}  // namespace

TorchFile Checkpoint::safetensors_item(const StorageItem& item,
                                       const std::shared_ptr<const MappedFile>& whole,
                                       const std::string& path) const {
  std::shared_ptr<const SafetensorsPart> cached_part;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& cached = safetensors_[item.file];
    // The safetensors file runs from the items' offset to the end: torch writes it last.
    if (!cached) {
      auto fresh = std::make_shared<SafetensorsPart>(
          SafetensorsPart{SafetensorsFile::open(MappedFile::view(
                              whole, item.offset, whole->size() - item.offset,
                              path + " [safetensors part at offset " + std::to_string(item.offset) + "]")),
                          {}});
      for (const auto& e : fresh->file.entries) fresh->by_name.emplace(e.name, &e);
      cached = std::move(fresh);
    }
    cached_part = cached;
  }
  const SafetensorsFile& part = cached_part->file;
  const auto found = cached_part->by_name.find(item.key);
  if (found == cached_part->by_name.end())
    throw Error(ErrorKind::Inconsistent, part.path, "key '" + item.key + "'",
                "no such tensor in the safetensors part, though .metadata places the key's item there");
  const SafetensorsEntry& entry = *found->second;
  if (entry.end - entry.begin != item.length)
    throw Error(ErrorKind::Inconsistent, part.path, "key '" + item.key + "'",
                std::to_string(entry.end - entry.begin) + " bytes where .metadata says " +
                    std::to_string(item.length));
  check_sharding_info(part, item);
  TorchFile tf;
  tf.path = part.path;
  tf.root = Value::tensor(entry.tensor);
  tf.file = part.file;
  tf.file_size = part.file->size();
  return tf;
}

Tensor Checkpoint::read_chunk(const Entry& entry, const Chunk& chunk) const {
  if (!chunk.item)
    throw Error(ErrorKind::NotFound, metadata_.path, "key '" + entry.key + "'",
                "a chunk without a storage item");
  return chunk_tensor(entry, chunk, open_item(*chunk.item));
}

Tensor Checkpoint::chunk_tensor(const Entry& entry, const Chunk& chunk, const TorchFile& tf) {
  const std::string where =
      "key '" + entry.key + "'" + (chunk.item ? ", item " + item_name(*chunk.item) : "");
  if (!tf.root.is_tensor())
    throw Error(ErrorKind::Inconsistent, tf.path, where, "holds " + tf.root.type_name() + ", not a tensor");
  const Tensor& t = tf.root.as_tensor();
  if (dtype_name(t.dtype) != entry.dtype)
    throw Error(ErrorKind::Inconsistent, tf.path, where,
                "holds " + std::string(dtype_name(t.dtype)) + " where .metadata says " + entry.dtype);
  if (t.shape != chunk.sizes) {
    auto text = [](const std::vector<int64_t>& s) {
      std::string r = "[";
      for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
      return r + "]";
    };
    throw Error(ErrorKind::Inconsistent, tf.path, where,
                "holds a tensor of shape " + text(t.shape) + " where .metadata says " + text(chunk.sizes));
  }
  return t;
}

std::vector<double> Checkpoint::read_global(const Entry& entry) const {
  const int64_t n = entry.numel();
  constexpr int64_t kMaxElements = int64_t{1} << 28;  // 2 GiB of doubles: this is for small tensors
  if (n > kMaxElements)
    throw Error(ErrorKind::InvalidRequest, metadata_.path, "key '" + entry.key + "'",
                std::to_string(n) + " elements are too many to assemble in memory");
  std::vector<double> out(static_cast<size_t>(n));
  const auto global_strides = Tensor::contiguous_strides(entry.size);
  for (const auto& chunk : entry.chunks) {
    const std::vector<float> values = read_chunk(entry, chunk).to_float();
    const auto local_strides = Tensor::contiguous_strides(chunk.sizes);
    for (size_t i = 0; i < values.size(); ++i) {
      int64_t at = 0, rest = static_cast<int64_t>(i);
      for (size_t d = 0; d < chunk.sizes.size(); ++d) {
        const int64_t index = rest / local_strides[d];
        rest %= local_strides[d];
        at += (chunk.offsets[d] + index) * global_strides[d];
      }
      if (at < 0 || at >= n)
        throw Error(ErrorKind::Corrupt, metadata_.path, "key '" + entry.key + "'",
                    "a chunk outside the tensor");
      out[static_cast<size_t>(at)] = values[i];
    }
  }
  return out;
}

}  // namespace ckptdoc::dcp
