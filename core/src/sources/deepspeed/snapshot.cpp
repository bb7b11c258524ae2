// Snapshot: finding it, its rank files, and its DeepSpeed files read as torch files (pickle from the rank
// file, storages mapped at their dataset offsets).
#include "ckptdoc/sources/deepspeed/snapshot.h"

#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/format/unpickler.h"
#include "ckptdoc/io/fs_error.h"
#include "sources/deepspeed/detect.h"
#include "sources/deepspeed/file_roles.h"
#include "sources/deepspeed/snapshot_rank_file.h"

namespace fs = std::filesystem;

namespace ckptdoc::snapshot {
namespace {

bool looks_like_unfinished_snapshot(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if ((n.rfind("rank_", 0) == 0 && n.size() > 3 && n.substr(n.size() - 3) == ".h5") ||
        n.rfind(".rank_", 0) == 0 || n.rfind(".manifest.json.tmp", 0) == 0)
      return true;
  }
  return false;
}

std::string archive_name_of(const std::string& file_name) {
  const auto dot = file_name.rfind('.');
  return dot == std::string::npos ? file_name : file_name.substr(0, dot);
}

}  // namespace

Snapshot::~Snapshot() = default;

std::shared_ptr<const Snapshot> Snapshot::open_if_snapshot(const std::string& path,
                                                           const std::optional<std::string>& tag) {
  std::error_code ec;
  fs::path p(path);
  if (fs::is_regular_file(p, ec)) {
    const std::string n = p.filename().string();
    const bool ours = n == kManifestName || (n.rfind("rank_", 0) == 0 && p.extension() == ".h5");
    p = fs::absolute(p, ec).parent_path();
    if (!ours || ec || !is_snapshot_dir(p.string())) return nullptr;
  }
  if (!fs::is_directory(p, ec)) return nullptr;
  if (is_snapshot_dir(p.string())) return open(p.string(), tag);
  // A DeepSpeed save folder that also holds snapshot folders stays a checkpoint (its `latest` wins).
  if (fs::exists(p / "latest", ec) || deepspeed::detail::has_rank_files(p.string())) return nullptr;
  if (holds_snapshots(p.string())) return open(p.string(), tag);
  if (looks_like_unfinished_snapshot(p))
    throw Error(ErrorKind::NotFound, p.string(), "",
                "a snapshot folder without manifest.json: it is still being written, or its writer "
                "stopped; ckptdoc reads only snapshots whose manifest was written (the commit point)");
  return nullptr;
}

std::shared_ptr<const Snapshot> Snapshot::open(const std::string& path,
                                               const std::optional<std::string>& tag) try {
  std::string dir = path;
  const bool direct = is_snapshot_dir(dir);
  if (!direct) {
    const auto all = list_snapshots(dir);
    if (all.empty())
      throw Error(ErrorKind::NotFound, path, "", "no snapshot (no folder with a ckptdoc manifest.json) here");
    if (tag) {
      const fs::path named = fs::path(dir) / *tag;
      if (!is_snapshot_dir(named.string())) {
        std::string tags;
        for (const auto& m : all) tags += (tags.empty() ? "" : ", ") + m.tag;
        throw Error(ErrorKind::NotFound, path, "tag '" + *tag + "'",
                    "no complete snapshot of that name (there are: " + tags + ")");
      }
      dir = named.string();
    } else {
      dir = all.back().dir;  // the newest
    }
  }
  std::shared_ptr<Snapshot> s(new Snapshot());
  s->manifest_ = Manifest::read(dir);
  if (direct && tag && s->manifest_.tag != *tag)
    throw Error(ErrorKind::InvalidRequest, dir, "tag '" + *tag + "'",
                "this snapshot's tag is '" + s->manifest_.tag + "'");
  // A rank file that cannot be read does not fail the snapshot: each DeepSpeed file it holds reports the
  // error when opened, so the catalog lists them as unreadable and the other ranks stay usable.
  for (const auto& r : s->manifest_.ranks) {
    const std::string file = s->manifest_.dir + "/" + r.file;
    try {
      s->rank_files_.push_back(RankFile::open(file, r.file, r.rank));
    } catch (const Error& e) {
      s->unreadable_[r.file] = {e.kind(), e.what()};
      s->rank_files_.push_back(nullptr);
    } catch (const std::exception& e) {
      s->unreadable_[r.file] = {ErrorKind::Other, e.what()};
      s->rank_files_.push_back(nullptr);
    }
  }
  return s;
} catch (const std::filesystem::filesystem_error& e) {
  throw io::error_from(e);
}

