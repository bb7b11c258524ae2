// repair --drop-optimizer of a DCP folder (see drop_optimizer.h).
#include "sources/dcp/drop_optimizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <span>

#include "ckptdoc/error.h"
#include "ckptdoc/format/pickler.h"
#include "ckptdoc/format/unpickler.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/sources/dcp/export.h"  // is_optimizer_key

namespace ckptdoc::dcp {
namespace fs = std::filesystem;
namespace {

bool dropped(const std::string& key) {
  return is_optimizer_key(key);  // megatron-core's chained_<i>.optimizer.* (experts) included
}

// A torch dataclass's fields in the inert tree: its BUILD state dict, or the dict of (None, dict).
Value& fields_of(Value& obj, const std::string& path, const std::string& what) {
  if (obj.is(Value::Kind::Object) && obj.object_mut().state) {
    Value& state = *obj.object_mut().state;
    if (state.is_dict()) return state;
    if (state.is(Value::Kind::Tuple) && state.items().size() == 2 && state.items()[1].is_dict())
      return state.items_mut()[1];
  }
  throw Error(ErrorKind::Unsupported, path, what, "is not a dataclass with its fields: nothing was dropped");
}

std::string str_field(const Value& fields, std::string_view name, const std::string& path) {
  const Value* v = fields.get(name);
  if (!v || !v->is(Value::Kind::Str))
    throw Error(ErrorKind::Unsupported, path, std::string(name), "is not a string: nothing was dropped");
  return v->as_str();
}

// A kept item, to be placed in its new file.
struct Kept {
  uint64_t offset = 0, length = 0;
  Value* fields = nullptr;  // its _StorageInfo's fields, where the new offset is written
  const std::vector<uint8_t>* replacement = nullptr;  // its new bytes, or null: the input's
};

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.flush();
  if (!f) throw Error(ErrorKind::Io, path, "", "could not be written");
}

}  // namespace

