// Adam's moments judged per param against the param's own step: torch's Adam keeps one step per param, so a
// param's moments and step must have grown together. The thresholds are DeepSpeed's (analysis/rules.cpp):
// step <= 1 with zero moments is a fresh optimizer, because torch's get_state_dict of an optimizer that never
// stepped runs one zero-gradient step (_init_optim_state, torch/distributed/checkpoint/state_dict.py) and
// saves step 1 with zero moments.
#include <cmath>
#include <cstdio>

#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/dcp/diagnose.h"

namespace ckptdoc::dcp {
namespace {

// Adam's first update of a param whose moments are zero, relative to lr, at step `step` + 1 with torch's
// default betas (0.9, 0.999): m̂/sqrt(v̂) for one gradient; a fresh start (step 0) gives exactly 1.
double first_update_factor(double step) {
  const double beta1 = 0.9, beta2 = 0.999, t = step + 1;
  return ((1 - beta1) / (1 - std::pow(beta1, t))) / std::sqrt((1 - beta2) / (1 - std::pow(beta2, t)));
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", v);
  return buf;
}

}  // namespace

std::string optimizer_state_param(const std::string& key, const std::string& field) {
  const std::string suffix = "." + field;
  if (key.size() <= suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0)
    return {};
  for (const std::string prefix : {"optimizer.state.", "state."})
    if (key.rfind(prefix, 0) == 0 && key.size() > prefix.size() + suffix.size())
      return key.substr(prefix.size(), key.size() - prefix.size() - suffix.size());
  return {};
}

std::vector<Problem> adam_moment_problems(const std::vector<TensorSummary>& tensors,
                                          const std::map<std::string, double>& adam_steps, size_t& judged) {
  struct Moments {
    const TensorSummary *exp_avg = nullptr, *exp_avg_sq = nullptr;
  };
  std::map<std::string, Moments> params;
  for (const auto& t : tensors) {
    if (t.elements_read != t.numel || t.numel == 0) continue;  // a moment not read whole is not judged
    if (auto p = optimizer_state_param(t.key, "exp_avg"); !p.empty()) params[p].exp_avg = &t;
    if (auto p = optimizer_state_param(t.key, "exp_avg_sq"); !p.empty()) params[p].exp_avg_sq = &t;
  }
  std::vector<Problem> out;
  judged = 0;
  for (const auto& [param, m] : params) {
    const auto step = adam_steps.find(param);
    if (!m.exp_avg || !m.exp_avg_sq || step == adam_steps.end()) continue;
    ++judged;
    const TensorSummary& sq = *m.exp_avg_sq;
    const std::string steps = std::to_string(static_cast<long long>(step->second));
    if (sq.negative > 0)
      out.push_back(problem(
          model::Code::DcpMomentsNegative,
          "'" + param + "': exp_avg_sq holds " + std::to_string(sq.negative) + " negative of " +
              std::to_string(sq.numel) +
              " values, impossible for Adam's running mean of squared gradients (the state was damaged or "
              "written by something else); the next step takes its square root and can write NaN into the "
              "weights. Restart the optimizer state (`ckptdoc repair PATH -o NEW --reset-optimizer`), or "
              "resume "
              "from an earlier checkpoint",
          "", sq.key));
    // An exp_avg_sq that is all zero after 2 or more steps never saw a non-zero gradient, or was lost.
    if (step->second >= 2 && sq.zeros == sq.numel) {
      const bool both = m.exp_avg->zeros == m.exp_avg->numel;
      std::string message = "'" + param + "': ";
      message += both ? "Adam's moments (exp_avg and exp_avg_sq) are" : "exp_avg_sq is";
      message += " all zero although the param's step is " + steps +
                 " (a fresh optimizer saves step 1): the moments were lost while the step was kept (or the "
                 "param's gradient was exactly zero at every step). Adam's bias correction assumes moments "
                 "accumulated since step 1, so the next update is about ";
      message += number(first_update_factor(step->second));
      message +=
          "x the learning rate per element with the default betas, where a fresh start moves by 1x. Restart "
          "the optimizer state so step and moments start together (`ckptdoc repair PATH -o NEW "
          "--reset-optimizer`), or resume from an earlier checkpoint";
      out.push_back(problem(model::Code::DcpMomentsLost, std::move(message), "", sq.key));
    }
  }
  return out;
}

}  // namespace ckptdoc::dcp
