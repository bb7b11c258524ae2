// repair --reset-optimizer of DCP and Accelerate folders (see repair_dcp.h).
#include "sources/dcp/repair_dcp.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ckptdoc/error.h"
#include "sources/dcp/reset_optimizer.h"
#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::sources {
namespace fs = std::filesystem;

Outcome repair_dcp_optimizer(const RepairRequest& request, const std::string& root,
                             const std::vector<std::string>& parts, const std::string& what) {
  const auto& others = request.other_actions;
  if (std::find(others.begin(), others.end(), "--drop-optimizer") != others.end())
    throw Error(
        ErrorKind::Unsupported, request.path, "--drop-optimizer",
        "not available for " + what +
            ": dropping the optimizer means writing a new .metadata without its items, a pickle of "
            "torch's own classes, and ckptdoc writes no such pickle. torch loads the weights alone from "
            "this folder as it is (dcp.load of the model's state dict reads only the keys asked for): "
            "load it that way with a fresh optimizer, or repair with --reset-optimizer, which keeps the "
            "optimizer's items and resets them to a fresh Adam's state");
  if (!request.reset_optimizer || request.refresh_fp32 || !others.empty()) {
    std::string asked = request.refresh_fp32 ? "--refresh-fp32" : "";
    for (const auto& a : others) asked += (asked.empty() ? "" : ", ") + a;
    throw Error(
        ErrorKind::Unsupported, request.path, asked.empty() ? "repair" : asked,
        what + " is repaired with --reset-optimizer alone (its Adam moments zeroed and steps set to 0)");
  }
  std::vector<std::string> inputs{request.path, root};
  const std::string out = dcp::checked_new_output(request.output, inputs);
  std::vector<std::pair<std::string, dcp::ResetCounts>> done;
  dcp::write_new_folder(out, [&](const std::string& partial) {
    fs::copy(root, partial, fs::copy_options::recursive);  // links are followed: the copy holds only files
    for (const auto& part : parts) {
      const auto in = dcp::Checkpoint::open((fs::path(root) / part).lexically_normal().string());
      done.emplace_back(part,
                        dcp::reset_adam_state(*in, (fs::path(partial) / part).lexically_normal().string()));
    }
  });
  dcp::ResetCounts all;
  nlohmann::json jparts = nlohmann::json::array();
  for (const auto& [part, n] : done) {
    all.params += n.params;
    all.tensors += n.tensors;
    all.records += n.records;
    jparts.push_back(
        {{"folder", part}, {"params", n.params}, {"tensors", n.tensors}, {"records", n.records}});
  }
  if (request.json) {
    const nlohmann::json j = {{"output", out},        {"action", "reset-optimizer"}, {"parts", jparts},
                              {"params", all.params}, {"tensors", all.tensors},      {"records", all.records},
                              {"verified", true}};
    return {j.dump(2) + "\n", 0};
  }
  return {"Reset the Adam state of " + std::to_string(all.params) + " params (" +
              std::to_string(all.tensors) + " moment and step tensors, " + std::to_string(all.records) +
              " storage records rewritten in a copy, every other byte the input's).\nWrote " + out +
              "\nVerified: every moment and step in the copy reads as zero; torch's Adam resumes from it as "
              "a fresh optimizer (its first step is step 1). The learning-rate schedule and param groups are "
              "the input's.\n",
          0};
}

}  // namespace ckptdoc::sources
