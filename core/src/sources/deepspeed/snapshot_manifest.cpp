// manifest.json of a snapshot: the commit point the hook writes last, and the list of snapshots in a folder.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"

namespace fs = std::filesystem;

namespace ckptdoc::snapshot {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxManifestBytes = 64ull << 20;  // a 100k-rank job's manifest is a few MiB

std::string read_small_file(const fs::path& p) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec)
    throw Error(ec == std::errc::no_such_file_or_directory ? ErrorKind::NotFound : ErrorKind::Io, p.string(),
                "", "cannot be read: " + ec.message());
  if (size > kMaxManifestBytes)
    throw Error(ErrorKind::Unsupported, p.string(), "",
                expected_found("a manifest of at most 64 MiB", std::to_string(size) + " bytes"));
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, p.string(), "", "cannot be opened");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Reader {
  std::string file;

  const json& need(const json& obj, const char* key, json::value_t type, const char* what) const {
    auto it = obj.find(key);
    if (it == obj.end()) throw Error(ErrorKind::Corrupt, file, std::string("key '") + key + "'", "missing");
    const bool ok = it->type() == type || (type == json::value_t::number_float && it->is_number()) ||
                    (type == json::value_t::number_integer && it->is_number_integer());
    if (!ok)
      throw Error(ErrorKind::Corrupt, file, std::string("key '") + key + "'",
                  expected_found(what, it->type_name()));
    return *it;
  }
  std::optional<double> opt_number(const json& obj, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return std::nullopt;
    if (!it->is_number())
      throw Error(ErrorKind::Corrupt, file, std::string("key '") + key + "'",
                  expected_found("a number", it->type_name()));
    return it->get<double>();
  }
  int64_t integer(const json& obj, const char* key) const {
    return need(obj, key, json::value_t::number_integer, "an integer").get<int64_t>();
  }
  std::string string(const json& obj, const char* key, bool required = true) const {
    auto it = obj.find(key);
    if (it == obj.end() && !required) return {};
    return need(obj, key, json::value_t::string, "a string").get<std::string>();
  }
  bool boolean(const json& obj, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return false;
    if (!it->is_boolean())
      throw Error(ErrorKind::Corrupt, file, std::string("key '") + key + "'",
                  expected_found("true or false", it->type_name()));
    return it->get<bool>();
  }
};

// A rank file name must be a plain file name inside the snapshot folder.
bool plain_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

LiveScalars read_live(const Reader& r, const json& j) {
  LiveScalars l;
  l.global_steps = r.integer(j, "global_steps");
  l.global_samples = j.contains("global_samples") ? r.integer(j, "global_samples") : 0;
  l.skipped_steps = j.contains("skipped_steps") ? r.integer(j, "skipped_steps") : 0;
  l.micro_steps = j.contains("micro_steps") ? r.integer(j, "micro_steps") : 0;
  l.grad_norm = r.opt_number(j, "grad_norm");
  l.gradient_clipping = r.opt_number(j, "gradient_clipping");
  if (auto it = j.find("overflow"); it != j.end() && !it->is_null()) l.overflow = r.boolean(j, "overflow");
  l.loss_scale = r.opt_number(j, "loss_scale");
  l.min_loss_scale = r.opt_number(j, "min_loss_scale");
  l.dynamic_loss_scale = r.boolean(j, "dynamic_loss_scale");
  if (auto it = j.find("lr"); it != j.end() && it->is_array()) {
    for (const auto& v : *it)
      l.lr.push_back(v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt);
  }
  l.grads_requested = r.boolean(j, "grads_requested");
  l.has_grads = r.boolean(j, "has_grads");
  return l;
}

}  // namespace

