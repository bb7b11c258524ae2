// The export of one DCP folder as a registry source runs it (sources/dcp, accelerate, megatron): the
// request's options mapped onto dcp::export_weights and its result told in text or JSON, with what the source
// adds.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/sources/source.h"

namespace ckptdoc::sources {

struct DcpExportContext {
  std::string
      from;  // the folder read, when not the path the user named ("pytorch_model_fsdp_0/", iter_0000002)
  std::string left_out = "optimizer/scheduler/train-state tensors";  // what the left-out tensors are
  std::string note;                                  // a line of the source's own (text form only)
  nlohmann::json fields = nlohmann::json::object();  // the source's own fields (JSON form only)
};

// `ckpt`'s weights, never into request.path (the folder the user named may hold more than `ckpt`'s folder).
ExportOutcome export_dcp_weights(const dcp::Checkpoint& ckpt, const ExportRequest& request,
                                 const DcpExportContext& context = {});

// `ckpt`'s weights as export_dcp_weights writes them, unread, described as `what` plus "(weights)".
WeightTensors dcp_weight_tensors(std::shared_ptr<const dcp::Checkpoint> ckpt, const std::string& what);

// `ckpt`'s Adam moment `moment` per param (dcp::select_moments), unread, described as `what` plus
// "(<moment>)".
WeightTensors dcp_moment_tensors(std::shared_ptr<const dcp::Checkpoint> ckpt, const std::string& what,
                                 const std::string& moment);

}  // namespace ckptdoc::sources
