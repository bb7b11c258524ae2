#include "ckptdoc/weights/weights_json.h"

#include <nlohmann/json.hpp>

namespace ckptdoc::weights {

std::string weights_to_json(const WeightsSource& s, int indent) {
  using nlohmann::json;
  json j;
  j["kind"] = s.kind() == SourceKind::HfFolder ? "hf-folder" : "weights-file";
  j["path"] = s.path();
  j["root"] = s.root();
  j["dtype"] = std::string(dtype_name(s.main_dtype()));
  if (s.index()) {
    json idx{{"path", s.index()->path}, {"tensors", s.index()->weight_map.size()}};
    idx["total_size"] = s.index()->total_size ? json(*s.index()->total_size) : json(nullptr);
    if (s.index()->total_parameters) idx["total_parameters"] = *s.index()->total_parameters;
    j["index"] = idx;
  } else {
    j["index"] = nullptr;
  }
  json files = json::array();
  for (const auto& f : s.files())
    files.push_back({{"path", f.path},
                     {"format", f.format},
                     {"bytes", f.bytes},
                     {"readable", f.readable},
                     {"tensors", f.tensors.size()},
                     {"stored_bytes", f.stored_bytes}});
  j["files"] = files;
  json tensors = json::array();
  uint64_t numel = 0, bytes = 0;
  for (size_t i = 0; i < s.tensors().size(); ++i) {
    const auto& t = s.tensors()[i];
    tensors.push_back({{"name", t.name},
                       {"dtype", std::string(dtype_name(t.tensor.dtype))},
                       {"shape", t.tensor.shape},
                       {"file", s.file_of(i)}});
    numel += static_cast<uint64_t>(t.tensor.numel());
    bytes += t.tensor.nbytes();
  }
  j["tensors"] = tensors;
  j["numel"] = numel;
  j["bytes"] = bytes;
  json config = json::object();
  for (const auto& [k, v] : s.config_sizes()) config[k] = v;
  j["config"] = config;
  json problems = json::array();
  for (const auto& p : s.problems())
    problems.push_back({{"code", p.code},
                        {"severity", std::string(model::severity_name(p.severity))},
                        {"message", p.message},
                        {"file", p.file},
                        {"tensors", p.params}});
  j["problems"] = problems;
  return j.dump(indent);
}

}  // namespace ckptdoc::weights
