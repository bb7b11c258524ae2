// Reading torch.save(optimizer.state_dict()) files kept beside weights (see
// weights/optimizer_file.h).
#include "ckptdoc/weights/optimizer_file.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"

namespace fs = std::filesystem;

namespace ckptdoc::weights {

std::string OptimizerParamState::label() const {
  return "state[" + (name.empty() ? std::to_string(index) : name) + "]";
}

std::vector<std::string> optimizer_files_in(const std::string& dir) {
  static const std::regex name(R"(optimizer(_\d+)?\.bin|optimizer\.pt)");
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && std::regex_match(it->path().filename().string(), name))
      out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

OptimizerFile read_optimizer_file(const std::string& path, const std::string& file) {
  auto torch = std::make_shared<TorchFile>(TorchFile::open(path));
  const Value* state = torch->root.get("state");
  const Value* groups = torch->root.get("param_groups");
  if (!state || !state->is_dict() || !groups || !groups->is_sequence())
    throw Error(ErrorKind::Unsupported, path, "",
                expected_found("an optimizer state dict ({'state': {...}, 'param_groups': [...]})",
                               torch->root.type_name()));
  OptimizerFile out;
  out.file = file;
  out.keep_alive = torch;
  for (const auto& [k, v] : state->as_dict().items) {
    if (!(k.is(Value::Kind::Int) || k.is(Value::Kind::Str)) || !v.is_dict())
      throw Error(
          ErrorKind::Corrupt, path, "state",
          expected_found("param index or name -> dict of state", k.type_name() + " -> " + v.type_name()));
    OptimizerParamState p;
    if (k.is(Value::Kind::Int))
      p.index = k.as_int();
    else
      p.name = k.as_str();
    for (const auto& [name, value] : v.as_dict().items) {
      if (!name.is(Value::Kind::Str)) continue;
      if (name.as_str() == "step") {
        if (value.is_tensor() && value.as_tensor().numel() == 1) {
          const auto f = value.as_tensor().to_float();
          p.step = f.front();
        } else if (value.is(Value::Kind::Int) || value.is(Value::Kind::Float)) {
          p.step = value.as_float();
        }
      } else if (value.is_tensor()) {
        p.tensors.emplace(name.as_str(), value.as_tensor());
      }
    }
    out.params.push_back(std::move(p));
  }
  std::stable_sort(
      out.params.begin(), out.params.end(),
      [](const OptimizerParamState& a, const OptimizerParamState& b) { return a.index < b.index; });
  for (const auto& g : groups->items()) {
    const Value* params = g.get("params");
    if (!params || !params->is_sequence())
      throw Error(ErrorKind::Corrupt, path, "param_groups", "a group without a 'params' list");
    out.params_in_groups += params->items().size();
    ++out.groups;
  }
  return out;
}

std::string optimizer_files_json(const std::string& dir) {
  using nlohmann::json;
  json out = json::array();
  for (const auto& file : optimizer_files_in(dir)) {
    json j{{"file", file}};
    try {
      const OptimizerFile o = read_optimizer_file((fs::path(dir) / file).string(), file);
      std::set<std::string> keys;
      std::set<double> steps;
      json params = json::array();
      for (const auto& p : o.params) {
        json tensors = json::object();
        for (const auto& [k, t] : p.tensors) {
          keys.insert(k);
          tensors[k] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}};
        }
        if (p.step) keys.insert("step"), steps.insert(*p.step);
        params.push_back({{"param", p.name.empty() ? json(p.index) : json(p.name)},
                          {"step", p.step ? json(*p.step) : json(nullptr)},
                          {"tensors", tensors}});
      }
      j["param_groups"] = o.groups;
      j["params_in_groups"] = o.params_in_groups;
      j["params_with_state"] = o.params.size();
      j["keys"] = keys;
      j["steps"] = steps;
      j["params"] = params;
    } catch (const Error& e) {
      j["error"] = e.what();
    }
    out.push_back(std::move(j));
  }
  return out.dump();
}

}  // namespace ckptdoc::weights
