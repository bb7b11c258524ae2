#include "sources/deepspeed/moment_lengths.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "ckptdoc/model/finding_codes.h"

namespace ckptdoc::deepspeed::detail {

namespace {

constexpr size_t kMaxLines = 6;

std::string joined_ranks(const std::set<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// What a consistent difference means: every moment shorter (or longer) than the fp32 partition it belongs to
// is the optimizer state of a smaller (or larger) model loaded as it was.
std::string cause_of(const std::vector<MomentLengthMismatch>& all) {
  const bool shorter =
      std::all_of(all.begin(), all.end(), [](const auto& m) { return m.saved < m.expected; });
  const bool longer = std::all_of(all.begin(), all.end(), [](const auto& m) { return m.saved > m.expected; });
  if (shorter)
    return " Every one is shorter than the partition it belongs to: the optimizer state is that of a smaller "
           "model. "
           "This is what load_checkpoint(..., load_module_strict=False) leaves after layers were added to "
           "the "
           "model: DeepSpeed loads the old model's optimizer state as it is, and the next step fails or "
           "applies "
           "its moments to the wrong elements.";
  if (longer)
    return " Every one is longer than the partition it belongs to: the optimizer state is that of a larger "
           "model "
           "(layers removed, then the old optimizer state loaded with load_module_strict=False).";
  return "";
}

}  // namespace

std::vector<Problem> moment_length_problems(const std::vector<MomentLengthMismatch>& all) {
  if (all.empty()) return {};
  Problem p(model::Code::OptimizerStateShapeMismatch);
  std::set<int> ranks;
  for (const auto& m : all) ranks.insert(m.rank);
  p.ranks.assign(ranks.begin(), ranks.end());
  if (all.size() == 1) {
    const auto& m = all.front();
    p.file = m.file;
    p.message = "optimizer state '" + m.key + "' of group " + std::to_string(m.group) + " on dp rank " +
                std::to_string(m.rank) + " has " + std::to_string(m.saved) + " elements, expected " +
                std::to_string(m.expected);
    return {p};
  }
  // One line per (group, saved, expected) with its keys and ranks: the layout repeats over ranks.
  std::map<std::tuple<int, int64_t, int64_t>, std::pair<std::set<std::string>, std::set<int>>> lines;
  std::set<std::string> files;
  for (const auto& m : all) {
    auto& [keys, on] = lines[{m.group, m.saved, m.expected}];
    keys.insert(m.key);
    on.insert(m.rank);
    files.insert(m.file);
  }
  if (files.size() == 1) p.file = *files.begin();
  p.message = "The optimizer moments do not fit the partition layout: " + std::to_string(all.size()) +
              " moment tensors on " + std::to_string(ranks.size()) + " dp rank" +
              (ranks.size() == 1 ? "" : "s") +
              " have other lengths than the fp32 partitions they belong to (";
  size_t shown = 0;
  for (const auto& [at, what] : lines) {
    if (shown++ == kMaxLines) {
      p.message += "; …";
      break;
    }
    const auto& [group, saved, expected] = at;
    std::string keys;
    for (const auto& k : what.first) keys += (keys.empty() ? "'" : ", '") + k + "'";
    p.message += std::string(shown > 1 ? "; " : "") + "group " + std::to_string(group) + " " + keys + ": " +
                 std::to_string(saved) + " elements where the layout has " + std::to_string(expected) +
                 ", dp ranks " + joined_ranks(what.second);
  }
  p.message +=
      ")." + cause_of(all) +
      " Fix: reset the optimizer (ckptdoc repair --reset-optimizer; Adam re-creates moments of the right "
      "shapes at the next step; add --refresh-fp32 when the masters are stale too), drop it "
      "(--drop-optimizer), or export the "
      "16-bit weights (ckptdoc export --source lp).";
  return {p};
}

}  // namespace ckptdoc::deepspeed::detail
