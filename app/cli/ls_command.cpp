// `ckptdoc ls FILE`: the tree of a torch.save or safetensors file, read without running anything.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_set>

#include "ckptdoc/error.h"
#include "ckptdoc/format/pickle_safety.h"
#include "ckptdoc/format/safetensors.h"
#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/model/finding_codes.h"
#include "commands.h"
#include "format_helpers.h"

namespace ckptdoc::cli {
namespace {

using nlohmann::json;

// An Enum member as pickle writes it: getattr(Cls, "NAME") (Python >= 3.12 and torch's own enums) or
// Cls(value). Shown as what it is, "deepspeed.runtime.zero.config.ZeroStageEnum.gradients", not as the
// getattr call.
std::optional<std::string> enum_member(const ObjectData& o) {
  if (o.how != ObjectData::How::Reduce || !o.args || !o.args->is(Value::Kind::Tuple) || o.state)
    return std::nullopt;
  const auto& args = o.args->items();
  const bool getattr = (o.module == "builtins" || o.module == "__builtin__") && o.name == "getattr";
  if (getattr && args.size() == 2 && args[0].is(Value::Kind::Global) && args[1].is(Value::Kind::Str)) {
    const auto& [module, name] = args[0].as_global();
    return module + "." + name + "." + args[1].as_str();
  }
  const bool enum_class = o.name.size() > 4 && o.name.compare(o.name.size() - 4, 4, "Enum") == 0;
  if (enum_class && args.size() == 1 && (args[0].is(Value::Kind::Int) || args[0].is(Value::Kind::Str)))
    return o.qualified() + "(" + args[0].repr(40) + ")";
  return std::nullopt;
}

std::string leaf_text(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Tensor: {
      const Tensor& t = v.as_tensor();
      std::string s = std::string(t.is_parameter ? "Parameter " : "Tensor ") +
                      std::string(dtype_name(t.dtype)) + " " + shape_text(t.shape) + " " +
                      human_bytes(t.nbytes());
      if (!t.is_contiguous()) s += " (strided)";
      if (t.storage && t.storage->nbytes() != t.nbytes())
        s += " (view at " + std::to_string(t.storage_offset) + " of storage '" + t.storage->key + "', " +
             human_bytes(t.storage->nbytes()) + ")";
      return s;
    }
    case Value::Kind::Object: {
      const auto& o = v.as_object();
      if (auto member = enum_member(o)) return "enum " + *member;
      return "object " + o.qualified();
    }
    default:
      return v.type_name() + " " + v.repr(100);
  }
}

bool is_container(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::List:
    case Value::Kind::Tuple:
    case Value::Kind::Set:
    case Value::Kind::FrozenSet:
    case Value::Kind::Dict:
      return true;
    case Value::Kind::Object: {
      const auto& o = v.as_object();
      return (o.state && (o.state->is_dict() || o.state->is_sequence())) || !o.dict_items.empty() ||
             !o.list_items.empty();
    }
    default:
      return false;
  }
}

// Containers already printed (a pickle may reference one container many times: each is shown once, so a
// "billion laughs" stream prints in time linear in its size).
using Seen = std::unordered_set<const void*>;

