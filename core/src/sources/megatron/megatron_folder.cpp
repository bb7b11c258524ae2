// Megatron-core's iteration folder: the tracker file, metadata.json and common.pt (megatron_folder.h).
#include "megatron_folder.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ckptdoc/error.h"
#include "ckptdoc/format/known_objects.h"
#include "ckptdoc/format/torch_file.h"

namespace ckptdoc::megatron {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxSmallFile = 1 << 20;  // tracker and metadata.json are a few bytes

std::optional<std::string> read_small(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  const auto size = fs::file_size(p, ec);
  if (ec || size > kMaxSmallFile) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return in ? std::optional<std::string>(s.str()) : std::nullopt;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// metadata.json's sharded_backend, when it is a JSON object naming one.
std::optional<std::string> sharded_backend(const fs::path& dir, std::string* text = nullptr) {
  const auto body = read_small(dir / "metadata.json");
  if (!body) return std::nullopt;
  const auto j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("sharded_backend") || !j["sharded_backend"].is_string())
    return std::nullopt;
  if (text) *text = j.dump();
  return j["sharded_backend"].get<std::string>();
}

std::optional<int64_t> iteration_of_name(const std::string& name) {
  if (name.size() <= 5 || name.rfind("iter_", 0) != 0 || name.size() > 5 + 18) return std::nullopt;
  for (size_t i = 5; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
  return std::stoll(name.substr(5));
}

IterationFolder open_iteration(const fs::path& dir, IterationFolder r) {
  const std::string shown = dir.string();
  r.dir = shown;
  const auto backend = sharded_backend(dir, &r.metadata_json);
  if (!backend) {
    const bool legacy = fs::exists(dir / "mp_rank_00");
    throw Error(ErrorKind::Unsupported, (dir / "metadata.json").string(), "",
                legacy
                    ? "absent: this looks like a legacy Megatron checkpoint (mp_rank_XX/model_optim_rng.pt), "
                      "not a distributed one; the megatron-legacy source reads the save folder or the "
                      "iteration folder that holds its mp_rank_* folders"
                    : "absent or without \"sharded_backend\": not a Megatron-core distributed checkpoint");
  }
  if (*backend != "torch_dist")
    throw Error(ErrorKind::Unsupported, (dir / "metadata.json").string(), "",
                "sharded_backend \"" + *backend + "\": ckptdoc reads the torch_dist backend only");
  r.backend = *backend;
  if (!r.iteration) r.iteration = iteration_of_name(dir.filename().string());
  return r;
}

}  // namespace

bool is_megatron_path(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::is_directory(p, ec)) return false;
  return fs::is_regular_file(p / kTracker, ec) || sharded_backend(p).has_value();
}

IterationFolder resolve(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  const fs::path tracker = p / kTracker;
  if (!fs::is_regular_file(tracker, ec)) return open_iteration(p, {});
  const auto body = read_small(tracker);
  if (!body) throw Error(ErrorKind::Io, tracker.string(), "", "cannot be read (or is over 1 MiB)");
  const std::string named = trim(*body);
  IterationFolder r;
  r.tracker = tracker.string();
  std::string folder;
  if (named == "release") {  // Megatron-LM's name for a converted release checkpoint
    folder = "release";
  } else {
    const bool digits =
        !named.empty() && named.size() <= 18 && named.find_first_not_of("0123456789") == std::string::npos;
    if (!digits)
      throw Error(ErrorKind::Corrupt, tracker.string(), "",
                  "names '" + named.substr(0, 64) +
                      "', which is not an iteration number (nor \"release\"); nothing outside " + p.string() +
                      " is read");
    r.iteration = std::stoll(named);
    char buf[32];
    std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(*r.iteration));
    folder = buf;
  }
  const fs::path dir = p / folder;
  // the folder must be a real folder directly inside the save folder: a symlink could lead anywhere
  if (fs::is_symlink(fs::symlink_status(dir, ec)) || !fs::is_directory(dir, ec))
    throw Error(ErrorKind::NotFound, tracker.string(), "",
                "names iteration " + named + ", but " + dir.string() +
                    (fs::is_symlink(fs::symlink_status(dir, ec)) ? " is a symbolic link (not followed)"
                                                                 : " is not a folder"));
  return open_iteration(dir, std::move(r));
}

