// repair --reset-optimizer of DCP and Accelerate folders, --drop-optimizer of DCP folders (see repair_dcp.h).
#include "sources/dcp/repair_dcp.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "ckptdoc/error.h"
#include "ckptdoc/request_field.h"
#include "io/copy_tree.h"
#include "sources/dcp/drop_optimizer.h"
#include "sources/dcp/reset_optimizer.h"
#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::sources {
namespace fs = std::filesystem;

namespace {

// --drop-optimizer of a DCP folder (drop_optimizer.h).
Outcome drop_dcp_optimizer(const RepairRequest& request) {
  const std::string out = dcp::checked_new_output(request.output, {request.path});
  dcp::DropCounts n;
  dcp::write_new_folder(
      out,
      [&](const std::string& partial) {
        n = dcp::drop_optimizer(*dcp::Checkpoint::open(request.path), partial, request.progress);
      },
      request.progress);
  if (request.json) {
    const nlohmann::json j = {{"output", out},
                              {"action", "drop-optimizer"},
                              {"keys_dropped", n.keys},
                              {"items_dropped", n.items},
                              {"keys_kept", n.kept_keys},
                              {"storage_bytes_before", n.bytes_before},
                              {"storage_bytes_after", n.bytes_after},
                              {"verified", true}};
    return {j.dump(2) + "\n", 0};
  }
  return {
      "Dropped the optimizer: " + std::to_string(n.keys) + " optimizer.* keys (" + std::to_string(n.items) +
          " storage items) left out of a new .metadata and new storage files; " +
          std::to_string(n.kept_keys) + " keys kept, their items' bytes the input's (storage " +
          std::to_string(n.bytes_before) + " -> " + std::to_string(n.bytes_after) + " bytes).\nWrote " + out +
          "\nVerified: the copy holds the input's keys but the optimizer's, each kept item byte for byte. "
          "Load it with a fresh optimizer (dcp.load of the model's state dict).\n",
      0};
}

}  // namespace

std::string dcp_refresh_refusal(const std::string& what) {
  return what +
         " holds no fp32 master copy of its weights: its torch optimizer steps the saved params themselves "
         "(its state is Adam's moments and step), so there is nothing for {refresh_fp32} to rewrite";
}

Outcome repair_dcp_optimizer(const RepairRequest& request, const std::string& root,
                             const std::vector<std::string>& parts, const std::string& what) {
  const auto& others = request.other_actions;
  const bool drop = request.drop_optimizer;
  const bool plain_dcp = parts.size() == 1 && parts.front() == ".";
  if (drop && plain_dcp && !request.reset_optimizer && !request.refresh_fp32 && others.empty())
    return drop_dcp_optimizer(request);
  if (!request.reset_optimizer || request.refresh_fp32 || drop || !others.empty()) {
    std::string asked = request.refresh_fp32 ? request_text("{refresh_fp32}") : "";
    if (drop) asked += (asked.empty() ? "" : ", ") + request_text("{drop_optimizer}");
    for (const auto& a : others) asked += (asked.empty() ? "" : ", ") + a;
    throw Error(
        ErrorKind::Unsupported, request.path, asked.empty() ? "repair" : asked,
        request_text(
            what + " is repaired with {reset_optimizer} alone (its Adam moments zeroed and steps set to 0)" +
            (plain_dcp ? " or {drop_optimizer} alone (its optimizer.* keys left out)" : "")));
  }
  std::vector<std::string> inputs{request.path, root};
  const std::string out = dcp::checked_new_output(request.output, inputs);
  std::vector<std::pair<std::string, dcp::ResetCounts>> done;
  dcp::write_new_folder(
      out,
      [&](const std::string& partial) {
        io::copy_tree(root, partial, request.progress);  // links are followed: the copy holds only files
        for (const auto& part : parts) {
          const auto in = dcp::Checkpoint::open((fs::path(root) / part).lexically_normal().string());
          done.emplace_back(part,
                            dcp::reset_adam_state(*in, (fs::path(partial) / part).lexically_normal().string(),
                                                  request.progress));
        }
      },
      request.progress);
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
