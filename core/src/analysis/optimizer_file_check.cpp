// The checks of an optimizer file kept beside weights (see analysis/optimizer_file_check.h).
#include "analysis/optimizer_file_check.h"

#include <algorithm>
#include <map>
#include <set>

#include "analysis/weights_diagnose.h"
#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/short_list.h"

namespace ckptdoc::analysis {

using weights::OptimizerFile;
using weights::OptimizerFileSummary;
using weights::OptimizerParamState;

namespace {

std::string step_text(double step) {
  return step == static_cast<double>(static_cast<int64_t>(step)) ? std::to_string(static_cast<int64_t>(step))
                                                                 : std::to_string(step);
}

bool is_float(DType d) {
  return d == DType::F16 || d == DType::BF16 || d == DType::F32 || d == DType::F64;
}

// "state[3].exp_avg": how a finding names one state tensor (an index is all a plain save names params by).
std::string state_name(const OptimizerParamState& p, const std::string& key) {
  return p.label() + "." + key;
}

std::string strip_module(std::string n) {
  while (n.rfind("module.", 0) == 0) n = n.substr(7);
  return n;
}

}  // namespace

OptimizerFileSummary check_optimizer_file(const OptimizerFile& opt, const std::vector<NamedTensor>& weights,
                                          const DiagnoseOptions& options, Progress* progress,
                                          std::vector<model::Finding>& findings) {
  OptimizerFileSummary s;
  s.file = opt.file;
  s.read = true;
  s.params_in_groups = opt.params_in_groups;
  s.params_with_state = opt.params.size();
  std::set<std::string> keys, dtypes;
  for (const auto& p : opt.params) {
    if (p.step) keys.insert("step");
    for (const auto& [k, t] : p.tensors) keys.insert(k), dtypes.insert(std::string(dtype_name(t.dtype)));
  }
  s.keys.assign(keys.begin(), keys.end());
  s.dtypes.assign(dtypes.begin(), dtypes.end());
  auto add = [&](model::Code code, std::string message, std::vector<std::string> params) {
    model::Finding f(code, opt.file + ": " + std::move(message), opt.file);
    f.params = std::move(params);
    findings.push_back(std::move(f));
  };

  if (opt.params.empty()) {
    add(model::Code::OptimizerStateEmpty,
        "the optimizer holds no per-param state (it never stepped): resuming starts Adam's moments from zero",
        {});
    return s;
  }

  // Every state holds the keys the others hold: one without exp_avg_sq (or its step) lost it.
  std::vector<std::string> incomplete;
  for (const auto& p : opt.params)
    for (const auto& k : keys)
      if (k == "step" ? !p.step : !p.tensors.count(k)) incomplete.push_back(state_name(p, k));
  if (!incomplete.empty())
    add(model::Code::OptimizerStateIncomplete,
        std::to_string(incomplete.size()) +
            " state entries that the other params hold are missing: " + short_list(incomplete) +
            ". torch's load_state_dict takes the state as it is, and the optimizer then fails " +
            "or restarts those moments; reset the optimizer or resume from an earlier save",
        incomplete);

  // One step for all: torch's Adam steps every param that has a gradient together.
  std::map<double, std::vector<std::string>> by_step;
  for (const auto& p : opt.params)
    if (p.step) by_step[*p.step].push_back(p.label());
  if (by_step.size() == 1) s.step = by_step.begin()->first;
  if (by_step.size() > 1) {
    std::string counts;
    for (const auto& [step, names] : by_step)
      counts += (counts.empty() ? "" : ", ") + std::to_string(names.size()) + " at step " + step_text(step) +
                " (" + short_list(names, 3) + ")";
    add(model::Code::OptimizerStepInconsistent,
        "the params' Adam steps differ: " + counts +
            ". Params trained together share one step; the state was pieced together from several saves",
        {});
  }

  // Values: NaN/Inf in any state tensor; zero or negative moments where the step says they cannot be.
  struct Item {
    const OptimizerParamState* param;
    std::string key;
    const Tensor* tensor;
  };
  std::vector<Item> items;
  for (const auto& p : opt.params)
    for (const auto& [k, t] : p.tensors) items.push_back({&p, k, &t});
  // The weights' value pass (chunked over the workers, with progress and cancel): an optimizer file holds
  // twice the weights' bytes. Its own findings are not taken: the ones below name optimizer state.
  std::vector<TensorToScan> to_scan;
  to_scan.reserve(items.size());
  for (const auto& item : items)
    to_scan.push_back({state_name(*item.param, item.key), *item.tensor, opt.file});
  const Report scanned = diagnose_tensors(to_scan, options, progress);
  std::vector<ValueStats> stats(items.size());
  for (size_t i = 0; i < items.size(); ++i) stats[i] = scanned.params[i].lp.value_or(ValueStats{});
  std::vector<std::string> nonfinite, lost, negative, nonfinite_names;
  uint64_t nonfinite_count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& st = stats[i];
    if (is_float(items[i].tensor->dtype)) ++s.tensors_scanned;
    const std::string name = state_name(*items[i].param, items[i].key);
    if (const uint64_t bad = st.count - st.finite_count()) {
      nonfinite.push_back(name + " (" + std::to_string(bad) + ")");
      nonfinite_names.push_back(name);
      nonfinite_count += bad;
    }
    const bool moment = items[i].key == "exp_avg" || items[i].key == "exp_avg_sq";
    const auto step = items[i].param->step;
    if (moment && step && *step >= 2 && st.count > 0 && st.zeros == st.count) lost.push_back(name);
    if (items[i].key == "exp_avg_sq" && st.negatives > 0) negative.push_back(name);
  }
  if (!nonfinite.empty())
    add(model::Code::NonfiniteValues,
        std::to_string(nonfinite_count) + " NaN/Inf values in " + std::to_string(nonfinite.size()) +
            " optimizer state tensors: " + short_list(nonfinite) +
            ". The next step would write NaN into those params; reset the optimizer or resume from an "
            "earlier save",
        nonfinite_names);
  if (!lost.empty())
    add(model::Code::OptimizerStepInconsistent,
        std::to_string(lost.size()) + " Adam moments are all zeros at step >= 2: " + short_list(lost) +
            ". Moments are never exactly zero after two steps: they were lost while the step was kept, and "
            "the "
            "next update is far larger than lr intends",
        lost);
  if (!negative.empty())
    add(model::Code::OptimizerStepInconsistent,
        "negative values in exp_avg_sq, a running mean of squares: " + short_list(negative) +
            " (the bytes are damaged; sqrt of them is NaN)",
        negative);