void print_tree(const Value& v, const std::string& label, const std::string& indent, bool last, int depth,
                const LsOptions& o, bool root, Seen& seen) {
  const std::string branch = root ? "" : (last ? "└─ " : "├─ ");
  const std::string child_indent = root ? "" : indent + (last ? "   " : "│  ");
  std::string head = label.empty() ? "" : label + ": ";
  if (!is_container(v)) {
    std::printf("%s%s%s%s\n", indent.c_str(), branch.c_str(), head.c_str(), leaf_text(v).c_str());
    return;
  }
  if (!seen.insert(v.identity()).second) {
    std::printf("%s%s%s(the same %s as shown above)\n", indent.c_str(), branch.c_str(), head.c_str(),
                v.type_name().c_str());
    return;
  }
  std::vector<std::pair<std::string, const Value*>> children;
  std::string summary;
  if (v.is_dict()) {
    const auto& d = v.as_dict();
    for (const auto& [k, val] : d.items)
      children.emplace_back(k.is(Value::Kind::Str) ? k.as_str() : k.repr(60), &val);
    summary = v.type_name() + " (" + std::to_string(d.items.size()) + " keys)";
  } else if (v.is(Value::Kind::Object)) {
    const auto& obj = v.as_object();
    summary = "object " + obj.qualified();
    if (obj.state && obj.state->is_dict())
      for (const auto& [k, val] : obj.state->as_dict().items)
        children.emplace_back(k.is(Value::Kind::Str) ? k.as_str() : k.repr(60), &val);
    else if (obj.state)
      children.emplace_back("state", obj.state.get());
    for (const auto& [k, val] : obj.dict_items) children.emplace_back(k.repr(60), &val);
    for (size_t i = 0; i < obj.list_items.size(); ++i)
      children.emplace_back("[" + std::to_string(i) + "]", &obj.list_items[i]);
  } else {
    const auto& items = v.items();
    for (size_t i = 0; i < items.size(); ++i) children.emplace_back("[" + std::to_string(i) + "]", &items[i]);
    summary = v.type_name() + " (" + std::to_string(items.size()) + " items)";
  }
  std::printf("%s%s%s%s\n", indent.c_str(), branch.c_str(), head.c_str(), summary.c_str());
  if (depth > 64) return;
  const size_t shown = std::min(children.size(), static_cast<size_t>(std::max(o.max_items, 1)));
  for (size_t i = 0; i < shown; ++i)
    print_tree(*children[i].second, children[i].first, child_indent, i + 1 == children.size(), depth + 1, o,
               false, seen);
  if (shown < children.size())
    std::printf("%s└─ … %zu more\n", child_indent.c_str(), children.size() - shown);
}

json tensor_json(const Tensor& t) {
  json j;
  j["type"] = t.is_parameter ? "Parameter" : "Tensor";
  j["dtype"] = std::string(dtype_name(t.dtype));
  j["shape"] = t.shape;
  j["stride"] = t.strides;
  j["storage_offset"] = t.storage_offset;
  j["bytes"] = t.nbytes();
  if (t.storage) {
    j["storage"] = t.storage->key;
    j["storage_bytes"] = t.storage->nbytes();
    j["location"] = t.storage->location;
  }
  return j;
}

json value_json(const Value& v, int depth, Seen& seen) {
  if (depth > 200) return json{{"type", "…"}};
  if (const void* id = v.identity(); id && !v.is_tensor() && !seen.insert(id).second)
    return json{{"type", v.type_name()}, {"same_as_shown_above", true}};
  switch (v.kind()) {
    case Value::Kind::None:
      return nullptr;
    case Value::Kind::Bool:
      return v.as_bool();
    case Value::Kind::Int:
      return v.as_int();
    case Value::Kind::Float:
      return v.as_float();
    case Value::Kind::Str:
      return v.as_str();
    case Value::Kind::Tensor:
      return tensor_json(v.as_tensor());
    case Value::Kind::Dict: {
      json items = json::array();
      for (const auto& [k, val] : v.as_dict().items)
        items.push_back(
            json{{"key", k.is(Value::Kind::Str) ? json(k.as_str()) : value_json(k, depth + 1, seen)},
                 {"value", value_json(val, depth + 1, seen)}});
      return json{{"type", v.type_name()}, {"items", items}};
    }
    case Value::Kind::List:
    case Value::Kind::Tuple:
    case Value::Kind::Set:
    case Value::Kind::FrozenSet: {
      json items = json::array();
      for (const auto& it : v.items()) items.push_back(value_json(it, depth + 1, seen));
      return json{{"type", v.type_name()}, {"items", items}};
    }
    case Value::Kind::Size:
      return json{{"type", "torch.Size"}, {"value", v.as_size()}};
    case Value::Kind::Object: {
      const auto& o = v.as_object();
      json j{{"type", "object"}, {"class", o.qualified()}};
      if (o.args) j["args"] = value_json(*o.args, depth + 1, seen);
      if (o.state) j["state"] = value_json(*o.state, depth + 1, seen);
      return j;
    }
    default:
      return json{{"type", v.type_name()}, {"repr", v.repr(200)}};
  }
}

json hazards_json(const std::vector<PickleHazard>& hazards) {
  json out = json::array();
  for (const auto& h : hazards) {
    out.push_back({{"code", model::code_name(model::Code::UnsafePickle)},
                   {"severity", h.severity},
                   {"message", h.message()},
                   {"file", h.file},
                   {"record", h.record},
                   {"callable", h.callable},
                   {"how", h.how},
                   {"rule", h.why},
                   {"offset", h.offset},
                   {"count", h.count}});
    if (!h.reaches.empty()) out.back()["reaches"] = h.reaches;
  }
  return out;
}

