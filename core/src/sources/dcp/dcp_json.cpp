// JSON forms of a DCP checkpoint's metadata (inspect --json) and of its diagnosis (diagnose --json).
#include <cmath>
#include <nlohmann/json.hpp>

#include "ckptdoc/sources/dcp/diagnose.h"

namespace ckptdoc::dcp {
namespace {

using nlohmann::json;

json item_json(const StorageItem& item) {
  return {{"file", item.file}, {"offset", item.offset}, {"length", item.length}};
}

json keys_json(const Metadata& md) {
  json keys = json::array();
  for (const auto& e : md.entries) {
    json k = {{"key", e.key}, {"kind", e.kind == EntryKind::Tensor ? "tensor" : "bytes"}};
    if (e.kind == EntryKind::Tensor) {
      k["dtype"] = e.dtype;
      k["size"] = e.size;
      if (!e.nd_flattened_from.empty())
        k["nd_flattened_from"] = e.nd_flattened_from;  // megatron-core <= 0.15
      json chunks = json::array();
      for (const auto& c : e.chunks) {
        json cj = {{"offsets", c.offsets}, {"sizes", c.sizes}};
        cj["item"] = c.item ? item_json(*c.item) : json(nullptr);
        chunks.push_back(std::move(cj));
      }
      k["chunks"] = std::move(chunks);
    } else {
      k["item"] = e.bytes_item ? item_json(*e.bytes_item) : json(nullptr);
    }
    keys.push_back(std::move(k));
  }
  return keys;
}

}  // namespace

std::string metadata_json(const Checkpoint& ckpt) {
  const Metadata& md = ckpt.metadata();
  json j = {{"format", "pytorch-dcp"},      {"path", ckpt.dir()},
            {"version", md.version},        {"files", ckpt.storage_files()},
            {"keys", keys_json(md)},        {"unreferenced_items", md.unreferenced_items},
            {"merged_from", md.merged_from}};
  return j.dump(1);
}

std::string report_json(const Checkpoint& ckpt, const Report& report) {
  json problems = json::array();
  for (const auto& p : report.problems) {
    problems.push_back({{"code", p.code},
                        {"severity", std::string(model::severity_name(p.severity))},
                        {"message", p.message},
                        {"file", p.file},
                        {"key", p.key}});
    if (!p.params.empty()) problems.back()["params"] = p.params;  // the params a source named (Megatron)
  }
  json tensors = json::array();
  for (const auto& t : report.tensors)
    tensors.push_back({{"key", t.key},
                       {"numel", t.numel},
                       {"elements_read", t.elements_read},
                       {"nan", t.nan},
                       {"inf", t.inf},
                       {"zeros", t.zeros},
                       {"negative", t.negative},
                       {"sum", std::isfinite(t.sum) ? json(t.sum) : json(nullptr)}});
  json steps = json::object();
  for (const auto& [param, step] : report.adam_steps) steps[param] = step;
  json j = {
      {"format", "pytorch-dcp"},
      {"path", ckpt.dir()},
      {"verdict", {{"clean", report.clean}, {"text", report.verdict}, {"not_checked", report.not_checked}}},
      {"problems", std::move(problems)},
      {"tensors", std::move(tensors)},
      {"files_read", report.files_read},
      {"elements_read", report.elements_read},
      {"adam_steps", std::move(steps)}};
  return j.dump(1);
}

}  // namespace ckptdoc::dcp
