// Reads torch.save files: the zip format and the legacy stacked-pickle stream. Storages become views on
// the memory map; nothing is copied until a tensor's bytes are touched.
#include <cstring>
#include <functional>
#include <map>
#include <string_view>

#include "ckptdoc/error.h"
#include "ckptdoc/format/pickle_use_memo.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/format/unpickler.h"
#include "ckptdoc/format/zip_reader.h"
#include "io/no_read_around.h"

namespace ckptdoc {
namespace {

constexpr uint8_t kLegacyMagic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9,
                                    0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
constexpr uint8_t kLegacyProtocolVersion[] = {0x4d, 0xe9, 0x03, 0x2e};  // BININT2 1001, STOP

// Storage class GLOBAL -> dtype (module is ignored like torch does; UntypedStorage holds bytes).
DType storage_dtype(const Value& cls, const std::string& file, const std::string& where) {
  if (cls.is(Value::Kind::Global)) {
    const auto& [module, name] = cls.as_global();
    if (auto d = dtype_from_storage_class(name)) return *d;
    if (name == "UntypedStorage" || name == "TypedStorage") return DType::U8;
    throw Error(ErrorKind::Unsupported, file, where, expected_found("a storage class", module + "." + name));
  }
  throw Error(ErrorKind::Corrupt, file, where,
              expected_found("a storage class GLOBAL", std::string(cls.kind_name())));
}

// Validates a persistent id tuple ('storage', cls, key, location, numel[, view_metadata]) and returns the
// (possibly cached) storage for its key.
class StorageTable {
 public:
  StorageTable(std::string file, std::string record) : file_(std::move(file)), record_(std::move(record)) {}

  Value load(const Value& pid, bool legacy) {
    const std::string where = "record '" + record_ + "'";
    if (!pid.is(Value::Kind::Tuple))
      throw Error(ErrorKind::Corrupt, file_, where, expected_found("a persistent id tuple", pid.type_name()));
    const auto& t = pid.items();
    const size_t want = legacy ? 6 : 5;
    if (t.size() != want && !(legacy && t.size() == 5))
      throw Error(
          ErrorKind::Corrupt, file_, where,
          expected_found("a persistent id of " + std::to_string(want) + " items", std::to_string(t.size())));
    if (!t[0].is(Value::Kind::Str) || t[0].as_str() != "storage")
      throw Error(ErrorKind::Corrupt, file_, where,
                  expected_found("persistent id type 'storage'", t[0].repr(40)));
    const DType dtype = storage_dtype(t[1], file_, where);
    if (!t[2].is(Value::Kind::Str) && !t[2].is(Value::Kind::Int))
      throw Error(ErrorKind::Corrupt, file_, where, expected_found("a storage key string", t[2].type_name()));
    const std::string key = t[2].is(Value::Kind::Str) ? t[2].as_str() : std::to_string(t[2].as_int());
    const std::string location = t[3].is(Value::Kind::Str) ? t[3].as_str() : std::string("cpu");
    if (!t[4].is(Value::Kind::Int) || t[4].as_int() < 0)
      throw Error(ErrorKind::Corrupt, file_, where,
                  expected_found("a non-negative storage size", t[4].repr(40)));
    const auto numel = static_cast<uint64_t>(t[4].as_int());
    if (numel > (uint64_t{1} << 62) / element_size(dtype))
      throw Error(ErrorKind::Corrupt, file_, where,
                  "storage '" + key + "' claims " + std::to_string(numel) + " elements, which is absurd");
    if (legacy && t.size() == 6 && !t[5].is_none())
      throw Error(ErrorKind::Unsupported, file_, where,
                  "storage views (legacy view_metadata) are not supported");

    auto it = by_key_.find(key);
    if (it != by_key_.end()) {
      const auto& s = it->second;
      if (s->dtype != dtype || s->numel != numel)
        throw Error(ErrorKind::Corrupt, file_, where,
                    "storage '" + key + "' is referenced twice with different types or sizes (" +
                        std::string(dtype_name(s->dtype)) + "[" + std::to_string(s->numel) + "] vs " +
                        std::string(dtype_name(dtype)) + "[" + std::to_string(numel) + "])");
      return Value::storage(s);
    }
    auto s = std::make_shared<Storage>();
    s->key = key;
    s->dtype = dtype;
    s->numel = numel;
    s->location = location;
    by_key_.emplace(key, s);
    order_.push_back(s);
    return Value::storage(s);
  }

