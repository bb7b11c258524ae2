#pragma once
// The not-analysed finding: every element a diagnosis did not compare or measure, counted by reason. Data a
// user expects analysed that was skipped is a warning; what holds by design nothing to compare (padding,
// ZeRO-3 placeholder weights, frozen params) is info. Neither makes a checkpoint unclean (exit 0 stays "no
// error finding").
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"

namespace ckptdoc::analysis {

// Elements a diagnosis could not analyse, or that hold nothing to analyse, by reason (the reasons below).
using NotAnalysed = std::map<std::string, uint64_t>;

// The reasons, as evidence keys. Warnings: data that exists (or should) but was not analysed.
inline constexpr const char* kNotAnalysedWarnings[] = {
    "rank_unreadable",        // a rank's partition could not be read (its file is missing or unreadable)
    "moment_missing",         // a rank lacks a moment the other ranks hold
    "partition_short",        // fragments past the end of a saved fp32 or moment tensor
    "fp32_not_float32",       // fp32 masters saved in another dtype: not compared with the weights
    "lp_missing",             // trainable params whose 16-bit weight is missing or of another size
    "lp_dtype_unsupported"};  // 16-bit weights of a dtype the comparison does not handle
// Info: nothing to compare by design.
inline constexpr const char* kNotAnalysedInfo[] = {
    "padding",             // alignment padding inside flat partitions
    "zero3_placeholders",  // ZeRO-3 model files hold placeholders, not the weights
    "autoep_experts",      // AutoEP ZeRO-3 model files hold nothing of the experts
    "frozen"};             // frozen params: module weights only, no masters or moments

// Calls f(reason) for every reason, warnings first (a fixed order: MPI processes pack the counts in it).
template <typename F>
void for_each_not_analysed_reason(F&& f) {
  for (const char* k : kNotAnalysedWarnings) f(k);
  for (const char* k : kNotAnalysedInfo) f(k);
}

// Zero, one or two findings (warning, info) with code "not-analysed", evidence = element counts by reason.
std::vector<Finding> not_analysed_findings(const NotAnalysed& counts);

}  // namespace ckptdoc::analysis
