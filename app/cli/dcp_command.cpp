// `ckptdoc inspect` / `diagnose` on a PyTorch Distributed Checkpoint folder (`.metadata` + `*.distcp`).
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/dcp/diagnose.h"
#include "commands.h"
#include "format_helpers.h"

namespace ckptdoc::cli {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string files_of(const dcp::Entry& e) {
  std::set<std::string> files;
  if (e.bytes_item) files.insert(e.bytes_item->file);
  for (const auto& c : e.chunks) files.insert(c.item ? c.item->file : "(no item)");
  std::string s;
  for (const auto& f : files) s += (s.empty() ? "" : ", ") + f;
  return s;
}

void print_problems(const std::vector<dcp::Problem>& problems) {
  for (const auto& p : problems)
    std::printf("  %-7s %-22s %s\n", p.severity.c_str(), p.code.c_str(), p.message.c_str());
}

void print_inspect(const dcp::Checkpoint& ckpt) {
  const auto& md = ckpt.metadata();
  size_t tensors = 0, bytes = 0;
  int64_t elements = 0;
  for (const auto& e : md.entries) {
    if (e.kind == dcp::EntryKind::Tensor) {
      ++tensors;
      elements += e.numel();
    } else {
      ++bytes;
    }
  }
  std::printf("PyTorch Distributed Checkpoint %s\n", ckpt.dir().c_str());
  std::printf("  version   %s\n", md.version.empty() ? "(none)" : md.version.c_str());
  if (!md.merged_from.empty()) {
    std::printf("  metadata  per rank, read as their union (saved without collectives):");
    for (const auto& f : md.merged_from)
      std::printf(" %s", std::filesystem::path(f).filename().string().c_str());
    std::printf("\n");
  }
  std::printf("  keys      %zu tensors (%s elements), %zu bytes items\n", tensors, grouped(elements).c_str(),
              bytes);
  std::printf("  files    ");
  for (const auto& f : ckpt.storage_files()) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(std::filesystem::path(ckpt.dir()) / f, ec);
    std::printf(" %s (%s)", f.c_str(),
                ec ? "missing" : (grouped(static_cast<int64_t>(size)) + " bytes").c_str());
  }
  std::printf("\n\nTensors (dtype, global shape, chunks, files)\n");
  for (const auto& e : md.entries)
    if (e.kind == dcp::EntryKind::Tensor)
      std::printf("  %-44s %-9s %-10s %zu chunk%s  %s\n", e.key.c_str(), e.dtype.c_str(),
                  shape_text(e.size).c_str(), e.chunks.size(), e.chunks.size() == 1 ? " " : "s",
                  files_of(e).c_str());
  std::printf("\nBytes items (pickled objects: param groups, train state)\n");
  constexpr size_t kShown = 12;  // optimizers save ~11 per param: the rest are in --json
  size_t shown = 0;
  for (const auto& e : md.entries)
    if (e.kind == dcp::EntryKind::Bytes && shown++ < kShown)
      std::printf("  %-56s %s\n", e.key.c_str(), files_of(e).c_str());
  if (bytes > kShown) std::printf("  ... and %zu more (inspect --json lists every key)\n", bytes - kShown);
  std::vector<dcp::Problem> problems;
  for (const auto& e : md.entries)
    for (auto& p : dcp::tiling_problems(e)) problems.push_back(std::move(p));
  for (const auto& h : md.hazards)
    problems.push_back(
        {"unsafe-pickle", h.severity, ".metadata: " + h.callable + ": " + h.why, ".metadata", ""});
  for (const auto& u : md.unreferenced_items)
    problems.push_back(
        {"dcp-item-unreferenced", "warning", "storage item " + u + " belongs to no chunk", "", ""});
  std::printf("\nProblems seen in .metadata alone (`ckptdoc diagnose` reads every item)\n");
  if (problems.empty()) std::printf("  none: every tensor's chunks tile its shape\n");
  print_problems(problems);
}

}  // namespace

int run_dcp_inspect(const std::string& path, bool json) {
  try {
    const auto ckpt = dcp::Checkpoint::open(path);
    if (json)
      std::printf("%s\n", dcp::metadata_json(*ckpt).c_str());
    else
      print_inspect(*ckpt);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc inspect: error [%s]: %s\n", std::string(kind_name(e.kind())).c_str(),
                 e.what());
    return 2;
  }
}

int run_dcp_diagnose(const std::string& path, bool json) {
  try {
    const auto ckpt = dcp::Checkpoint::open(path);
    const dcp::Report report = dcp::diagnose(*ckpt);
    if (json) {
      std::printf("%s\n", dcp::report_json(*ckpt, report).c_str());
    } else {
      std::printf("PyTorch Distributed Checkpoint %s\n\n%s\n", ckpt->dir().c_str(), report.verdict.c_str());
      if (!report.problems.empty()) {
        std::printf("\nProblems\n");
        print_problems(report.problems);
      }
      std::printf("\nNot checked\n");
      for (const auto& n : report.not_checked) std::printf("  - %s\n", n.c_str());
    }
    return report.has_error() ? 1 : 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc diagnose: error [%s]: %s\n", std::string(kind_name(e.kind())).c_str(),
                 e.what());
    return 2;
  }
}

}  // namespace ckptdoc::cli
