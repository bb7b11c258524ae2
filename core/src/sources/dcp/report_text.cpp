// inspect_text / diagnose_text: the DCP reports the CLI prints (moved from app/cli/dcp_command.cpp for #27's
// registry, unchanged).
#include "ckptdoc/sources/dcp/report_text.h"

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "ckptdoc/appendf.h"
#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/human_bytes.h"
#include "ckptdoc/model/finding_codes.h"

namespace ckptdoc::dcp {
namespace {

std::string files_of(const Entry& e) {
  std::set<std::string> files;
  if (e.bytes_item) files.insert(e.bytes_item->file);
  for (const auto& c : e.chunks) files.insert(c.item ? c.item->file : "(no item)");
  std::string s;
  for (const auto& f : files) s += (s.empty() ? "" : ", ") + f;
  return s;
}

void append_problems(std::string& out, const std::vector<Problem>& problems) {
  for (const auto& p : problems)
    appendf(out, "  %-7s %-22s %s\n", std::string(model::severity_name(p.severity)).c_str(), p.code.c_str(),
            p.message.c_str());
}

}  // namespace

std::string inspect_text(const Checkpoint& ckpt) {
  std::string out;
  const auto& md = ckpt.metadata();
  size_t tensors = 0, bytes = 0;
  int64_t elements = 0;
  for (const auto& e : md.entries) {
    if (e.kind == EntryKind::Tensor) {
      ++tensors;
      elements += e.numel();
    } else {
      ++bytes;
    }
  }
  appendf(out, "PyTorch Distributed Checkpoint %s\n", ckpt.dir().c_str());
  appendf(out, "  version   %s\n", md.version.empty() ? "(none)" : md.version.c_str());
  if (!md.merged_from.empty()) {
    out += "  metadata  per rank, read as their union (saved without collectives):";
    for (const auto& f : md.merged_from) out += " " + std::filesystem::path(f).filename().string();
    out += "\n";
  }
  appendf(out, "  keys      %zu tensors (%s elements), %zu bytes items\n", tensors, grouped(elements).c_str(),
          bytes);
  out += "  files    ";
  for (const auto& f : ckpt.storage_files()) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(std::filesystem::path(ckpt.dir()) / f, ec);
    out +=
        " " + f + " (" + (ec ? std::string("missing") : grouped(static_cast<int64_t>(size)) + " bytes") + ")";
  }
  out += "\n\nTensors (dtype, global shape, chunks, files)\n";
  for (const auto& e : md.entries)
    if (e.kind == EntryKind::Tensor) {
      appendf(out, "  %-44s %-9s %-10s %zu chunk%s  %s", e.key.c_str(), e.dtype.c_str(),
              shape_text(e.size).c_str(), e.chunks.size(), e.chunks.size() == 1 ? " " : "s",
              files_of(e).c_str());
      // megatron-core <= 0.15's model-space optimizer state: stored as fragments of this shape
      if (!e.nd_flattened_from.empty())
        out += "  (nd-flattened from " + shape_text(e.nd_flattened_from) + ")";
      out += "\n";
    }
  out += "\nBytes items (pickled objects: param groups, train state)\n";
  constexpr size_t kShown = 12;  // optimizers save ~11 per param: the rest are in --json
  size_t shown = 0;
  for (const auto& e : md.entries)
    if (e.kind == EntryKind::Bytes && shown++ < kShown)
      appendf(out, "  %-56s %s\n", e.key.c_str(), files_of(e).c_str());
  if (bytes > kShown) appendf(out, "  ... and %zu more (inspect --json lists every key)\n", bytes - kShown);
  std::vector<Problem> problems;
  for (const auto& e : md.entries)
    for (auto& p : tiling_problems(e)) problems.push_back(std::move(p));
  for (const auto& h : md.hazards)
    problems.push_back(problem(model::Code::UnsafePickle, model::severity_of(h.severity),  // the hazard's own

                               ".metadata: " + h.callable + ": " + h.why, ".metadata"));
  for (const auto& u : md.unreferenced_items)
    problems.push_back(
        problem(model::Code::DcpItemUnreferenced, "storage item " + u + " belongs to no chunk"));
  out += "\nProblems seen in .metadata alone (`ckptdoc diagnose` reads every item)\n";
  if (problems.empty()) out += "  none: every tensor's chunks tile its shape\n";
  append_problems(out, problems);
  return out;
}

std::string diagnose_text(const Checkpoint& ckpt, const Report& report) {
  std::string out = "PyTorch Distributed Checkpoint " + ckpt.dir() + "\n\n" + report.verdict + "\n";
  if (!report.problems.empty()) {
    out += "\nProblems\n";
    append_problems(out, report.problems);
  }
  out += "\nNot checked\n";
  for (const auto& n : report.not_checked) out += "  - " + n + "\n";
  return out;
}

}  // namespace ckptdoc::dcp
