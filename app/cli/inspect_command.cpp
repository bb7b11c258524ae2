// `ckptdoc inspect PATH`: a DeepSpeed checkpoint's catalog as text or JSON. Reads pickles and zip
// directories only.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/deepspeed/catalog_json.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/inspect_text.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"
#include "ckptdoc/sources/registry.h"
#include "ckptdoc/weights/optimizer_file.h"
#include "ckptdoc/weights/weights_json.h"
#include "commands.h"
#include "format_helpers.h"
#include "keep_until_exit.h"

namespace ckptdoc::cli {
namespace {

using namespace ckptdoc::deepspeed;

// A Hugging Face folder or weights file: index, files, tensors, problems.
// Accelerate's save_state and a plain Trainer's checkpoint keep the optimizer beside the weights
// (optimizer.bin, optimizer.pt): its params, steps and keys.
void print_optimizer_files(const std::string& dir) {
  for (const auto& f : nlohmann::json::parse(weights::optimizer_files_json(dir))) {
    const std::string file = f["file"].get<std::string>();
    if (f.contains("error")) {
      std::printf("\nOptimizer state %s\n  UNREADABLE: %s\n", file.c_str(),
                  f["error"].get<std::string>().c_str());
      continue;
    }
    std::string keys, steps;
    for (const auto& k : f["keys"]) keys += (keys.empty() ? "" : ", ") + k.get<std::string>();
    for (const auto& s : f["steps"]) steps += (steps.empty() ? "" : ", ") + std::to_string(s.get<int64_t>());
    std::printf("\nOptimizer state %s (torch.save of an optimizer state dict; params %s)\n", file.c_str(),
                !f["params"].empty() && f["params"][0]["param"].is_string() ? "by name"
                                                                            : "by index, group after group");
    std::printf("  param groups     %zu, %zu params, %zu with state\n", f["param_groups"].get<size_t>(),
                f["params_in_groups"].get<size_t>(), f["params_with_state"].get<size_t>());
    std::printf("  step             %s\n", steps.empty() ? "(none)" : steps.c_str());
    std::printf("  keys             %s\n", keys.empty() ? "(none)" : keys.c_str());
    for (const auto& p : f["params"]) {
      std::string tensors;
      for (const auto& [k, t] : p["tensors"].items())
        tensors += (tensors.empty() ? "" : "  ") + k + " " + t["dtype"].get<std::string>() + " " +
                   shape_text(t["shape"].get<std::vector<int64_t>>());
      const auto& param = p["param"];
      const std::string label =
          "state[" + (param.is_string() ? param.get<std::string>() : std::to_string(param.get<int64_t>())) +
          "]";
      std::printf("  %-28s %s\n", label.c_str(), tensors.c_str());
    }
  }
}

void print_weights(const weights::WeightsSource& w, const char* title) {
  std::printf("%s %s\n", title, w.path().c_str());
  uint64_t numel = 0, bytes = 0;
  for (const auto& t : w.tensors()) {
    numel += static_cast<uint64_t>(t.tensor.numel());
    bytes += t.tensor.nbytes();
  }
  std::printf("  tensors          %zu (%s elements, %s), mostly %s\n", w.tensors().size(),
              grouped(static_cast<int64_t>(numel)).c_str(), human_bytes(bytes).c_str(),
              std::string(dtype_name(w.main_dtype())).c_str());
  if (w.index()) {
    std::printf("  index            %s: %zu tensors, total_size %s\n", w.index()->path.c_str(),
                w.index()->weight_map.size(),
                w.index()->total_size ? std::to_string(*w.index()->total_size).c_str() : "(none)");
  }
  std::string config;
  for (const auto& [k, v] : w.config_sizes())
    config += (config.empty() ? "" : ", ") + k + " " + std::to_string(v);
  if (!config.empty()) std::printf("  config.json      %s\n", config.c_str());
  std::printf("\nFiles\n");
  for (const auto& f : w.files())
    std::printf("  %-50s %-11s %5zu tensors %s%s\n", f.path.c_str(),
                f.format.empty() ? "?" : f.format.c_str(), f.tensors.size(), human_bytes(f.bytes).c_str(),
                f.readable ? "" : "  UNREADABLE");
  std::printf("\nTensors\n");
  for (size_t i = 0; i < w.tensors().size(); ++i) {
    const auto& t = w.tensors()[i];
    std::printf("  %-50s %-9s %-20s %s\n", t.name.c_str(), std::string(dtype_name(t.tensor.dtype)).c_str(),
                shape_text(t.tensor.shape).c_str(), w.file_of(i).c_str());
  }
  if (w.is_folder()) print_optimizer_files(w.root());
  std::printf("\nProblems\n");
  if (w.problems().empty()) std::printf("  none\n");
  for (const auto& p : w.problems())
    std::printf("  %-7s %-22s %s\n", std::string(model::severity_name(p.severity)).c_str(), p.code.c_str(),
                p.message.c_str());
}

}  // namespace

int run_inspect(const InspectOptions& o) {
  if (const auto source = sources::find_source(o.path); !source->reads_into_catalog())
    return run_source_inspect(*source, o);
  OpenOptions options;
  options.tag = o.tag;
  const auto ckpt = Checkpoint::open(o.path, options);
  keep_until_exit(ckpt);  // freed by the exit, not value by value
  const auto& weights = ckpt->weights();
  if (o.json) {
    if (ckpt->weights_only() && weights) {
      auto j = nlohmann::json::parse(weights::weights_to_json(*weights));
      if (weights->is_folder())
        if (auto o = nlohmann::json::parse(weights::optimizer_files_json(weights->root())); !o.empty())
          j["optimizer_files"] = std::move(o);
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    auto j = nlohmann::json::parse(checkpoint_to_json(*ckpt));
    if (weights) j["trainer_weights"] = nlohmann::json::parse(weights::weights_to_json(*weights));
    std::printf("%s\n", j.dump(2).c_str());
  } else if (ckpt->weights_only() && weights) {
    print_weights(*weights, ckpt->catalog().single_file ? "Weights file" : "Hugging Face model folder");
  } else {
    std::fputs(inspect_text(*ckpt, o.layout).c_str(), stdout);
    if (weights) {
      std::printf("\n");
      print_weights(*weights, "Model weights beside the checkpoint (Trainer checkpoint folder):");
    }
    if (const auto* snap = ckpt->snapshot()) {  // a live-engine snapshot (ckptdoc_hook)
      const auto& m = snap->manifest();
      std::printf(
          "\nLive-engine snapshot (ckptdoc_hook): %d rank files, %s gradients recorded; DeepSpeed %s, torch "
          "%s\n",
          m.world_size, m.live.has_grads ? "with" : "no", m.ds_version.c_str(), m.torch_version.c_str());
    }
  }
  return 0;
}

}  // namespace ckptdoc::cli