Manifest Manifest::read(const std::string& dir) {
  const fs::path path = fs::path(dir) / kManifestName;
  Reader r{path.string()};
  json j;
  try {
    j = json::parse(read_small_file(path));
  } catch (const json::exception& e) {
    throw Error(ErrorKind::Corrupt, r.file, "", std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object())
    throw Error(ErrorKind::Corrupt, r.file, "", expected_found("a JSON object", j.type_name()));
  const std::string format = r.string(j, "format");
  if (format != kFormatName)
    throw Error(ErrorKind::Unsupported, r.file, "key 'format'",
                expected_found(std::string("'") + kFormatName + "'", "'" + format + "'"));
  Manifest m;
  m.format_version = static_cast<int>(r.integer(j, "format_version"));
  if (m.format_version != kFormatVersion)
    throw Error(ErrorKind::Unsupported, r.file, "key 'format_version'",
                "version " + std::to_string(m.format_version) + " is not one this ckptdoc reads (it reads " +
                    std::to_string(kFormatVersion) + ")");
  m.dir = fs::absolute(fs::path(dir)).lexically_normal().string();
  if (m.dir.size() > 1 && m.dir.back() == '/') m.dir.pop_back();
  m.id = r.string(j, "id", false);
  m.tag = r.string(j, "tag");
  m.optimizer = r.string(j, "optimizer", false);
  m.dtype = r.string(j, "dtype", false);
  m.ds_version = r.string(j, "ds_version", false);
  m.torch_version = r.string(j, "torch_version", false);
  m.created_unix = r.opt_number(j, "created_unix").value_or(0);
  m.world_size = static_cast<int>(r.integer(j, "world_size"));
  m.zero_stage = j.contains("zero_stage") ? static_cast<int>(r.integer(j, "zero_stage")) : 0;
  m.live = read_live(r, r.need(j, "live", json::value_t::object, "an object"));
  for (const auto& e : r.need(j, "ranks", json::value_t::array, "an array")) {
    if (!e.is_object())
      throw Error(ErrorKind::Corrupt, r.file, "key 'ranks'", expected_found("objects", e.type_name()));
    RankEntry re;
    re.rank = static_cast<int>(r.integer(e, "rank"));
    re.file = r.string(e, "file");
    if (!plain_name(re.file))
      throw Error(ErrorKind::PathEscape, r.file, "key 'ranks'",
                  "rank file '" + re.file + "' is not a plain file name");
    re.bytes = static_cast<uint64_t>(std::max<int64_t>(0, r.integer(e, "bytes")));
    re.host = r.string(e, "host", false);
    re.has_grads = r.boolean(e, "has_grads");
    m.ranks.push_back(std::move(re));
  }
  if (m.world_size < 1 || static_cast<size_t>(m.world_size) != m.ranks.size())
    throw Error(
        ErrorKind::Inconsistent, r.file, "key 'ranks'",
        expected_found(std::to_string(m.world_size) + " ranks (world_size)", std::to_string(m.ranks.size())));
  std::sort(m.ranks.begin(), m.ranks.end(),
            [](const RankEntry& a, const RankEntry& b) { return a.rank < b.rank; });
  for (size_t i = 0; i < m.ranks.size(); ++i)
    if (m.ranks[i].rank != static_cast<int>(i))
      throw Error(ErrorKind::Corrupt, r.file, "key 'ranks'",
                  "ranks are not 0.." + std::to_string(m.ranks.size() - 1) + " exactly once");
  const json& files = r.need(j, "files", json::value_t::object, "an object");
  for (auto it = files.begin(); it != files.end(); ++it) {
    if (!it.value().is_string())
      throw Error(ErrorKind::Corrupt, r.file, "key 'files'",
                  expected_found("rank file names", it.value().type_name()));
    const std::string owner = it.value().get<std::string>();
    if (!plain_name(it.key()))
      throw Error(ErrorKind::PathEscape, r.file, "key 'files'",
                  "'" + it.key() + "' is not a plain file name");
    const bool known =
        std::any_of(m.ranks.begin(), m.ranks.end(), [&](const RankEntry& e) { return e.file == owner; });
    if (!known)
      throw Error(ErrorKind::Inconsistent, r.file, "key 'files'",
                  "'" + it.key() + "' is said to be in '" + owner + "', which no rank wrote");
    m.files[it.key()] = owner;
  }
  if (auto it = j.find("extra_files"); it != j.end() && it->is_array())
    for (const auto& e : *it)
      if (e.is_string() && plain_name(e.get<std::string>())) m.extra_files.push_back(e.get<std::string>());
  return m;
}

bool is_snapshot_dir(const std::string& dir) {
  std::error_code ec;
  const fs::path p = fs::path(dir) / kManifestName;
  if (!fs::is_regular_file(p, ec)) return false;
  std::ifstream in(p, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head.find(std::string("\"") + kFormatName + "\"") != std::string::npos;
}

bool holds_snapshots(const std::string& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && is_snapshot_dir(it->path().string())) return true;
  return false;
}

std::vector<Manifest> list_snapshots(const std::string& dir) {
  std::vector<Manifest> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || !is_snapshot_dir(it->path().string())) continue;
    try {
      out.push_back(Manifest::read(it->path().string()));
    } catch (const Error&) {
      // being replaced or damaged: whoever opens it by name gets the error
    }
  }
  std::sort(out.begin(), out.end(), [](const Manifest& a, const Manifest& b) {
    return std::tie(a.live.global_steps, a.created_unix, a.tag) <
           std::tie(b.live.global_steps, b.created_unix, b.tag);
  });
  return out;
}

std::string virtual_path(const std::string& dir, const std::string& rank_file, const std::string& name) {
  return dir + "/" + rank_file + ":/files/" + name;
}

}  // namespace ckptdoc::snapshot
