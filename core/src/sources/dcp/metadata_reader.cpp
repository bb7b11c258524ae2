// Reads a DCP `.metadata` pickle into dcp::Metadata. The pickle is a tree of torch dataclasses
// (torch/distributed/checkpoint/metadata.py, filesystem.py): the unpickler keeps each as an inert object
// whose BUILD state holds its fields; this file reads those fields and refuses anything else.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <utility>

#include "ckptdoc/dtype.h"
#include "ckptdoc/error.h"
#include "ckptdoc/format/unpickler.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/sources/dcp/metadata.h"
#include "sources/dcp/zstd_item.h"

namespace ckptdoc::dcp {
namespace {

constexpr size_t kMaxDims = 64;

bool is_dcp_class(const Value& v, std::string_view name) {
  if (!v.is(Value::Kind::Object)) return false;
  const ObjectData& o = v.as_object();
  // torch 2.x spells them torch.distributed.checkpoint.*; before ~2.3 some lived in
  // torch.distributed._shard.*.
  return o.name == name && o.module.rfind("torch.distributed.", 0) == 0;
}

// megatron-core up to 0.15 pickles its own subclass of torch's Metadata
// (dist_checkpointing/strategies/torch.py MCoreMetadata: torch's fields and `mcore_data`); 0.16 writes
// torch's class again.
bool is_metadata_class(const Value& v) {
  if (is_dcp_class(v, "Metadata")) return true;
  return v.is(Value::Kind::Object) && v.as_object().name == "MCoreMetadata" &&
         v.as_object().module == "megatron.core.dist_checkpointing.strategies.torch";
}

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error(ErrorKind::Corrupt, path_, where, what);
  }

  // A dataclass's fields: its BUILD state, a dict, or (None, dict) for classes with __slots__.
  const Value& fields(const Value& obj, const std::string& where) const {
    const auto& state = obj.as_object().state;
    if (state && state->is_dict()) return *state;
    if (state && state->is(Value::Kind::Tuple) && state->items().size() == 2 && state->items()[1].is_dict())
      return state->items()[1];
    fail(where, obj.as_object().qualified() + " without its fields");
  }

  const Value& field(const Value& fields_dict, std::string_view name, const std::string& where) const {
    const Value* v = fields_dict.get(name);
    if (!v) fail(where, "no field '" + std::string(name) + "'");
    return *v;
  }

  std::vector<int64_t> dims(const Value& v, const std::string& where) const {
    std::vector<int64_t> out;
    if (v.is(Value::Kind::Size)) {
      out = v.as_size();
    } else if (v.is_sequence()) {
      for (const auto& d : v.items()) {
        if (!d.is(Value::Kind::Int)) fail(where, "a dimension that is not an integer: " + d.repr(40));
        out.push_back(d.as_int());
      }
    } else {
      fail(where, "expected a torch.Size, found " + v.type_name());
    }
    if (out.size() > kMaxDims) fail(where, std::to_string(out.size()) + " dimensions");
    for (int64_t d : out)
      if (d < 0) fail(where, "a negative dimension " + std::to_string(d));
    return out;
  }

  uint64_t count(const Value& v, const std::string& where, std::string_view what) const {
    if (!v.is(Value::Kind::Int) || v.as_int() < 0)
      fail(where, std::string(what) + " is not a non-negative integer: " + v.repr(40));
    return static_cast<uint64_t>(v.as_int());
  }

  std::string dtype_of(const Value& properties, const std::string& where) const {
    if (!is_dcp_class(properties, "TensorProperties")) fail(where, "properties are not TensorProperties");
    const auto& state = properties.as_object().state;
    // TensorProperties.__getstate__ returns (dtype, layout, requires_grad, memory_format, pin_memory).
    const Value* dtype = nullptr;
    if (state && state->is(Value::Kind::Tuple) && !state->items().empty()) dtype = &state->items()[0];
    if (state && state->is_dict()) dtype = state->get("dtype");
    if (!dtype || !dtype->is(Value::Kind::DType)) fail(where, "TensorProperties without a torch dtype");
    return dtype->as_str();
  }

