#include "scan.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "ckptdoc/error.h"

namespace ckptdoc::analysis {
namespace {

constexpr int64_t kMaxTaskElements = int64_t{1} << 22;  // split big fragments so all workers stay busy
constexpr size_t kBatchTasks = 512;                      // results merged in order, batch by batch

// One contiguous run of one param on one rank.
struct Task {
  int group = 0, param = 0, rank = 0;
  int64_t param_offset = 0, partition_offset = 0, numel = 0;
};

struct TaskResult {
  std::optional<DivergenceStats> div;
  std::optional<ValueStats> lp, fp32, exp_avg, exp_avg_sq;
  uint64_t bytes = 0;
};

// The mapped flat tensors of one (group, rank).
struct PartitionViews {
  std::optional<Tensor> fp32, exp_avg, exp_avg_sq;
};

const uint8_t* element_ptr(const Tensor& t, int64_t offset, int64_t numel) {
  if (offset < 0 || numel < 0 || offset + numel > t.numel()) return nullptr;
  return t.contiguous_bytes().data() + static_cast<size_t>(offset) * element_size(t.dtype);
}

// Contiguous copies of non-contiguous lp views, made once per param (rare: DeepSpeed saves contiguous views).
struct LpView {
  std::optional<Tensor> tensor;
  std::optional<Tensor> contiguous;  // same values, contiguous
};

class Scanner {
 public:
  Scanner(const deepspeed::Checkpoint& ckpt, const DiagnoseOptions& options, Progress* progress)
      : ckpt_(ckpt), options_(options), progress_(progress) {}

  ScanResult run() {
    ScanResult out;
    const auto& cat = ckpt_.catalog();
    std::string note;
    std::unique_ptr<Backend> primary = make_backend(options_.device, &note);
    out.backend = primary->description();
    const bool on_cpu = primary->kind() == DeviceKind::Cpu;
    const unsigned workers = on_cpu ? std::max(1u, options_.threads ? options_.threads : std::thread::hardware_concurrency()) : 1u;
    backends_.clear();
    if (on_cpu) {
      for (unsigned i = 0; i < workers; ++i) backends_.push_back(make_cpu_backend(1));
    } else {
      backends_.push_back(std::move(primary));
    }

    // Reports in catalog order; lp views per param; partition views per (group, rank).
    for (const auto& g : cat.groups) {
      for (const auto& p : g.params) {
        ParamReport r;
        r.name = p.name;
        r.group = g.index;
        r.shape = p.shape;
        r.numel = p.numel;
        r.lp_dtype = cat.lp_dtype;
        reports_.push_back(std::move(r));
      }
    }
    build_param_index();
    load_views(out);
    std::vector<Task> tasks = make_tasks();

    uint64_t total = 0;
    for (const auto& t : tasks) total += bytes_of(t);
    if (progress_) progress_->set_stage("scanning tensors", total);

    for (size_t start = 0; start < tasks.size(); start += kBatchTasks) {
      const size_t end = std::min(tasks.size(), start + kBatchTasks);
      std::vector<TaskResult> results(end - start);
      std::atomic<size_t> next{start};
      std::atomic<bool> failed{false};
      std::string failure;
      std::mutex failure_mutex;
      auto work = [&](Backend& be) {
        for (;;) {
          const size_t i = next.fetch_add(1);
          if (i >= end || failed.load()) return;
          try {
            if (progress_) progress_->check();
            results[i - start] = run_task(tasks[i], be);
            if (progress_) progress_->add(results[i - start].bytes);
          } catch (...) {
            std::lock_guard<std::mutex> lock(failure_mutex);
            if (!failed.exchange(true)) error_ = std::current_exception();
            return;
          }
        }
      };
      std::vector<std::thread> threads;
      for (size_t w = 1; w < backends_.size(); ++w) threads.emplace_back(work, std::ref(*backends_[w]));
      work(*backends_[0]);
      for (auto& t : threads) t.join();
      if (failed.load()) std::rethrow_exception(error_);
      for (size_t i = start; i < end; ++i) merge(tasks[i], results[i - start], out);
    }
    out.params = std::move(reports_);
    return out;
  }

