// Diagnosis of a weights-only source: structural problems plus a value pass over every floating tensor.
#include "analysis/weights_diagnose.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "analysis/optimizer_file_check.h"
#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/parallel.h"
#include "ckptdoc/short_list.h"

namespace ckptdoc::analysis {

using weights::WeightsSource;

namespace {

constexpr int64_t kChunk = int64_t{1} << 22;  // elements per task: keeps every worker busy on big tensors

bool scannable(DType d) {
  return d == DType::F16 || d == DType::BF16 || d == DType::F32 || d == DType::F64;
}

struct Task {
  size_t tensor = 0;
  int64_t first = 0, n = 0;
};

}  // namespace

analysis::Report diagnose_tensors(const std::vector<TensorToScan>& tensors,
                                  const analysis::DiagnoseOptions& options, Progress* progress) {
  const auto start = std::chrono::steady_clock::now();
  analysis::Report report;

  // Bytes to scan: contiguous views on the mapped files, or a copy for the rare strided torch view.
  std::vector<std::optional<Tensor>> views(tensors.size());
  std::vector<Task> tasks;
  uint64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].tensor;
    analysis::ParamReport p;
    p.name = tensors[i].name;
    p.shape = t.shape;
    p.numel = t.numel();
    p.lp_dtype = t.dtype;
    report.params.push_back(std::move(p));
    if (!scannable(t.dtype) || t.numel() == 0) continue;
    try {
      views[i] = t.is_contiguous() && t.storage && t.storage->has_bytes()
                     ? t
                     : Tensor::from_bytes(t.dtype, t.shape, t.to_bytes());
      (void)views[i]->contiguous_bytes();  // bounds-checked against the storage now, not in a worker
    } catch (const Error& e) {
      throw e.with_file(tensors[i].file);
    }
    for (int64_t f = 0; f < t.numel(); f += kChunk) tasks.push_back({i, f, std::min(kChunk, t.numel() - f)});
    total += t.nbytes();
  }
  if (progress) progress->set_stage("scanning tensors", total);

  // Workers pull chunks; results land in per-task slots and are merged in task order (deterministic sums).
  std::vector<ValueStats> results(tasks.size());
  const unsigned workers = static_cast<unsigned>(std::min<size_t>(
      options.threads ? options.threads : default_workers(), std::max<size_t>(tasks.size(), 1)));
  // Said as the DeepSpeed scan says it ("CPU (2 threads, AVX2)"): each worker runs a one-thread backend.
  report.backend = "CPU (" + std::to_string(workers) + (workers == 1 ? " thread" : " threads") +
                   (cpu_simd_available() ? ", AVX2)" : ")");
  std::vector<std::unique_ptr<Backend>> backends(workers);  // one per worker, made by the worker that uses it
  parallel_for(tasks.size(), workers, [&](size_t k, unsigned w) {
    if (!backends[w]) backends[w] = make_cpu_backend(1);
    if (progress) progress->check();
    const Task& t = tasks[k];
    const Tensor& v = *views[t.tensor];
    const size_t es = element_size(v.dtype);
    const uint8_t* p = v.contiguous_bytes().data() + static_cast<size_t>(t.first) * es;
    results[k] = backends[w]->value_stats(p, v.dtype, static_cast<size_t>(t.n));
    if (progress) progress->add(static_cast<uint64_t>(t.n) * es);
  });
  for (size_t k = 0; k < tasks.size(); ++k) {
    auto& p = report.params[tasks[k].tensor];
    if (!p.lp) p.lp = ValueStats{};
    p.lp->merge(results[k]);
    report.bytes_scanned += static_cast<uint64_t>(tasks[k].n) * element_size(p.lp_dtype);
  }

  // NaN/Inf and all-zero weight matrices, each finding naming every tensor and the files holding them.
  std::vector<std::string> nonfinite, nonfinite_files, zero, zero_files;
  uint64_t nonfinite_count = 0;
  for (size_t i = 0; i < report.params.size(); ++i) {
    auto& p = report.params[i];
    if (!p.lp) continue;
    const uint64_t bad = p.lp->count - p.lp->finite_count();
    if (bad) {
      p.nonfinite_by_rank["lp"][0] = bad;
      nonfinite.push_back(p.name + " (" + std::to_string(bad) + ")");
      nonfinite_count += bad;
      if (std::find(nonfinite_files.begin(), nonfinite_files.end(), tensors[i].file) == nonfinite_files.end())
        nonfinite_files.push_back(tensors[i].file);
    }
    if (p.shape.size() >= 2 && p.lp->count > 0 && p.lp->zeros == p.lp->count) {
      zero.push_back(p.name);
      if (std::find(zero_files.begin(), zero_files.end(), tensors[i].file) == zero_files.end())
        zero_files.push_back(tensors[i].file);
    }
  }
  if (!nonfinite.empty()) {
    std::vector<std::string> names;
    for (const auto& p : report.params)
      if (p.nonfinite_by_rank.count("lp")) names.push_back(p.name);
    {
      model::Finding f(
          model::Code::NonfiniteValues,
          std::to_string(nonfinite_count) + " NaN/Inf values in " + std::to_string(nonfinite.size()) +
              " tensors: " + short_list(nonfinite) + " (in " + short_list(nonfinite_files) +
              "). A model with them produces NaN outputs; take the weights from an earlier save");
      f.params = names;
      f.evidence = {{"nonfinite", double(nonfinite_count)}};
      report.findings.push_back(std::move(f));
    }
  }
  if (!zero.empty()) {
    {
      model::Finding f(model::Code::AllZeroWeights,
                       std::to_string(zero.size()) + " weight matrices are all zeros: " + short_list(zero) +
                           " (in " + short_list(zero_files) +
                           "). Trained layers are never exactly zero: a lost or never-gathered partition, "
                           "unless the layer is zero-initialised on purpose (e.g. a LoRA B matrix)");
      f.params = zero;
      f.evidence = {{"tensors", double(zero.size())}};
      report.findings.push_back(std::move(f));
    }
  }
  std::stable_sort(report.findings.begin(), report.findings.end(), [](const auto& a, const auto& b) {
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

analysis::Report diagnose_weights(const WeightsSource& source, const analysis::DiagnoseOptions& options,
                                  Progress* progress) {
  std::vector<TensorToScan> tensors;
  tensors.reserve(source.tensors().size());
  for (size_t i = 0; i < source.tensors().size(); ++i)
    tensors.push_back({source.tensors()[i].name, source.tensors()[i].tensor, source.file_of(i)});
  analysis::Report report = diagnose_tensors(tensors, options, progress);
  // The source's structural problems first, then the value findings; the most severe first.
  std::vector<analysis::Finding> findings;
  for (const auto& pr : source.problems()) findings.push_back(pr);
  for (auto& f : report.findings) findings.push_back(std::move(f));
  // Accelerate's save_state and a plain Trainer's checkpoint-N/ keep the optimizer beside the weights
  // (optimizer.bin, optimizer.pt): read and checked too.
  if (source.is_folder())
    for (const auto& file : weights::optimizer_files_in(source.root())) {
      if (progress) progress->check();
      try {
        const auto opt =
            weights::read_optimizer_file((std::filesystem::path(source.root()) / file).string(), file);
        report.optimizer_files.push_back(
            check_optimizer_file(opt, source.tensors(), options, progress, findings));
      } catch (const Error& e) {
        findings.emplace_back(model::Code::OptimizerFileUnreadable,
                              file + " cannot be read as an optimizer state dict: " + e.what() +
                                  ". Resuming from this folder (load_state, resume_from_checkpoint) fails on "
                                  "it; its optimizer state was not checked",
                              file);
        weights::OptimizerFileSummary unread;
        unread.file = file;  // read stays false: the verdict lists it as not read
        report.optimizer_files.push_back(std::move(unread));
      }
    }
  std::stable_sort(findings.begin(), findings.end(), [](const auto& a, const auto& b) {
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
  report.findings = std::move(findings);
  return report;
}

}  // namespace ckptdoc::analysis
