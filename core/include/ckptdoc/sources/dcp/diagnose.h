#pragma once
// Diagnosis of a PyTorch Distributed Checkpoint: is every tensor whole (its chunks tile the global shape), is
// every storage item there and what the metadata says, are the values finite, do the Adam steps agree. Reads
// every chunk once; the verdict says what it rests on and what was not checked.
//
// Problem codes (stable): "unsafe-pickle" (an item's pickle would run code in torch.load), "dcp-chunk-gap",
// "dcp-chunk-overlap", "dcp-chunk-outside" (a chunk's box leaves the global shape), "dcp-item-missing" (a
// chunk or bytes key with no storage item), "dcp-item-unreferenced" (a storage item no key names),
// "dcp-file-missing", "dcp-file-truncated", "dcp-item-unreadable", "dcp-item-crc-mismatch" (a record of an
// item's torch.save zip fails its CRC-32), "dcp-item-mismatch" (the stored tensor's dtype or shape is not the
// metadata's), "dcp-non-finite" (NaN/Inf values), "dcp-adam-step-mismatch"
// (optimizer steps differ per param), "dcp-moments-lost" (a param's Adam moments all zero, or its exp_avg_sq
// alone, at step >= 2), "dcp-moments-negative" (negative values in exp_avg_sq), "dcp-replica-mismatch" (a
// per-rank save whose ranks' copies of one item differ).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/model/finding.h"
#include "ckptdoc/sources/dcp/checkpoint.h"

namespace ckptdoc::dcp {

// A problem of the DCP diagnosis: the one finding type (`file` and `key` name what is at fault).
using Problem = model::Finding;
// A problem of `code` naming `file` and `key`, with the code table's severity and repair.
Problem problem(model::Code code, std::string message, std::string file = {}, std::string key = {});
// The same with another severity: a site that reports one says why.
Problem problem(model::Code code, model::Severity severity, std::string message, std::string file = {},
                std::string key = {});

struct TensorSummary {
  std::string key;
  int64_t numel = 0;
  int64_t elements_read = 0;  // numel when every chunk was read
  int64_t nan = 0, inf = 0;
  int64_t zeros = 0, negative = 0;  // of the elements read
  double sum = 0;                   // of the elements read, in double
};

struct Report {
  std::vector<Problem> problems;        // errors first
  std::vector<TensorSummary> tensors;   // in metadata order
  std::vector<std::string> files_read;  // storage files at least one item was read from
  int64_t elements_read = 0;
  size_t bytes_items = 0, bytes_items_read = 0;
  std::map<std::string, double> adam_steps;  // param fqn -> optimizer.state.<fqn>.step (0-d tensors read)
  size_t adam_moments_judged = 0;            // params whose exp_avg and exp_avg_sq were read whole
  bool clean = false;
  std::string verdict;                   // the sentence a front end leads with
  std::vector<std::string> not_checked;  // what the verdict does not cover
  bool has_error() const;
};

// Chunks of one tensor entry against its global shape: dcp-chunk-outside, -overlap, -gap problems.
std::vector<Problem> tiling_problems(const Entry& entry);

// The param of an optimizer state key: `<fqn>` of `optimizer.state.<fqn>.<field>` (torchtitan, FSDP2's
// flattened optimizer) or `state.<fqn>.<field>`; empty when `key` is neither.
std::string optimizer_state_param(const std::string& key, const std::string& field);

// Where the params of optimizer.state.<param>.exp_avg and the weight keys do not meet (moment_coverage.cpp):
// the verdict's not_checked line saying so, naming the first of each; nullopt when every weight has state
// under its name and every param is a weight, or the folder holds no weights or no moments.
std::optional<std::string> moment_coverage_gap(const Metadata& md);

// Adam's moments per param (the `exp_avg` / `exp_avg_sq` summaries of `tensors`, read whole) against the
// param's own step (`adam_steps`): dcp-moments-lost and dcp-moments-negative problems. Counts the params
// judged in `judged`.
std::vector<Problem> adam_moment_problems(const std::vector<TensorSummary>& tensors,
                                          const std::map<std::string, double>& adam_steps, size_t& judged);

// Everything above, reading every item once (in place, through the storage files' maps).
Report diagnose(const Checkpoint& ckpt);

// `diagnose --json`: {"format": "pytorch-dcp", "verdict", "clean", "problems", "tensors", ...}.
std::string report_json(const Checkpoint& ckpt, const Report& report);
// `inspect --json`: keys with kind, dtype, size and chunks (offsets, sizes, file, offset, length).
std::string metadata_json(const Checkpoint& ckpt);

}  // namespace ckptdoc::dcp