 private:
  void build_param_index() {
    size_t n = 0;
    for (const auto& g : ckpt_.catalog().groups) {
      group_first_[g.index] = n;
      n += g.params.size();
    }
  }

  ParamReport& report_of(int group, int param) { return reports_[group_first_.at(group) + static_cast<size_t>(param)]; }

  void load_views(ScanResult& out) {
    const auto& cat = ckpt_.catalog();
    for (const auto& g : cat.groups) {
      for (const auto& part : g.partitions) {
        PartitionViews v;
        try {
          v.fp32 = ckpt_.fp32_partition(g.index, part.rank);
          v.exp_avg = ckpt_.moment_partition(g.index, part.rank, "exp_avg");
          v.exp_avg_sq = ckpt_.moment_partition(g.index, part.rank, "exp_avg_sq");
        } catch (const Error& e) {
          out.problems.push_back({"rank-file-unreadable", "error",
                                  "rank " + std::to_string(part.rank) + " of group " + std::to_string(g.index) +
                                      " could not be read: " + e.what(),
                                  "", {part.rank}, {}});
          v = {};
        }
        for (auto* t : {&v.fp32, &v.exp_avg, &v.exp_avg_sq})
          if (*t && !(*t)->is_contiguous()) *t = std::nullopt;
        partitions_[{g.index, part.rank}] = std::move(v);
      }
      for (size_t i = 0; i < g.params.size(); ++i) {
        LpView lv;
        try {
          lv.tensor = ckpt_.lp_param(g.params[i].name);
        } catch (const Error&) {
          lv.tensor = std::nullopt;
        }
        if (lv.tensor && lv.tensor->numel() != g.params[i].numel) lv.tensor = std::nullopt;  // placeholder/shape issue
        if (lv.tensor && !lv.tensor->is_contiguous())
          lv.contiguous = Tensor::from_bytes(lv.tensor->dtype, lv.tensor->shape, lv.tensor->to_bytes());
        lp_[{g.index, static_cast<int>(i)}] = std::move(lv);
      }
    }
  }

  std::vector<Task> make_tasks() const {
    std::vector<Task> tasks;
    for (const auto& g : ckpt_.catalog().groups) {
      for (const auto& part : g.partitions) {
        for (const auto& f : part.fragments) {
          for (int64_t done = 0; done < f.numel; done += kMaxTaskElements) {
            Task t;
            t.group = g.index;
            t.param = f.param;
            t.rank = part.rank;
            t.param_offset = f.param_offset + done;
            t.partition_offset = f.partition_offset + done;
            t.numel = std::min(kMaxTaskElements, f.numel - done);
            tasks.push_back(t);
          }
        }
      }
    }
    return tasks;
  }

  const Tensor* lp_tensor(int group, int param) const {
    const auto& lv = lp_.at({group, param});
    if (lv.contiguous) return &*lv.contiguous;
    return lv.tensor ? &*lv.tensor : nullptr;
  }

  uint64_t bytes_of(const Task& t) const {
    uint64_t b = 0;
    const auto& pv = partitions_.at({t.group, t.rank});
    for (const auto* x : {&pv.fp32, &pv.exp_avg, &pv.exp_avg_sq})
      if (*x) b += static_cast<uint64_t>(t.numel) * element_size((*x)->dtype);
    if (const Tensor* lp = lp_tensor(t.group, t.param)) b += static_cast<uint64_t>(t.numel) * element_size(lp->dtype);
    return b;
  }