const Snapshot::RankFile& Snapshot::rank_file(const std::string& file_name) const {
  for (const auto& rf : rank_files_)
    if (rf && rf->name == file_name) return *rf;
  if (auto it = unreadable_.find(file_name); it != unreadable_.end())
    throw Error(it->second.first, manifest_.dir + "/" + file_name, "", it->second.second);
  throw Error(ErrorKind::NotFound, manifest_.dir, "", "no rank file '" + file_name + "' in the manifest");
}

std::vector<deepspeed::CheckpointFile> Snapshot::checkpoint_files() const {
  std::vector<deepspeed::CheckpointFile> out;
  for (const auto& [name, owner] : manifest_.files) {
    deepspeed::CheckpointFile f;
    f.path = name;
    f.abs_path = virtual_path(manifest_.dir, owner, name);
    for (const auto& r : manifest_.ranks)
      if (r.file == owner) f.bytes = std::max<uint64_t>(r.bytes, 1);
    for (const auto& rf : rank_files_) {
      if (!rf || rf->name != owner) continue;
      auto it = rf->files.find(name);
      if (it == rf->files.end()) continue;
      uint64_t n = it->second.pickle.numel;
      for (const auto& [k, d] : it->second.storages) n += d.numel * stored_size(d.stored);
      f.bytes = std::max<uint64_t>(n, 1);
    }
    if (auto info = deepspeed::detail::classify_file_name(name)) {
      f.role = info->role;
      f.dp_rank = info->dp_rank;
      f.mp_rank = info->mp_rank;
      f.bf16_prefix = info->bf16_prefix;
    }
    out.push_back(std::move(f));
  }
  return out;
}

TorchFile Snapshot::open_file(const std::string& abs_path) const {
  const std::string prefix = manifest_.dir + "/";
  const auto sep = abs_path.find(":/files/", prefix.size());
  if (abs_path.rfind(prefix, 0) != 0 || sep == std::string::npos)
    throw Error(ErrorKind::InvalidRequest, abs_path, "", "not a file of the snapshot " + manifest_.dir);
  const std::string owner = abs_path.substr(prefix.size(), sep - prefix.size());
  const std::string name = abs_path.substr(sep + 8);
  const RankFile& rf = rank_file(owner);
  auto it = rf.files.find(name);
  if (it == rf.files.end())
    throw Error(ErrorKind::Inconsistent, rf.path, "group /files/" + name,
                "missing: the manifest says this rank file holds " + name);
  const RankFile::VirtualFile& vf = it->second;

  TorchFile tf;
  tf.path = abs_path;
  tf.format = TorchFormat::Zip;
  tf.archive_name = archive_name_of(name);
  tf.file = rf.map;
  std::shared_ptr<const std::vector<uint8_t>> pickle_owned;
  const auto pickle_bytes = rf.bytes(vf.pickle, 1, &pickle_owned);
  tf.file_size = pickle_bytes.size();

  std::map<std::string, std::shared_ptr<Storage>> by_key;
  std::vector<std::shared_ptr<Storage>> order;
  const std::string where = "pickle";
  UnpickleOptions opts;
  opts.file_name = abs_path;
  opts.record_name = "pickle";
  opts.persistent_load = [&](const Value& pid) -> Value {
    if (!pid.is(Value::Kind::Tuple) || pid.items().size() != 5)
      throw Error(ErrorKind::Corrupt, abs_path, where,
                  expected_found("a persistent id ('storage', class, key, location, numel)", pid.repr(60)));
    const auto& t = pid.items();
    if (!t[0].is(Value::Kind::Str) || t[0].as_str() != "storage")
      throw Error(ErrorKind::Corrupt, abs_path, where,
                  expected_found("persistent id type 'storage'", t[0].repr(40)));
    if (!t[1].is(Value::Kind::Global))
      throw Error(ErrorKind::Corrupt, abs_path, where, expected_found("a storage class", t[1].repr(40)));
    const auto dtype = dtype_from_storage_class(t[1].as_global().second);
    if (!dtype)
      throw Error(ErrorKind::Unsupported, abs_path, where,
                  expected_found("a typed storage class", t[1].repr(40)));
    if (!t[2].is(Value::Kind::Str))
      throw Error(ErrorKind::Corrupt, abs_path, where,
                  expected_found("a storage key string", t[2].type_name()));
    const std::string key = t[2].as_str();
    if (!t[4].is(Value::Kind::Int) || t[4].as_int() < 0)
      throw Error(ErrorKind::Corrupt, abs_path, where,
                  expected_found("a non-negative storage size", t[4].repr(40)));
    const auto numel = static_cast<uint64_t>(t[4].as_int());
    if (auto known = by_key.find(key); known != by_key.end()) {
      if (known->second->dtype != *dtype || known->second->numel != numel)
        throw Error(ErrorKind::Corrupt, abs_path, where,
                    "storage '" + key + "' is referenced twice with different types or sizes");
      return Value::storage(known->second);
    }
    auto ds = vf.storages.find(key);
    if (ds == vf.storages.end())
      throw Error(ErrorKind::Corrupt, rf.path, "group /files/" + name + "/storages",
                  "the pickle refers to storage '" + key + "' but there is no dataset of that name");
    if (!stored_matches(ds->second.stored, *dtype))
      throw Error(ErrorKind::Corrupt, rf.path, "dataset " + ds->second.path,
                  expected_found("elements of " + std::string(dtype_name(*dtype)), ds->second.type_text));
    if (ds->second.numel != numel)
      throw Error(ErrorKind::Corrupt, rf.path, "dataset " + ds->second.path,
                  expected_found(std::to_string(numel) + " elements (the pickle's size)",
                                 std::to_string(ds->second.numel)));
    auto s = std::make_shared<Storage>();
    s->key = key;
    s->dtype = *dtype;
    s->numel = numel;
    s->location = t[3].is(Value::Kind::Str) ? t[3].as_str() : std::string("cpu");
    std::shared_ptr<const std::vector<uint8_t>> owned;
    const auto bytes = rf.bytes(ds->second, element_size(*dtype), &owned);
    if (owned) {
      s->owned = owned;
    } else if (numel == 0) {
      s->owned = std::make_shared<const std::vector<uint8_t>>();
    } else {
      s->map_from(rf.map, static_cast<uint64_t>(bytes.data() - rf.map->bytes().data()));
    }
    by_key.emplace(key, s);
    order.push_back(s);
    return Value::storage(s);
  };
  UnpickleResult r = unpickle(pickle_bytes, opts);
  for (const auto& s : order) tf.file_size += s->nbytes();
  tf.root = std::move(r.value);
  tf.pickle_protocol = r.protocol;
  tf.globals = std::move(r.globals);
  tf.storages = std::move(order);
  return tf;
}