  // Shapes: each param's moments agree, and the weights hold a tensor of that shape for each state.
  std::vector<std::string> disagree;
  std::vector<std::pair<const OptimizerParamState*, std::vector<int64_t>>>
      state_shapes;  // param index, its moments' shape
  for (const auto& p : opt.params) {
    const Tensor* first = nullptr;
    for (const char* k : {"exp_avg", "exp_avg_sq", "momentum_buffer"}) {
      const auto it = p.tensors.find(k);
      if (it == p.tensors.end()) continue;
      if (first && first->shape != it->second.shape)
        disagree.push_back(state_name(p, k) + " " + shape_text(it->second.shape) + " vs " +
                           shape_text(first->shape));
      if (!first) first = &it->second;
    }
    if (first) state_shapes.emplace_back(&p, first->shape);
  }
  if (!disagree.empty())
    add(model::Code::OptimizerStateShapeMismatch,
        "one param's moments have different shapes: " + short_list(disagree) + ": the state was damaged", {});
  if (weights.empty()) return s;
  s.weights_compared = weights.size();
  s.by_name =
      std::any_of(opt.params.begin(), opt.params.end(), [](const auto& p) { return !p.name.empty(); });
  std::vector<std::string> unmatched;
  if (s.by_name) {
    // FQN keys (FSDP FULL_STATE_DICT): each state against the weight of its own name.
    std::map<std::string, const Tensor*> by_name;
    for (const auto& w : weights) by_name.emplace(strip_module(w.name), &w.tensor);
    std::vector<std::string> unknown;
    for (const auto& [param, shape] : state_shapes) {
      const auto it = by_name.find(strip_module(param->name));
      if (it == by_name.end())
        unknown.push_back(param->name);
      else if (it->second->shape != shape)
        unmatched.push_back(param->label() + " " + shape_text(shape) + " vs the weight's " +
                            shape_text(it->second->shape));
      else
        ++s.names_matched;
    }
    if (!unknown.empty())
      add(model::Code::AccelerateOptimizerParamUnknown,
          std::to_string(unknown.size()) +
              " params' optimizer state names a param the weights do not hold: " + short_list(unknown) +
              ". The optimizer was saved for another model",
          unknown);
    if (!unmatched.empty())
      add(model::Code::OptimizerStateShapeMismatch,
          std::to_string(unmatched.size()) +
              " params' moments do not have their weight's shape: " + short_list(unmatched) +
              ". The optimizer was saved for another model (or the weights were replaced)",
          {});
    return s;
  }
  // Indices (a plain save): by shape, each weight taken once.
  std::multiset<std::vector<int64_t>> available;
  for (const auto& w : weights) available.insert(w.tensor.shape);
  for (const auto& [param, shape] : state_shapes) {
    const auto it = available.find(shape);
    if (it == available.end()) {
      unmatched.push_back(param->label() + " " + shape_text(shape));
      continue;
    }
    available.erase(it);
    ++s.shapes_matched;
  }
  if (!unmatched.empty())
    add(model::Code::OptimizerStateShapeMismatch,
        std::to_string(unmatched.size()) + " of " + std::to_string(state_shapes.size()) +
            " params' moments have a shape no weight beside them has (each weight taken once): " +
            short_list(unmatched) +
            ". The optimizer was saved for another model (or the weights were replaced); loading it fails or "
            "mixes moments between params",
        {});
  return s;
}

}  // namespace ckptdoc::analysis