std::string CommonState::summary() const {
  if (!present) return "common.pt: absent (nor a common_state item in the DCP)";
  if (!error.empty()) return where + ": unreadable (" + error + ")";
  std::string s = where + ": ";
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", " : "") + keys[i];
  if (keys.empty()) s += "(no keys)";
  if (!args_type.empty())
    s += "; args is an " + args_type + " of " + std::to_string(args_fields) +
         " fields, read as data (never constructed)";
  if (iteration) s += "; iteration " + std::to_string(*iteration);
  return s;
}

namespace {

// The keys of the common state dict and the ones the reports use.
void read_state(CommonState& c, const Value& state) {
  if (!state.is_dict()) {
    c.error = "it holds a " + state.type_name() + ", not a dict";
    return;
  }
  for (const auto& [k, v] : state.as_dict().items) {
    c.keys.push_back(k.is(Value::Kind::Str) ? k.as_str() : k.repr(40));
    if (!k.is(Value::Kind::Str)) continue;
    if (k.as_str() == "iteration" && v.is(Value::Kind::Int)) c.iteration = v.as_int();
    if (k.as_str() == "checkpoint_version" && (v.is(Value::Kind::Float) || v.is(Value::Kind::Int)))
      c.checkpoint_version = v.as_float();
    if (k.as_str() == "args" && v.is(Value::Kind::Object)) {
      c.args_type = v.type_name();
      if (const Value* attrs = namespace_attrs(v); attrs && attrs->is_dict())
        c.args_fields = attrs->as_dict().items.size();
    }
  }
}

// megatron-core 0.19: ShardedObject("common_state", state, global_shape (1,), offset (0,)), whose unique key
// names the item; DCP stores it as torch.save([state]).
constexpr const char* kCommonStateKey = "common_state/shard_0_1";

CommonState read_common_item(const dcp::Checkpoint& ckpt) {
  CommonState c;
  const dcp::Entry* e = ckpt.metadata().find(kCommonStateKey);
  if (!e) return c;
  c.present = true;
  c.in_checkpoint = true;
  c.where = kCommonStateKey;
  c.key = kCommonStateKey;
  if (e->kind != dcp::EntryKind::Bytes || !e->bytes_item) {
    c.error = e->kind != dcp::EntryKind::Bytes ? "it is a tensor, not a bytes item"
                                               : ".metadata names no storage item for it";
    return c;
  }
  c.where += " (" + dcp::item_name(*e->bytes_item) + ")";
  c.file = e->bytes_item->file;
  try {
    const TorchFile tf = ckpt.open_item(*e->bytes_item);
    if (!tf.root.is_sequence() || tf.root.items().size() != 1) {
      c.error = "it holds a " + tf.root.type_name() + ", not a one-element list of the state";
      return c;
    }
    read_state(c, tf.root.items().front());
  } catch (const std::exception& ex) {
    c.error = ex.what();
  }
  return c;
}

}  // namespace

CommonState read_common(const std::string& iteration_dir, const dcp::Checkpoint& ckpt) {
  CommonState c;
  const fs::path path = fs::path(iteration_dir) / "common.pt";
  std::error_code ec;
  if (!fs::exists(path, ec)) return read_common_item(ckpt);
  c.present = true;
  c.hazards = pickle_hazards_of_file(path.string(), "common.pt");
  try {
    const TorchFile tf = TorchFile::open(path.string());
    read_state(c, tf.root);
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

}  // namespace ckptdoc::megatron