  TaskResult run_task(const Task& t, Backend& be) const {
    TaskResult r;
    const auto& pv = partitions_.at({t.group, t.rank});
    const auto n = static_cast<size_t>(t.numel);
    const uint8_t* fp32 = pv.fp32 ? element_ptr(*pv.fp32, t.partition_offset, t.numel) : nullptr;
    const Tensor* lpt = lp_tensor(t.group, t.param);
    const uint8_t* lp = lpt ? element_ptr(*lpt, t.param_offset, t.numel) : nullptr;
    const bool have_fp32 = fp32 && pv.fp32->dtype == DType::F32;
    if (have_fp32 && lp && (lpt->dtype == DType::F16 || lpt->dtype == DType::BF16 || lpt->dtype == DType::F32)) {
      // both sides' statistics and their divergence in one pass over the two arrays
      FragmentStats f = be.fragment_stats(lp, lpt->dtype, reinterpret_cast<const float*>(fp32), n);
      r.fp32 = f.fp32;
      r.lp = f.lp;
      r.div = f.divergence;
      r.bytes += n * 4 + n * element_size(lpt->dtype);
    } else {
      if (have_fp32) {
        r.fp32 = be.value_stats(fp32, DType::F32, n);
        r.bytes += n * 4;
      }
      if (lp) {
        r.lp = be.value_stats(lp, lpt->dtype, n);
        r.bytes += n * element_size(lpt->dtype);
        if (have_fp32) r.div = be.divergence(lp, lpt->dtype, reinterpret_cast<const float*>(fp32), n);
      }
    }
    if (pv.exp_avg)
      if (const uint8_t* m = element_ptr(*pv.exp_avg, t.partition_offset, t.numel)) {
        r.exp_avg = be.value_stats(m, pv.exp_avg->dtype, n);
        r.bytes += n * element_size(pv.exp_avg->dtype);
      }
    if (pv.exp_avg_sq)
      if (const uint8_t* v = element_ptr(*pv.exp_avg_sq, t.partition_offset, t.numel)) {
        r.exp_avg_sq = be.value_stats(v, pv.exp_avg_sq->dtype, n);
        r.bytes += n * element_size(pv.exp_avg_sq->dtype);
      }
    return r;
  }

  static void merge_into(std::optional<ValueStats>& into, const std::optional<ValueStats>& from) {
    if (!from) return;
    if (!into) into = ValueStats{};
    into->merge(*from);
  }

  void merge(const Task& t, const TaskResult& r, ScanResult& out) {
    ParamReport& p = report_of(t.group, t.param);
    const std::pair<const char*, const std::optional<ValueStats>*> kinds[] = {
        {"lp", &r.lp}, {"fp32", &r.fp32}, {"exp_avg", &r.exp_avg}, {"exp_avg_sq", &r.exp_avg_sq}};
    for (const auto& [name, stats] : kinds)
      if (*stats && (*stats)->finite_count() != (*stats)->count)
        p.nonfinite_by_rank[name][t.rank] += (*stats)->count - (*stats)->finite_count();
    out.bytes_scanned += r.bytes;
    merge_into(p.lp, r.lp);
    merge_into(p.fp32, r.fp32);
    merge_into(p.exp_avg, r.exp_avg);
    merge_into(p.exp_avg_sq, r.exp_avg_sq);
    if (r.div) {
      if (!p.lp_vs_fp32) p.lp_vs_fp32 = DivergenceStats{};
      p.lp_vs_fp32->merge(*r.div);
      p.per_rank[t.rank].merge(*r.div);
    }
  }

  const deepspeed::Checkpoint& ckpt_;
  DiagnoseOptions options_;
  Progress* progress_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<ParamReport> reports_;
  std::map<int, size_t> group_first_;
  std::map<std::pair<int, int>, PartitionViews> partitions_;
  std::map<std::pair<int, int>, LpView> lp_;
  std::exception_ptr error_;
};

}  // namespace

ScanResult scan_params(const deepspeed::Checkpoint& ckpt, const DiagnoseOptions& options, Progress* progress) {
  return Scanner(ckpt, options, progress).run();
}

}  // namespace ckptdoc::analysis
