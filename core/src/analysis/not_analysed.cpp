// not_analysed_findings (not_analysed.h).
#include "not_analysed.h"

#include <map>

#include "ckptdoc/model/finding_codes.h"

namespace ckptdoc::analysis {
namespace {

const std::map<std::string, std::string>& describe() {
  static const std::map<std::string, std::string> d{
      {"rank_unreadable", "on ranks whose file is missing or unreadable (named above)"},
      {"moment_missing", "of optimizer moments a rank lacks while the others hold them (named above)"},
      {"partition_short", "past the end of a saved partition that is shorter than its layout (named above)"},
      {"fp32_not_float32", "of fp32 masters saved in another dtype (not compared with the weights)"},
      {"lp_missing", "of trainable params whose 16-bit weight is missing or of another size (not compared)"},
      {"lp_dtype_unsupported", "of 16-bit weights in a dtype the comparison does not handle"},
      {"padding", "of alignment padding in the flat partitions"},
      {"zero3_placeholders",
       "of ZeRO-3 params whose model files hold placeholders, not weights (masters and "
       "moments were analysed; there is no 16-bit copy to compare them with)"},
      {"autoep_experts",
       "of AutoEP expert params, of which the model files hold nothing (masters and moments "
       "were analysed; there is no 16-bit copy to compare them with)"},
      {"frozen", "of frozen params (module weights only; no masters or moments by design)"}};
  return d;
}

template <size_t N>
Finding make(const char* const (&reasons)[N], const NotAnalysed& counts, Severity severity) {
  // Info for what is absent by design (nothing to compare), the table's warning for data that should be
  // there.
  Finding f(model::Code::NotAnalysed, severity, "");
  std::string parts;
  uint64_t total = 0;
  for (const char* r : reasons) {
    const auto it = counts.find(r);
    if (it == counts.end() || it->second == 0) continue;
    f.evidence[r] = static_cast<double>(it->second);
    total += it->second;
    parts += (parts.empty() ? "" : "; ") + std::to_string(it->second) + " elements " + describe().at(r);
  }
  if (total == 0) return f;
  f.evidence["elements"] = static_cast<double>(total);
  f.message = severity == Severity::Warning ? "Not analysed, although the data should be there: " + parts +
                                                  ". The statistics and findings cover the rest only."
                                            : "Nothing to compare by design: " + parts + ".";
  return f;
}

}  // namespace

std::vector<Finding> not_analysed_findings(const NotAnalysed& counts) {
  std::vector<Finding> out;
  for (Finding f : {make(kNotAnalysedWarnings, counts, Severity::Warning),
                    make(kNotAnalysedInfo, counts, Severity::Info)})
    if (!f.message.empty()) out.push_back(std::move(f));
  return out;
}

}  // namespace ckptdoc::analysis