  Entry entry(const std::string& key, const Value& meta) const {
    const std::string where = "key '" + key + "'";
    Entry e;
    e.key = key;
    if (is_dcp_class(meta, "BytesStorageMetadata")) {
      e.kind = EntryKind::Bytes;
      return e;
    }
    if (!is_dcp_class(meta, "TensorStorageMetadata"))
      fail(where, "expected TensorStorageMetadata or BytesStorageMetadata, found " + meta.type_name());
    const Value& f = fields(meta, where);
    e.kind = EntryKind::Tensor;
    e.dtype = dtype_of(field(f, "properties", where), where);
    e.size = dims(field(f, "size", where), where + ", size");
    try {
      (void)e.numel();
    } catch (const Error&) {
      fail(where, "a size whose element count overflows");
    }
    const Value& chunks = field(f, "chunks", where);
    if (!chunks.is_sequence()) fail(where, "chunks are not a list");
    for (const auto& c : chunks.items()) {
      if (!is_dcp_class(c, "ChunkStorageMetadata")) fail(where, "a chunk that is not ChunkStorageMetadata");
      const Value& cf = fields(c, where);
      Chunk chunk;
      chunk.offsets = dims(field(cf, "offsets", where), where + ", chunk offsets");
      chunk.sizes = dims(field(cf, "sizes", where), where + ", chunk sizes");
      if (chunk.offsets.size() != e.size.size() || chunk.sizes.size() != e.size.size())
        fail(where, "a chunk with " + std::to_string(chunk.sizes.size()) + " dimensions in a tensor of " +
                        std::to_string(e.size.size()));
      e.chunks.push_back(std::move(chunk));
    }
    return e;
  }

  StorageItem storage_item(const Value& info, const std::string& where) const {
    if (!info.is(Value::Kind::Object) || info.as_object().name != "_StorageInfo")
      fail(where, "a storage item that is not _StorageInfo: " + info.type_name());
    const Value& f = fields(info, where);
    StorageItem item;
    const Value& rel = field(f, "relative_path", where);
    if (!rel.is(Value::Kind::Str)) fail(where, "relative_path is not a string");
    item.file = rel.as_str();
    // The path comes from the file: it may only name a file of this folder.
    if (item.file.empty() || item.file.find('/') != std::string::npos || item.file == "." ||
        item.file == "..")
      throw Error(ErrorKind::PathEscape, path_, where,
                  "storage file '" + item.file + "' is not a file of this folder");
    item.offset = count(field(f, "offset", where), where, "offset");
    item.length = count(field(f, "length", where), where, "length");
    if (const Value* t = f.get("transform_descriptors"); t && t->is_sequence() && !t->items().empty()) {
      // torch's one stream transform is ZStandard; anything else (a chain, another extension) is not decoded.
      const auto& ts = t->items();
      if (ts.size() != 1 || !ts[0].is(Value::Kind::Str) || !is_zstd_descriptor(ts[0].as_str()))
        throw Error(
            ErrorKind::Unsupported, path_, where,
            "storage item in " + item.file + " with transforms " + t->repr(60) +
                " (torch's FileSystemWriter _extensions): only a single \"stream.zstd/1\" (ZStandard) "
                "is decoded, so no value of this checkpoint was checked");
      item.zstd = true;
    }
    return item;
  }

  Metadata read(const Value& root) const {
    if (!is_metadata_class(root))
      fail("", "not a PyTorch Distributed Checkpoint Metadata (found " + root.type_name() + ")");
    const Value& f = fields(root, "Metadata");
    Metadata md;
    md.path = path_;
    if (const Value* v = f.get("version"); v && v->is(Value::Kind::Str)) md.version = v->as_str();
    const Value& sdm = field(f, "state_dict_metadata", "Metadata");
    if (!sdm.is_dict()) fail("state_dict_metadata", "not a dict");
    for (const auto& [k, v] : sdm.as_dict().items) {
      if (!k.is(Value::Kind::Str)) fail("state_dict_metadata", "a key that is not a string: " + k.repr(40));
      md.entries.push_back(entry(k.as_str(), v));
      md.entries.back().stored_index = md.entries.size() - 1;
    }
    std::sort(md.entries.begin(), md.entries.end(),
              [](const Entry& a, const Entry& b) { return a.key < b.key; });
    for (size_t i = 1; i < md.entries.size(); ++i)
      if (md.entries[i].key == md.entries[i - 1].key)
        fail("state_dict_metadata", "key '" + md.entries[i].key + "' twice");
    attach_storage(md, field(f, "storage_data", "Metadata"));
    if (const Value* mcore = f.get("mcore_data"); mcore && !mcore->is_none()) read_mcore_data(md, *mcore);
    return md;
  }

