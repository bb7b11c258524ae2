// Plan::text: the printable plan every front end shows before a repair writes anything. It reads only the
// Plan, so it stays with the Plan type in repair/ while the planner that fills one lives with its source.
#include <algorithm>
#include <sstream>

#include "ckptdoc/human_bytes.h"
#include "ckptdoc/repair/plan.h"

namespace ckptdoc::repair {

std::string Plan::text() const {
  std::ostringstream o;
  o << "Repair plan\n  input:  " << input << "\n  output: " << output << "\n  tag:    " << tag << "\n";
  o << "Actions:\n";
  for (const auto& a : actions) o << "  - " << a << "\n";
  o << "Files (" << files.size() << "):\n";
  // Files DeepSpeed does not read are copied as they are: a handful listed, many summed up in one line.
  size_t others = 0;
  uint64_t other_bytes = 0;
  for (const auto& f : files)
    if (f.why == kNotReadByDeepSpeed) ++others, other_bytes += f.bytes;
  const bool sum_up_others = others > 10;
  for (const auto& f : files) {
    if (sum_up_others && f.why == kNotReadByDeepSpeed) continue;
    o << "  " << f.action << std::string(f.action.size() < 8 ? 8 - f.action.size() : 1, ' ') << f.path;
    if (!f.why.empty()) o << "  (" << f.why << ")";
    o << "\n";
  }
  if (sum_up_others)
    o << "  copy    " << others << " other files of the tag folder, " << human_bytes(other_bytes) << " ("
      << kNotReadByDeepSpeed
      << "; their writes are made durable together before the output is renamed into place)\n";
  if (!changed_tensors.empty()) {
    o << "Changed tensors (" << changed_tensors.size() << "):\n";
    const size_t shown = std::min<size_t>(changed_tensors.size(), 20);
    for (size_t i = 0; i < shown; ++i) o << "  " << changed_tensors[i] << "\n";
    if (shown < changed_tensors.size()) o << "  ... and " << changed_tensors.size() - shown << " more\n";
  }
  for (const auto& w : warnings) o << "warning: " << w << "\n";
  o << "About " << human_bytes(bytes_to_write) << " (" << bytes_to_write << " bytes) to write.\n";
  return o.str();
}

}  // namespace ckptdoc::repair