  std::vector<std::shared_ptr<Storage>> order_;
  std::map<std::string, std::shared_ptr<Storage>> by_key_;

 private:
  std::string file_, record_;
};

// The zip's data.pkl entry, after the checks made before its pickle is read; sets tf.archive_name.
const ZipEntry& pickle_entry(TorchFile& tf, const ZipReader& zip) {
  if (zip.entries().empty())
    throw Error(ErrorKind::Corrupt, tf.path, "zip directory", "the archive has no records");
  const std::string& first = zip.entries().front().name;
  const auto slash = first.find('/');
  if (slash == std::string::npos)
    throw Error(ErrorKind::Unsupported, tf.path, "record '" + first + "'",
                "record is not inside a top-level folder, as torch.save writes");
  tf.archive_name = first.substr(0, slash);
  const std::string prefix = tf.archive_name + "/";
  if (zip.find(prefix + "constants.pkl"))
    throw Error(ErrorKind::Unsupported, tf.path, "record '" + prefix + "constants.pkl'",
                "this is a TorchScript archive (torch.jit.save), not a torch.save file");
  const ZipEntry* pkl = zip.find(prefix + "data.pkl");
  if (!pkl)
    throw Error(ErrorKind::Corrupt, tf.path, "zip directory",
                expected_found("a record '" + prefix + "data.pkl'", "none"));
  return *pkl;
}

void open_zip(TorchFile& tf, const UnpickleLimits& limits, PickleUseLog& uses) {
  const NoReadAround no_read_around(*tf.file);
  ZipReader zip(tf.file);
  const ZipEntry* pkl = &pickle_entry(tf, zip);
  const std::string prefix = tf.archive_name + "/";

  StorageTable table(tf.path, pkl->name);
  UnpickleOptions opts;
  opts.limits = limits;
  opts.file_name = tf.path;
  opts.record_name = pkl->name;
  opts.uses = &uses;
  opts.persistent_load = [&](const Value& pid) { return table.load(pid, false); };
  const auto pickle = zip.data(*pkl);
  tf.file->will_need(static_cast<uint64_t>(pickle.data() - tf.file->bytes().data()),
                     pickle.size());  // one read
  UnpickleResult r = unpickle(pickle, opts);

  for (const auto& s : table.order_) {
    const std::string rec = prefix + "data/" + s->key;
    const ZipEntry* e = zip.find(rec);
    if (!e)
      throw Error(ErrorKind::Corrupt, tf.path, "record '" + rec + "'",
                  "storage record is missing from the archive");
    if (e->size != s->nbytes())
      throw Error(ErrorKind::Corrupt, tf.path, "record '" + rec + "'",
                  expected_found(std::to_string(s->nbytes()) + " bytes (" + std::to_string(s->numel) + " x " +
                                     std::string(dtype_name(s->dtype)) + ")",
                                 std::to_string(e->size) + " bytes"));
    (void)zip.data(*e);  // bounds check against the file now, not at first touch
    s->map_from(tf.file, e->data_offset);
  }
  tf.root = std::move(r.value);
  tf.pickle_protocol = r.protocol;
  tf.globals = std::move(r.globals);
  tf.storages = std::move(table.order_);
}

uint64_t read_u64le(std::span<const uint8_t> b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[static_cast<size_t>(i)];
  return v;
}

// Checks that a tiny fixed pickle (magic or protocol version) is byte-exact, so no code can hide there.
size_t expect_fixed_pickle(const TorchFile& tf, std::span<const uint8_t> bytes, size_t at,
                           std::span<const uint8_t> body, const char* what) {
  const auto fail = [&] {
    throw Error(ErrorKind::Corrupt, tf.path, at_offset(at),
                std::string("legacy torch stream: ") + what + " is not the expected constant");
  };
  if (bytes.size() < at + 2 || bytes[at] != 0x80) fail();
  const uint8_t proto = bytes[at + 1];
  size_t p = at + 2;
  if (proto >= 4) {  // FRAME with the body length
    if (bytes.size() < p + 9 || bytes[p] != 0x95 || read_u64le(bytes.subspan(p + 1, 8)) != body.size())
      fail();
    p += 9;
  } else if (proto < 2) {
    fail();
  }
  if (bytes.size() < p + body.size() || std::memcmp(bytes.data() + p, body.data(), body.size()) != 0) fail();
  return p + body.size();
}

void open_legacy(TorchFile& tf, const UnpickleLimits& limits, PickleUseLog& uses) {
  const auto bytes = tf.file->bytes();
  size_t pos = expect_fixed_pickle(tf, bytes, 0, kLegacyMagic, "magic number");
  pos = expect_fixed_pickle(tf, bytes, pos, kLegacyProtocolVersion, "protocol version 1001");

  UnpickleOptions plain;
  plain.limits = limits;
  plain.file_name = tf.path;
  plain.record_name = "sys_info pickle";
  plain.uses = &uses;
  const UnpickleResult sys_info = unpickle(bytes.subspan(pos), plain);
  pos += sys_info.end_offset;

  StorageTable table(tf.path, "legacy object pickle");
  UnpickleOptions main_opts = plain;
  main_opts.record_name = "object pickle";
  main_opts.persistent_load = [&](const Value& pid) { return table.load(pid, true); };
  UnpickleResult r = unpickle(bytes.subspan(pos), main_opts);
  pos += r.end_offset;

  UnpickleOptions keys_opts = plain;
  keys_opts.record_name = "storage key list";
  UnpickleResult keys = unpickle(bytes.subspan(pos), keys_opts);
  pos += keys.end_offset;
  if (!keys.value.is(Value::Kind::List))
    throw Error(ErrorKind::Corrupt, tf.path, at_offset(pos),
                expected_found("a list of storage keys", keys.value.type_name()));

  for (const auto& k : keys.value.items()) {
    const std::string key = k.is(Value::Kind::Str) ? k.as_str() : k.repr(40);
    auto it = table.by_key_.find(key);
    if (it == table.by_key_.end())
      throw Error(ErrorKind::Corrupt, tf.path, at_offset(pos),
                  "storage key '" + key + "' is listed but no tensor uses it");
    auto& s = it->second;
    if (bytes.size() < pos + 8)
      throw Error(ErrorKind::Truncated, tf.path, at_offset(pos),
                  "file ends before the size of storage '" + key + "'");
    const uint64_t numel = read_u64le(bytes.subspan(pos, 8));
    if (numel != s->numel)
      throw Error(ErrorKind::Corrupt, tf.path, at_offset(pos),
                  "storage '" + key +
                      "': " + expected_found(std::to_string(s->numel) + " elements", std::to_string(numel)));
    pos += 8;
    const uint64_t n = s->nbytes();
    if (n > bytes.size() - pos)
      throw Error(ErrorKind::Truncated, tf.path, at_offset(pos),
                  "storage '" + key + "' needs " + std::to_string(n) + " bytes but the file has " +
                      std::to_string(bytes.size() - pos) + " left");
    // Not map_from: the legacy layout puts most storages at odd offsets, and copying them would read and hold
    // the whole file at open. They stay mapped where they are (readers of float arrays see them unaligned).
    s->file = tf.file;
    s->file_offset = pos;
    pos += n;
  }
  for (const auto& s : table.order_)
    if (!s->has_bytes())
      throw Error(ErrorKind::Corrupt, tf.path, "storage key list",
                  "storage '" + s->key + "' has no data in the file");
  tf.root = std::move(r.value);
  tf.pickle_protocol = r.protocol;
  tf.globals = std::move(r.globals);
  tf.storages = std::move(table.order_);
}

bool is_legacy_head(std::span<const uint8_t> head) {
  if (head.size() < 4 || head[0] != 0x80) return false;
  if (head[1] >= 4) return head.size() >= 13 && head[2] == 0x95 && head[11] == 0x8a && head[12] == 0x0a;
  return head[2] == 0x8a && head[3] == 0x0a;
}

}  // namespace

bool TorchFile::is_torch_file(std::span<const uint8_t> head) {
  return ZipReader::looks_like_zip(head) || is_legacy_head(head);
}

TorchFile TorchFile::open(const std::string& path, const UnpickleLimits& limits) {
  return open(MappedFile::open(path), limits);
}

namespace {

// Reads the zip or legacy stream into tf, recording what its pickles reach into `uses` as it goes.
void read_torch(TorchFile& tf, const UnpickleLimits& limits, PickleUseLog& uses) {
  const std::string& path = tf.path;
  const auto head = tf.file->bytes().first(std::min<size_t>(tf.file->size(), 16));
  bool zip = false;
  {
    // The head's first touch would read the whole read-ahead window (8 MB on the benchmark VM: 0.5 GB for a
    // cold open of a 64-rank checkpoint's optimizer files); a zip's pickle is read with its own advice.
    const NoReadAround no_read_around(*tf.file);
    zip = ZipReader::looks_like_zip(head);
  }
  if (zip) {
    tf.format = TorchFormat::Zip;
    open_zip(tf, limits, uses);
  } else if (is_legacy_head(head)) {
    tf.format = TorchFormat::Legacy;
    open_legacy(tf, limits, uses);
  } else if (tf.file_size == 0) {
    throw Error(ErrorKind::Truncated, path, "",
                "the file is empty (expected a torch.save zip or legacy stream)");
  } else {
    throw Error(
        ErrorKind::Unsupported, path, at_offset(0),
        expected_found("a torch.save file (zip 'PK\\x03\\x04' or legacy pickle magic)", "other bytes"));
  }
}

std::vector<PickleUse> finished_uses(const PickleUseLog& log) {
  std::vector<PickleUse> uses = log.uses();
  if (log.truncated()) {
    PickleUse u;
    u.callable = "<more than 4096 distinct imports and calls>";
    u.computed = true;
    u.how = PickleUseKind::Reduce;
    u.count = 1;
    uses.push_back(std::move(u));
  }
  return uses;
}

}  // namespace

std::vector<PickleUse> TorchFile::pickle_uses_of(const std::string& path) {
  PickleUseLog log;
  try {
    TorchFile tf;
    tf.path = path;
    tf.file = MappedFile::open(path);
    tf.file_size = tf.file->size();
    read_torch(tf, {}, log);
  } catch (const Error&) {
    // Whatever was reached before the failure is in the log.
  }
  return finished_uses(log);
}

std::vector<PickleUse> PickleUseMemo::uses_of(const std::string& path) {
  // What pickle_uses_of records for a zip comes from its data.pkl alone (bytes and record name): nothing
  // before the pickle records a use, nothing after it adds one.
  std::shared_ptr<const MappedFile> file;
  std::span<const uint8_t> pickle;
  std::string record;
  try {
    TorchFile tf;
    tf.path = path;
    tf.file = MappedFile::open(path);
    tf.file_size = tf.file->size();
    const NoReadAround no_read_around(*tf.file);
    if (ZipReader::looks_like_zip(tf.file->bytes().first(std::min<size_t>(tf.file->size(), 16)))) {
      const ZipReader zip(tf.file);
      const ZipEntry& e = pickle_entry(tf, zip);
      pickle = zip.data(e);
      tf.file->will_need(static_cast<uint64_t>(pickle.data() - tf.file->bytes().data()), pickle.size());
      record = e.name;
      file = tf.file;
    }
  } catch (const Error&) {
    file = nullptr;  // refused before its pickle: pickle_uses_of says what it reached
  }
  if (!file) return TorchFile::pickle_uses_of(path);
  const size_t hash = std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(pickle.data()), pickle.size()));
  for (const auto& s : seen_) {
    if (s.hash != hash || s.pickle.size() != pickle.size() ||
        std::memcmp(s.pickle.data(), pickle.data(), pickle.size()) != 0)
      continue;
    auto uses = s.uses;
    for (auto& u : uses)
      if (u.record == s.record) u.record = record;
    return uses;
  }
  auto uses = TorchFile::pickle_uses_of(path);
  seen_.push_back(Seen{hash, std::move(file), pickle, std::move(record), uses});
  return uses;
}

TorchFile TorchFile::open(std::shared_ptr<const MappedFile> file, const UnpickleLimits& limits) {
  TorchFile tf;
  const std::string path = file->path();
  tf.path = path;
  tf.file = std::move(file);
  tf.file_size = tf.file->size();
  PickleUseLog uses;
  try {
    read_torch(tf, limits, uses);
  } catch (const Error& e) {
    tf.file->check_unchanged();  // a parse error from a file that shrank under its map says the wrong thing
    throw e.with_file(path);
  }
  tf.file->check_unchanged();
  tf.pickle_uses = finished_uses(uses);
  return tf;
}

}  // namespace ckptdoc