  // MCoreMetadata's mcore_data: {key: {}} for every ShardedTensor, or {"nd_reformulated_orig_global_shape":
  // shape} for one saved nd-flattened (see Entry::nd_flattened_from). Its stored shape must then be the
  // fragments along each original axis and one fragment's elements.
  void read_mcore_data(Metadata& md, const Value& mcore) const {
    if (!mcore.is_dict()) fail("mcore_data", "not a dict");
    for (const auto& [k, v] : mcore.as_dict().items) {
      if (!k.is(Value::Kind::Str) || !v.is_dict()) fail("mcore_data", "an entry that is not {key: dict}");
      const Value* shape = v.get("nd_reformulated_orig_global_shape");
      if (!shape || shape->is_none()) continue;
      const std::string where = "mcore_data['" + k.as_str() + "']";
      auto it = std::lower_bound(md.entries.begin(), md.entries.end(), k.as_str(),
                                 [](const Entry& e, const std::string& key) { return e.key < key; });
      if (it == md.entries.end() || it->key != k.as_str() || it->kind != EntryKind::Tensor)
        fail(where, "names no tensor of state_dict_metadata");
      const auto orig = dims(*shape, where);
      const auto& stored = it->size;
      bool fits = stored.size() == orig.size() + 1;
      int64_t fragment = 1;
      for (size_t d = 0; fits && d < orig.size(); ++d) {
        fits = stored[d] > 0 && orig[d] % stored[d] == 0 &&
               !__builtin_mul_overflow(fragment, orig[d] / stored[d], &fragment);
      }
      if (!fits || stored.back() != fragment)
        fail(where, "nd-flattened from a shape its stored shape does not divide into fragments");
      it->nd_flattened_from = orig;
    }
  }

  // storage_data: {MetadataIndex(fqn, offset, index): _StorageInfo}. A chunk is found by its key and offsets.
  void attach_storage(Metadata& md, const Value& storage) const {
    if (!storage.is_dict()) fail("storage_data", "not a dict");
    for (const auto& [k, v] : storage.as_dict().items) {
      if (!is_dcp_class(k, "MetadataIndex")) fail("storage_data", "a key that is not a MetadataIndex");
      const Value& kf = fields(k, "storage_data");
      const Value& fqn = field(kf, "fqn", "storage_data");
      if (!fqn.is(Value::Kind::Str)) fail("storage_data", "a MetadataIndex whose fqn is not a string");
      const std::string where = "storage_data['" + fqn.as_str() + "']";
      std::optional<std::vector<int64_t>> offsets;
      if (const Value* o = kf.get("offset"); o && !o->is_none()) offsets = dims(*o, where);
      StorageItem item = storage_item(v, where);
      item.key = fqn.as_str();
      if (offsets) item.chunk_offsets = *offsets;
      auto it = std::lower_bound(md.entries.begin(), md.entries.end(), fqn.as_str(),
                                 [](const Entry& e, const std::string& key) { return e.key < key; });
      Chunk* chunk = nullptr;
      if (it != md.entries.end() && it->key == fqn.as_str()) {
        if (it->kind == EntryKind::Bytes && !offsets) {
          if (item.zstd) item.max_decoded = max_decoded_bytes_item();
          it->bytes_item = std::move(item);
          continue;
        }
        for (auto& c : it->chunks)
          if (offsets && c.offsets == *offsets) chunk = &c;
      }
      if (!chunk) {
        std::string at;
        if (offsets)
          for (size_t d = 0; d < offsets->size(); ++d) at += (d ? "," : "") + std::to_string((*offsets)[d]);
        md.unreferenced_items.push_back(fqn.as_str() + " @ [" + at + "] in " + item.file);
        continue;
      }
      if (item.zstd) {
        // An unknown dtype is bounded as the widest (complex128); reading it is refused later anyway.
        const auto dtype = dtype_from_name(it->dtype);
        const uint64_t element = dtype ? element_size(*dtype) : 16;
        int64_t n = 0;
        try {
          n = chunk->numel();
        } catch (const Error&) {
          fail(where, "a chunk whose element count overflows");
        }
        if (static_cast<uint64_t>(n) > std::numeric_limits<uint64_t>::max() / 2 / element)
          fail(where, "a chunk of " + std::to_string(n) + " elements: too many bytes to decode");
        item.max_decoded = max_decoded_tensor_item(static_cast<uint64_t>(n) * element);
      }
      chunk->item = std::move(item);
    }
  }