namespace {
std::optional<GradTensor> grad_tensor(const Snapshot::RankFile& rf, const GradDataset& g) {
  auto s = std::make_shared<Storage>();
  s->key = g.ds.path;
  s->dtype = g.dtype;
  s->numel = g.ds.numel;
  std::shared_ptr<const std::vector<uint8_t>> owned;
  const auto bytes = rf.bytes(g.ds, element_size(g.dtype), &owned);
  if (owned) {
    s->owned = owned;
  } else if (g.ds.numel == 0) {
    s->owned = std::make_shared<const std::vector<uint8_t>>();
  } else {
    s->map_from(rf.map, static_cast<uint64_t>(bytes.data() - rf.map->bytes().data()));
  }
  GradTensor out;
  out.tensor.dtype = g.dtype;
  out.tensor.shape = g.shape;
  out.tensor.strides = Tensor::contiguous_strides(g.shape);
  out.tensor.storage = std::move(s);
  out.scale = g.scale;
  return out;
}
}  // namespace

std::optional<GradTensor> Snapshot::partition_grad(int rank, int group) const {
  if (rank < 0 || static_cast<size_t>(rank) >= rank_files_.size() || !rank_files_[static_cast<size_t>(rank)])
    return std::nullopt;
  const RankFile& rf = *rank_files_[static_cast<size_t>(rank)];
  auto it = rf.partition_grads.find(group);
  if (it == rf.partition_grads.end()) return std::nullopt;
  return grad_tensor(rf, it->second);
}

std::vector<int> Snapshot::partition_grad_groups(int rank) const {
  std::vector<int> out;
  if (rank < 0 || static_cast<size_t>(rank) >= rank_files_.size() || !rank_files_[static_cast<size_t>(rank)])
    return out;
  for (const auto& [g, _] : rank_files_[static_cast<size_t>(rank)]->partition_grads) out.push_back(g);
  return out;
}

std::vector<std::pair<std::string, GradTensor>> Snapshot::lp_grads(int rank) const {
  std::vector<std::pair<std::string, GradTensor>> out;
  if (rank < 0 || static_cast<size_t>(rank) >= rank_files_.size() || !rank_files_[static_cast<size_t>(rank)])
    return out;
  const RankFile& rf = *rank_files_[static_cast<size_t>(rank)];
  for (const auto& [name, g] : rf.lp_grads) out.emplace_back(name, *grad_tensor(rf, g));
  return out;
}

}  // namespace ckptdoc::snapshot