void print_hazards(const std::vector<PickleHazard>& hazards) {
  if (hazards.empty()) return;
  std::printf(
      "\nPickle safety (what torch.load(weights_only=False) would import and call; ckptdoc ran none of "
      "it):\n");
  for (const auto& h : hazards)
    std::printf("  %-7s unsafe-pickle: %s\n", h.severity.c_str(), h.message().c_str());
  std::printf("  %s\n", pickle_advice(worst_severity(hazards)).c_str());
}

int ls_torch(const LsOptions& o) {
  TorchFile tf;
  try {
    tf = TorchFile::open(o.path);
  } catch (const Error&) {
    // A stream ckptdoc refuses may still run in torch.load: say what it reaches before the error.
    const auto hazards = assess_pickle_uses(TorchFile::pickle_uses_of(o.path), o.path);
    if (o.json && !hazards.empty())
      std::printf("%s\n", json{{"path", o.path}, {"findings", hazards_json(hazards)}}.dump(1).c_str());
    else
      print_hazards(hazards);
    throw;
  }
  const auto hazards = assess_pickle_uses(tf.pickle_uses, o.path);
  Seen seen;
  if (o.json) {
    json j{{"path", o.path},
           {"format", tf.format == TorchFormat::Zip ? "torch-zip" : "torch-legacy"},
           {"archive", tf.archive_name},
           {"pickle_protocol", tf.pickle_protocol},
           {"storages", tf.storages.size()},
           {"globals", tf.globals},
           {"bytes", tf.file_size},
           {"findings", hazards_json(hazards)},
           {"root", value_json(tf.root, 0, seen)}};
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }
  std::printf("%s: torch.save %s%s, pickle protocol %d, %zu storages, %s\n", o.path.c_str(),
              tf.format == TorchFormat::Zip ? "zip archive '" : "legacy stream",
              tf.format == TorchFormat::Zip ? (tf.archive_name + "'").c_str() : "", tf.pickle_protocol,
              tf.storages.size(), human_bytes(tf.file_size).c_str());
  print_tree(tf.root, "", "", true, 0, o, true, seen);
  print_hazards(hazards);
  return 0;
}

int ls_safetensors(const LsOptions& o) {
  const SafetensorsFile sf = SafetensorsFile::open(o.path);
  if (o.json) {
    json tensors = json::array();
    for (const auto& e : sf.entries) {
      json t = tensor_json(e.tensor);
      t["name"] = e.name;
      t["data_offsets"] = {e.begin, e.end};
      tensors.push_back(t);
    }
    std::printf(
        "%s\n",
        json{{"path", o.path}, {"format", "safetensors"}, {"metadata", sf.metadata}, {"tensors", tensors}}
            .dump(1)
            .c_str());
    return 0;
  }
  std::printf("%s: safetensors, %zu tensors, header %llu bytes\n", o.path.c_str(), sf.entries.size(),
              static_cast<unsigned long long>(sf.header_size));
  for (const auto& [k, v] : sf.metadata) std::printf("  metadata %s = %s\n", k.c_str(), v.c_str());
  const size_t shown = std::min(sf.entries.size(), static_cast<size_t>(std::max(o.max_items, 1)));
  for (size_t i = 0; i < shown; ++i) {
    const auto& e = sf.entries[i];
    std::printf("%s %s: %s %s %s\n", i + 1 == sf.entries.size() ? "└─" : "├─", e.name.c_str(),
                std::string(dtype_name(e.tensor.dtype)).c_str(), shape_text(e.tensor.shape).c_str(),
                human_bytes(e.tensor.nbytes()).c_str());
  }
  if (shown < sf.entries.size()) std::printf("└─ … %zu more (--max-items)\n", sf.entries.size() - shown);
  return 0;
}

}  // namespace

int run_ls(const LsOptions& o) {
  try {
    const auto f = MappedFile::open(o.path);
    const auto head = f->bytes().first(std::min<size_t>(f->size(), 16));
    if (TorchFile::is_torch_file(head)) return ls_torch(o);
    if (SafetensorsFile::looks_like_safetensors(head, f->size())) return ls_safetensors(o);
    throw Error(
        o.path, at_offset(0),
        "not a torch.save file (zip or legacy) or a safetensors file; the first bytes do not match either");
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc ls: error [%s]: %s\n", std::string(kind_name(e.kind())).c_str(), e.what());
    return 2;
  }
}

}  // namespace ckptdoc::cli