 private:
  std::string path_;
};

}  // namespace

int64_t Chunk::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s != 0 && n > std::numeric_limits<int64_t>::max() / s)
      throw Error(ErrorKind::Corrupt, "", "chunk", "element count overflows");
    n *= s;
  }
  return n;
}

int64_t Entry::numel() const {
  int64_t n = 1;
  for (int64_t s : size) {
    if (s != 0 && n > std::numeric_limits<int64_t>::max() / s)
      throw Error(ErrorKind::Corrupt, "", "key '" + key + "'", "element count overflows");
    n *= s;
  }
  return n;
}

const Entry* Metadata::find(const std::string& key) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), key,
                             [](const Entry& e, const std::string& k) { return e.key < k; });
  return it != entries.end() && it->key == key ? &*it : nullptr;
}

Metadata read_metadata(const std::string& path) {
  const auto file = MappedFile::open(path);
  PickleUseLog uses;
  UnpickleOptions options;
  options.file_name = path;
  options.record_name = "pickle";
  options.uses = &uses;
  // A refused stream (malformed, over a limit) still says what it reached: judge that before anything else.
  auto refuse_if_unsafe = [&]() {
    auto hazards = assess_pickle_uses(uses.uses(), path);  // not const: returned by move
    if (!hazards.empty() && hazards.front().severity == "error") {
      const PickleHazard& h = hazards.front();
      throw Error(ErrorKind::UnsafePickle, path, "offset " + std::to_string(h.offset),
                  h.callable + (h.reaches.empty() ? "" : " (reaches " + h.reaches + ")") + " reached by " +
                      h.how + ": " + h.why + ". Refused: ckptdoc ran nothing and read nothing from it; " +
                      "pickle.load or torch.distributed.checkpoint would run it");
    }
    return hazards;
  };
  UnpickleResult result;
  try {
    result = unpickle(file->bytes(), options);
  } catch (const Error&) {
    refuse_if_unsafe();
    throw;
  }
  auto hazards = refuse_if_unsafe();
  file->check_unchanged();
  Metadata md = Reader(path).read(result.value);
  md.hazards = std::move(hazards);
  Value::dismantle_all({std::move(result.value)});
  return md;
}

bool is_rank_metadata_name(const std::string& name) {
  static const std::string prefix = "__", suffix = ".metadata";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()),
                     name.end() - static_cast<std::ptrdiff_t>(suffix.size()),
                     [](char c) { return c >= '0' && c <= '9'; });
}

bool is_dcp_folder(const std::string& path) {
  std::error_code ec;
  namespace fs = std::filesystem;
  if (!fs::is_directory(path, ec)) return false;
  if (fs::is_regular_file(fs::path(path) / ".metadata", ec)) return true;
  // A save killed before its last step leaves the .distcp files without .metadata: still DCP, to be named so.
  // A save without collectives writes `__<rank>.metadata` instead.
  constexpr int kMaxLooked = 4096;
  int looked = 0;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end && looked < kMaxLooked;
       it.increment(ec), ++looked)
    if (it->path().extension() == ".distcp" || is_rank_metadata_name(it->path().filename().string()))
      return true;
  return false;
}

}  // namespace ckptdoc::dcp