DropCounts drop_optimizer(const Checkpoint& in, const std::string& copy_dir, Progress* progress,
                          const std::map<std::string, std::vector<uint8_t>>& replaced) {
  const std::string& dir = in.dir();
  for (const auto& [key, bytes] : replaced) {
    const Entry* e = in.metadata().find(key);
    if (!e || e->kind != EntryKind::Bytes || !e->bytes_item || dropped(key))
      throw Error(ErrorKind::Unsupported, dir, key,
                  "is not a kept bytes item to rewrite: nothing was dropped");
  }
  const std::string md_path = dir + "/.metadata";
  if (!in.metadata().merged_from.empty() || !fs::is_regular_file(md_path))
    throw Error(
        ErrorKind::Unsupported, dir, request_text("{drop_optimizer}"),
        "has per-rank metadata files (__<rank>.metadata, saved without collectives), not one .metadata: "
        "not rewritten yet, nothing was dropped");
  for (const auto& e : in.metadata().entries)
    for (const auto& c : e.chunks)
      if (c.item && in.in_safetensors(*c.item))
        throw Error(ErrorKind::Unsupported, dir + "/" + c.item->file, request_text("{drop_optimizer}"),
                    "is safetensors-serialized (serialization_format=SAFETENSORS): its tensors share one "
                    "safetensors part, which this repair does not re-pack; nothing was dropped");
  DropCounts n;
  for (const auto& e : in.metadata().entries) (dropped(e.key) ? n.keys : n.kept_keys) += 1;
  if (n.keys == 0)
    throw Error(ErrorKind::Unsupported, dir, request_text("{drop_optimizer}"),
                "holds no optimizer keys (optimizer.*): nothing to drop");

  const auto file = MappedFile::open(md_path);
  UnpickleOptions options;
  options.file_name = md_path;
  options.record_name = "pickle";
  UnpickleResult read = unpickle(file->bytes(), options);  // Checkpoint::open judged it safe already
  Value& root = read.value;
  Value& f = fields_of(root, md_path, "Metadata");

  Value* sdm = f.get_mut("state_dict_metadata");
  Value* storage = f.get_mut("storage_data");
  if (!sdm || !sdm->is_dict() || !storage || !storage->is_dict())
    throw Error(ErrorKind::Unsupported, md_path, "Metadata",
                "has no state_dict_metadata / storage_data dicts: nothing was dropped");
  auto& keys = sdm->dict_mut().items;
  std::erase_if(keys,
                [](const auto& kv) { return kv.first.is(Value::Kind::Str) && dropped(kv.first.as_str()); });
  if (Value* planner = f.get_mut("planner_data"); planner && planner->is_dict())
    std::erase_if(planner->dict_mut().items,
                  [](const auto& kv) { return kv.first.is(Value::Kind::Str) && dropped(kv.first.as_str()); });

  std::map<std::string, std::vector<Kept>> by_file;
  std::set<std::string> storage_files;
  auto& items = storage->dict_mut().items;
  std::erase_if(items, [&](auto& kv) {
    const std::string fqn = str_field(fields_of(kv.first, md_path, "MetadataIndex"), "fqn", md_path);
    Value& info = fields_of(kv.second, md_path, "_StorageInfo");
    const std::string rel = str_field(info, "relative_path", md_path);
    storage_files.insert(rel);
    if (dropped(fqn)) {
      ++n.items;
      return true;
    }
    const Value* off = info.get("offset");
    const Value* len = info.get("length");
    if (!off || !len || !off->is(Value::Kind::Int) || !len->is(Value::Kind::Int))
      throw Error(ErrorKind::Unsupported, md_path, "storage_data['" + fqn + "']",
                  "offset or length is not an integer: nothing was dropped");
    const auto r = replaced.find(fqn);
    by_file[rel].push_back({static_cast<uint64_t>(off->as_int()), static_cast<uint64_t>(len->as_int()), &info,
                            r == replaced.end() ? nullptr : &r->second});
    return false;
  });

  // The storage files: the kept items, whole, in their order.
  Progress none;
  Progress& p = progress ? *progress : none;
  p.set_stage("writing " + std::to_string(storage_files.size()) + " storage files", storage_files.size());
  for (const auto& name : storage_files) {
    p.check();
    p.add(1);
    const auto src = in.file(name);
    n.bytes_before += src->size();
    auto it = by_file.find(name);
    if (it == by_file.end()) continue;  // only optimizer items: not written
    auto& kept = it->second;
    std::sort(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) { return a.offset < b.offset; });
    // Streamed item by item from the mapping: a multi-GB storage file is never held in memory.
    const std::string out_path = (fs::path(copy_dir) / name).string();
    std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
    uint64_t at = 0;
    for (auto& k : kept) {
      if (k.offset + k.length > src->size())
        throw Error(ErrorKind::Truncated, (fs::path(dir) / name).string(), "",
                    "an item runs past the file's end: nothing was dropped");
      p.check();
      const auto bytes =
          k.replacement ? std::span<const uint8_t>(*k.replacement) : src->bytes().subspan(k.offset, k.length);
      k.fields->set("offset", Value::integer(static_cast<int64_t>(at)));
      if (k.replacement) k.fields->set("length", Value::integer(static_cast<int64_t>(bytes.size())));
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      at += bytes.size();
    }
    out.flush();
    if (!out) throw Error(ErrorKind::Io, out_path, "", "could not be written");
    n.bytes_after += at;
  }
  // Every other file of the folder (an Accelerate-style extra, a README) as it is.
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == ".metadata" || storage_files.count(name)) continue;
    fs::copy(e.path(), fs::path(copy_dir) / name, fs::copy_options::recursive);
  }
  write_file(copy_dir + "/.metadata", pickle(root));
  Value::dismantle_all({std::move(read.value)});

  // The copy is checked before it is published: the input's keys but the optimizer's, each item's bytes the
  // same. The stage counts the kept items' bytes compared and stops at a cancel between keys (the partial
  // folder is then removed).
  uint64_t kept_bytes = 0;
  for (const auto& e : in.metadata().entries) {
    if (dropped(e.key)) continue;
    for (const auto& chunk : e.chunks)
      if (chunk.item) kept_bytes += chunk.item->length;
    if (e.bytes_item) kept_bytes += e.bytes_item->length;
  }
  p.set_stage("checking the copy", kept_bytes);
  const auto copy = Checkpoint::open(copy_dir);
  if (!copy->metadata().unreferenced_items.empty())
    throw Error(ErrorKind::Inconsistent, copy_dir, copy->metadata().unreferenced_items.front(),
                "is unreferenced");
  size_t seen = 0;
  for (const auto& e : in.metadata().entries) {
    p.check();
    const Entry* c = copy->metadata().find(e.key);
    if (dropped(e.key)) {
      if (c) throw Error(ErrorKind::Inconsistent, copy_dir, e.key, "is still in the copy");
      continue;
    }
    if (!c || c->chunks.size() != e.chunks.size() || c->kind != e.kind)
      throw Error(ErrorKind::Inconsistent, copy_dir, e.key, "is not the input's in the copy");
    const auto r = replaced.find(e.key);
    auto same = [&](const StorageItem& a, const StorageItem& b) {
      const auto x = r != replaced.end() ? std::span<const uint8_t>(r->second)
                                         : in.file(a.file)->bytes().subspan(a.offset, a.length);
      const auto y = copy->file(b.file)->bytes().subspan(b.offset, b.length);
      if (x.size() != b.length || !std::equal(x.begin(), x.end(), y.begin()))
        throw Error(ErrorKind::Inconsistent, copy_dir + "/" + b.file, e.key,
                    "holds other bytes than the input");
      p.add(a.length);
    };
    for (size_t i = 0; i < e.chunks.size(); ++i)
      if (e.chunks[i].item && c->chunks[i].item) same(*e.chunks[i].item, *c->chunks[i].item);
    if (e.bytes_item && c->bytes_item) same(*e.bytes_item, *c->bytes_item);
    ++seen;
  }
  if (seen != copy->metadata().entries.size())
    throw Error(ErrorKind::Inconsistent, copy_dir, ".metadata", "holds keys the input does not");
  return n;
}

}  // namespace ckptdoc::dcp
