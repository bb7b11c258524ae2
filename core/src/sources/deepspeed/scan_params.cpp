#include "sources/deepspeed/scan_params.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "analysis/not_analysed.h"
#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/compute/placement.h"
#include "ckptdoc/compute/reduction.h"
#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/parallel.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/rank_owners.h"
#include "format/tensor_pages.h"

namespace ckptdoc::deepspeed::detail {

using analysis::DeviceShare;
using analysis::DiagnoseOptions;
using analysis::for_each_not_analysed_reason;
using analysis::ParamReport;
using analysis::RankMoments;
using analysis::Severity;
namespace {

constexpr int64_t kMaxTaskElements = int64_t{1} << 22;  // split big fragments so all workers stay busy
constexpr size_t kBatchTasks = 512;                     // results merged in order, batch by batch
// A task reading at least this many elements hands its pages back at once (a batch of such tasks would hold
// gigabytes); smaller ones only with their batch (release_batch, which hands back every task's pages once
// more), in a few coalesced ranges per file instead of one madvise (and one TLB shoot-down on every core) per
// tensor per task: with thousands of small params that was a tenth of the scan.
constexpr int64_t kReleaseNowElements = int64_t{1} << 16;
// ... and a batch ends once its small tasks would keep this much resident (peak RSS of diagnose on the
// 1B-param ZeRO-3 dp-64 checkpoint of tests/bench/make_1b_dp64.sh: 290 MiB without this bound, 190 MiB with
// it).
constexpr uint64_t kBatchSmallBytes = uint64_t{48} << 20;

// One contiguous run of one param on one rank.
struct Task {
  int group = 0, param = 0, rank = 0;
  int64_t param_offset = 0, partition_offset = 0, numel = 0;
  uint64_t bytes = 0;  // what it is expected to read, from the catalog (progress, device placement)
};

struct TaskResult {
  std::optional<DivergenceStats> div;
  std::optional<ValueStats> lp, fp32, exp_avg, exp_avg_sq;
  uint64_t bytes = 0;
  uint64_t short_elements = 0;  // elements past the end of a saved tensor (fp32 or a moment): not analysed
};

// The mapped flat tensors of one (group, rank) (contiguous copies of the rare strided ones).
struct PartitionViews {
  std::optional<Tensor> fp32, exp_avg, exp_avg_sq;
};

Tensor contiguous(const Tensor& t) {
  return Tensor::from_bytes(t.dtype, {t.numel()}, t.to_bytes());
}

// Whether the catalog already names a problem with this rank's files (missing, truncated, unreadable, a lost
// moment): the scan then counts what it cannot read, without a second finding for the same cause.
bool catalog_names_rank(const model::Catalog& cat, int rank) {
  for (const auto& p : cat.problems)
    if (p.severity == model::Severity::Error &&
        std::find(p.ranks.begin(), p.ranks.end(), rank) != p.ranks.end() &&
        (p.code.rfind("rank-file-", 0) == 0 ||
         p.code == model::code_name(model::Code::OptimizerStateIncomplete)))
      return true;
  return false;
}

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
    make_backends(out);

    // Reports in catalog order; lp views per param; partition views per (group, rank).
    size_t params = 0;
    for (const auto& g : cat.groups) params += g.params.size();
    reports_.reserve(params);  // (a report is large: growing the vector moved 20k of them several times)
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
    if (mpi_size() > 1) {
      const auto& groups = cat.groups;
      owners_ = deepspeed::rank_owners(
          cat, groups.empty() ? cat.dp_world_size : static_cast<int>(groups.front().partitions.size()));
    }
    std::vector<Task> tasks = make_tasks();
    estimate_tasks(tasks, out);

    uint64_t total = 0;
    for (const auto& t : tasks) total += t.bytes;
    if (progress_) progress_->set_stage("scanning tensors", total);

    if (spread_)
      scan_spread(tasks, out);
    else
      scan_shared(tasks, out);
    // Groups no task read (no fragment on this process's ranks) still count what cannot be analysed.
    for (const auto& g : cat.groups)
      if (!visited_.count(g.index)) {
        load_group(g, out);
        release_group(g.index);
      }
    if (mpi_size() > 1) merge_across_processes(out);
    if (changed_) std::rethrow_exception(changed_);
    out.params = std::move(reports_);
    return out;
  }

 private:
  // CPU: one single-threaded backend per worker thread, all pulling from one queue. CUDA: one backend per
  // GPU this process drives, each given whole rank files (spread_).
  void make_backends(ScanResult& out) {
    backends_.clear();
    if (options_.emulated_devices > 0) {
      for (unsigned i = 0; i < options_.emulated_devices; ++i) backends_.push_back(make_cpu_backend(1));
      spread_ = true;
      out.backend =
          backends_[0]->description() + " x " + std::to_string(backends_.size()) + " emulated devices";
      return;
    }
    std::string note;
    std::unique_ptr<Backend> primary = make_backend(options_.device, &note);
    out.backend = primary->description();
    if (primary->kind() == DeviceKind::Cpu) {
      const unsigned workers = options_.threads ? options_.threads : default_workers();
      for (unsigned i = 0; i < workers; ++i) backends_.push_back(make_cpu_backend(1));
      spread_ = false;
      return;
    }
    const std::vector<int> devices =
        devices_for_process(mpi_local_rank(), mpi_local_size(), cuda_device_count());
    device_ = devices.empty() ? 0 : devices[0];
    const unsigned cores = default_workers();
    const auto gpus = static_cast<unsigned>(std::max<size_t>(1, devices.size()));
    const unsigned per_gpu = options_.gpu_workers ? options_.gpu_workers : std::clamp(cores / gpus, 1u, 4u);
    backends_.push_back(std::move(primary));  // made on devices[0]
    for (size_t i = 0; i < devices.size(); ++i)
      for (unsigned k = (i == 0 ? 1 : 0); k < per_gpu; ++k)
        backends_.push_back(make_cuda_backend(devices[i]));
    spread_ = backends_.size() > 1;
    out.backend += " x " + std::to_string(devices.size()) + (devices.size() == 1 ? " GPU" : " GPUs") + ", " +
                   std::to_string(per_gpu) + " host " + (per_gpu == 1 ? "thread" : "threads") + " each";
  }

  // Runs tasks[batch[k]] into results[k]: workers pull positions from one counter (owner empty), or worker w
  // runs the positions with owner[k] == w. Rethrows the first failure after all workers stopped.
  void run_batch(const std::vector<Task>& tasks, const std::vector<size_t>& batch,
                 const std::vector<size_t>& owner, std::vector<TaskResult>& results) {
    results.assign(batch.size(), TaskResult{});
    auto run_one = [&](size_t k, Backend& be) {
      if (progress_) progress_->check();
      results[k] = run_task(tasks[batch[k]], be);
      if (progress_) progress_->add(tasks[batch[k]].bytes);  // the estimate, so the stage ends at its total
    };
    if (owner.empty()) {  // any worker, each with its own backend
      parallel_for(batch.size(), static_cast<unsigned>(backends_.size()),
                   [&](size_t k, unsigned w) { run_one(k, *backends_[w]); });
      return;
    }
    std::atomic<bool> failed{false};
    run_on_workers(static_cast<unsigned>(backends_.size()), [&](unsigned w) {
      try {
        for (size_t k = 0; k < batch.size() && !failed.load(); ++k)
          if (owner[k] == w) run_one(k, *backends_[w]);
      } catch (...) {
        failed.store(true);
        throw;
      }
    });
  }

  // Batches of consecutive tasks, merged in task order.
  void scan_shared(const std::vector<Task>& tasks, ScanResult& out) {
    std::vector<TaskResult> results;
    for (size_t start = 0; start < tasks.size();) {
      std::vector<size_t> batch;
      uint64_t small_bytes = 0;
      for (size_t i = start; i < tasks.size() && batch.size() < kBatchTasks && small_bytes < kBatchSmallBytes;
           ++i) {
        batch.push_back(i);
        if (tasks[i].numel < kReleaseNowElements) small_bytes += tasks[i].bytes;
      }
      open_views(tasks, batch, out);
      run_batch(tasks, batch, {}, results);
      for (size_t k = 0; k < batch.size(); ++k) merge(tasks[batch[k]], results[k], out);
      release_batch(tasks, batch);
      close_views(tasks, batch);
      start += batch.size();
    }
  }

  // Each rank's tasks go to the device place_ranks gives it; every round takes the next tasks of every
  // device's queue so all devices stay busy, and merges them in task order (deterministic for a given
  // number of devices).
  void scan_spread(const std::vector<Task>& tasks, ScanResult& out) {
    std::map<int, uint64_t> bytes_per_rank;
    for (const auto& t : tasks) bytes_per_rank[t.rank] += t.bytes;
    const std::map<int, int> slot = place_ranks(bytes_per_rank, static_cast<int>(backends_.size()));
    std::vector<std::vector<size_t>> queues(backends_.size());
    for (size_t i = 0; i < tasks.size(); ++i)
      queues[static_cast<size_t>(slot.at(tasks[i].rank))].push_back(i);
    out.devices.assign(backends_.size(), DeviceShare{});
    for (size_t w = 0; w < backends_.size(); ++w) out.devices[w].backend = backends_[w]->description();
    for (const auto& [rank, w] : slot) out.devices[static_cast<size_t>(w)].ranks.push_back(rank);

    const size_t per_round = std::max<size_t>(32, kBatchTasks / backends_.size());
    std::vector<TaskResult> results;
    for (size_t round = 0;; ++round) {
      std::vector<std::pair<size_t, size_t>> picked;  // (task index, worker)
      for (size_t w = 0; w < queues.size(); ++w)
        for (size_t j = round * per_round; j < std::min(queues[w].size(), (round + 1) * per_round); ++j)
          picked.emplace_back(queues[w][j], w);
      if (picked.empty()) break;
      std::sort(picked.begin(), picked.end());
      std::vector<size_t> batch, owner;
      for (const auto& [i, w] : picked) {
        batch.push_back(i);
        owner.push_back(w);
      }
      open_views(tasks, batch, out);
      run_batch(tasks, batch, owner, results);
      for (size_t k = 0; k < batch.size(); ++k) {
        merge(tasks[batch[k]], results[k], out);
        out.devices[owner[k]].bytes += results[k].bytes;  // what it read, not the estimate
      }
      release_batch(tasks, batch);
      close_views(tasks, batch);
    }
  }

  void build_param_index() {
    size_t n = 0;
    for (const auto& g : ckpt_.catalog().groups) {
      group_first_[g.index] = n;
      n += g.params.size();
    }
  }

  ParamReport& report_of(int group, int param) {
    return reports_[group_first_.at(group) + static_cast<size_t>(param)];
  }

  // What each task will read, from the catalog alone: the progress total and the spreading of ranks over
  // devices need only that, so every file is opened once, by the scan (a universal folder has 3-4 per param).
  // The views of a group are opened before the first batch reading it and dropped after its last: a
  // checkpoint may have more files than a process can keep mapped.
  void estimate_tasks(std::vector<Task>& tasks, ScanResult& out) {
    const auto& cat = ckpt_.catalog();
    const uint64_t per_element =
        element_size(cat.lp_dtype) +
        (options_.masters_only ? 1 : 3) * element_size(DType::F32);  // lp, fp32, moments
    for (auto& task : tasks) {
      task.bytes = static_cast<uint64_t>(task.numel) * per_element;
      ++tasks_left_[task.group];
    }
    if (mpi_rank() == 0)
      for (const auto& f : cat.frozen_params)
        out.not_analysed["frozen"] += static_cast<uint64_t>(std::max<int64_t>(f.numel, 0));
  }

  void open_views(const std::vector<Task>& tasks, const std::vector<size_t>& batch, ScanResult& out) {
    for (size_t i : batch) {
      const int g = tasks[i].group;
      if (loaded_.insert(g).second) load_group(group_layout(g), out);
    }
  }

  void close_views(const std::vector<Task>& tasks, const std::vector<size_t>& batch) {
    for (size_t i : batch)
      if (--tasks_left_[tasks[i].group] == 0) release_group(tasks[i].group);
  }

  const deepspeed::GroupLayout& group_layout(int index) {
    if (layouts_.empty())
      for (const auto& g : ckpt_.catalog().groups) layouts_[g.index] = &g;
    const auto it = layouts_.find(index);
    if (it == layouts_.end())
      throw Error(ErrorKind::InvalidRequest, "", "group " + std::to_string(index), "not in the catalog");
    return *it->second;
  }

  // Checks, then drops a group's views: a file opened for them alone (a universal param's) that shrank while
  // mapped is remembered here and thrown once the scan is over (under MPI, after every process merged), so
  // its zeros never reach a report.
  void release_group(int group) {
    loaded_.erase(group);
    for (auto it = partitions_.lower_bound({group, std::numeric_limits<int>::min()});
         it != partitions_.end() && it->first.first == group;) {
      for (const auto* t : {&it->second.fp32, &it->second.exp_avg, &it->second.exp_avg_sq}) {
        try {
          if (*t) (*t)->check_unchanged();
        } catch (const Error&) {
          if (!changed_) changed_ = std::current_exception();
        }
      }
      it = partitions_.erase(it);
    }
    for (auto it = lp_.lower_bound({group, std::numeric_limits<int>::min()});
         it != lp_.end() && it->first.first == group;)
      it = lp_.erase(it);
  }

  // Views on one group's partitions and lp weights (opened once per scan), counting what cannot be analysed.
  void load_group(const deepspeed::GroupLayout& g, ScanResult& acc) {
    visited_.insert(g.index);
    const auto& cat = ckpt_.catalog();
    const bool zero3 = cat.wrapper == deepspeed::OptimizerWrapper::Zero3;
    const bool counts_params = mpi_rank() == 0;  // per-param counts once, not once per process
    for (const auto& part : g.partitions) {
      if (!owns(part.rank)) continue;  // another process reads it
      acc.not_analysed["padding"] += static_cast<uint64_t>(std::max<int64_t>(part.padding, 0));
      PartitionViews v;
      // Each tensor on its own: a rank missing one moment still has its masters analysed.
      std::vector<std::pair<std::optional<Tensor>*, const char*>> wanted = {{&v.fp32, "fp32"}};
      if (!options_.masters_only)
        wanted.insert(wanted.end(), {{&v.exp_avg, "exp_avg"}, {&v.exp_avg_sq, "exp_avg_sq"}});
      for (const auto& [slot, key] : wanted) {
        try {
          *slot = std::string(key) == "fp32" ? ckpt_.fp32_partition(g.index, part.rank)
                                             : ckpt_.moment_partition(g.index, part.rank, key);
        } catch (const Error& e) {
          slot->reset();
          const bool file_level = std::string(key) == "fp32" || !v.fp32;
          const bool counted = !failed_.insert({g.index, part.rank, key}).second;
          if (counted) {
            if (file_level) break;
            continue;
          }
          acc.not_analysed[file_level ? "rank_unreadable" : "moment_missing"] +=
              static_cast<uint64_t>(part.real_numel);
          // Any failure in a universal folder is named (its catalogued problems read as absent, not as
          // errors).
          if (cat.universal || (file_level && !catalog_names_rank(cat, part.rank)))
            acc.problems.push_back({model::Code::RankFileUnreadable,
                                    "rank " + std::to_string(part.rank) + " of group " +
                                        std::to_string(g.index) + " (" + key +
                                        ") could not be read: " + e.what(),
                                    "",
                                    {part.rank}});
          if (file_level) break;  // the file itself: its moments cannot be read either
        }
      }
      for (auto* t : {&v.fp32, &v.exp_avg, &v.exp_avg_sq})
        if (*t && !(*t)->is_contiguous()) *t = contiguous(**t);  // rare; analysed all the same
      if (v.fp32 && v.fp32->dtype != DType::F32 && v.fp32->dtype != DType::BF16 &&
          v.fp32->dtype != DType::F16)
        acc.not_analysed["fp32_not_float32"] += static_cast<uint64_t>(part.real_numel);
      if (v.fp32 && (v.fp32->dtype == DType::BF16 || v.fp32->dtype == DType::F16) && !said_16bit_masters_) {
        said_16bit_masters_ = true;
        const std::string dt = v.fp32->dtype == DType::BF16 ? "bfloat16" : "float16";
        const auto* rules = ckpt_.catalog().source_rules.get();
        const std::string setting =
            rules ? rules->masters_in_16bit_setting(v.fp32->dtype == DType::BF16) : std::string{};
        std::string message = "The master weights are saved in " + dt + ", not float32";
        if (!setting.empty()) message += " (" + setting + ")";
        message +=
            ": they are compared as they are, so a healthy master equals its 16-bit weight exactly. "
            "An export of the masters writes these values widened to float32; a refresh writes them back in ";
        message += dt;
        message += ".";
        acc.problems.emplace_back(model::Code::MastersIn16Bit, std::move(message)).details = {{"dtype", dt}};
      }
      partitions_[{g.index, part.rank}] = std::move(v);
    }
    for (size_t i = 0; i < g.params.size(); ++i) {
      const auto& p = g.params[i];
      LpView lv;
      try {
        lv.tensor = ckpt_.lp_param(p.name);
      } catch (const Error&) {
        lv.tensor = std::nullopt;
      }
      if (lv.tensor && lv.tensor->numel() != p.numel) lv.tensor = std::nullopt;  // placeholder/shape issue
      if (lv.tensor && !lv.tensor->is_contiguous())
        lv.contiguous = Tensor::from_bytes(lv.tensor->dtype, lv.tensor->shape, lv.tensor->to_bytes());
      if (counts_params) {
        const auto n = static_cast<uint64_t>(p.numel);
        if (!lv.tensor)
          acc.not_analysed[g.expert && cat.autoep ? "autoep_experts"
                           : zero3                ? "zero3_placeholders"
                                                  : "lp_missing"] += n;
        else if (lv.tensor->dtype != DType::F16 && lv.tensor->dtype != DType::BF16 &&
                 lv.tensor->dtype != DType::F32)
          acc.not_analysed["lp_dtype_unsupported"] += n;
      }
      lp_[{g.index, static_cast<int>(i)}] = std::move(lv);
    }
  }

  // Under MPI each process scans the dp ranks it owns (deepspeed::rank_owners: r % processes on a shared file
  // system, the ranks on its own storage otherwise); results are then summed.
  bool owns(int rank) const { return owners_.owner.empty() || owners_.mine(rank); }
  std::vector<Task> make_tasks() const {
    std::vector<Task> tasks;
    for (const auto& g : ckpt_.catalog().groups) {
      for (const auto& part : g.partitions) {
        if (!owns(part.rank)) continue;
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

  TaskResult run_task(const Task& t, Backend& be) const {
    TaskResult r;
    const auto& pv = partitions_.at({t.group, t.rank});
    const auto n = static_cast<size_t>(t.numel);
    const uint8_t* fp32 = pv.fp32 ? element_ptr(*pv.fp32, t.partition_offset, t.numel) : nullptr;
    if (pv.fp32 && !fp32) r.short_elements += n;  // the saved partition ends before this fragment
    const Tensor* lpt = lp_tensor(t.group, t.param);
    const uint8_t* lp = lpt ? element_ptr(*lpt, t.param_offset, t.numel) : nullptr;
    // Masters saved in 16 bits (e.g. DeepSpeed's fp16/bf16_master_weights_and_grads) are compared as their
    // exact float values: a bf16 master of a bf16 weight rounds to itself, so "exact" means equal there, as
    // it should.
    const bool comparable =
        lp && (lpt->dtype == DType::F16 || lpt->dtype == DType::BF16 || lpt->dtype == DType::F32);
    // The stale-master check needs the divergence alone: no value histograms, and nothing where there is no
    // 16-bit weight to compare with (ZeRO-3's placeholders).
    if (options_.masters_only && !comparable) return r;
    std::vector<float> widened;
    const float* master = nullptr;
    if (fp32 && pv.fp32->dtype == DType::F32 && reinterpret_cast<uintptr_t>(fp32) % alignof(float) == 0) {
      master = reinterpret_cast<const float*>(fp32);
    } else if (fp32 && pv.fp32->dtype == DType::F32) {
      // A legacy (non-zip) torch file's storages are mapped wherever they fall, most not on 4 bytes, and the
      // kernels read masters as floats: copy this task's elements (at most kMaxTaskElements).
      widened.resize(n);
      std::memcpy(widened.data(), fp32, n * sizeof(float));
      master = widened.data();
    } else if (fp32 && (pv.fp32->dtype == DType::BF16 || pv.fp32->dtype == DType::F16)) {
      widened.resize(n);
      be.upcast(fp32, pv.fp32->dtype, widened.data(), n);
      master = widened.data();
    }
    const size_t master_bytes = master ? n * element_size(pv.fp32->dtype) : 0;
    if (master && comparable && options_.masters_only) {
      r.div = be.divergence(lp, lpt->dtype, master, n);
      r.bytes += master_bytes + n * element_size(lpt->dtype);
    } else if (master && comparable) {
      // both sides' statistics and their divergence in one pass over the two arrays
      FragmentStats f = be.fragment_stats(lp, lpt->dtype, master, n);
      r.fp32 = f.fp32;
      r.lp = f.lp;
      r.div = f.divergence;
      r.bytes += master_bytes + n * element_size(lpt->dtype);
    } else {
      if (master) {
        r.fp32 = be.value_stats(master, DType::F32, n);
        r.bytes += master_bytes;
      }
      if (lp) {
        r.lp = be.value_stats(lp, lpt->dtype, n);
        r.bytes += n * element_size(lpt->dtype);
        if (master) r.div = be.divergence(lp, lpt->dtype, master, n);
      }
    }
    if (pv.exp_avg) {
      if (const uint8_t* m = element_ptr(*pv.exp_avg, t.partition_offset, t.numel)) {
        r.exp_avg = be.value_stats(m, pv.exp_avg->dtype, n);
        r.bytes += n * element_size(pv.exp_avg->dtype);
      } else {
        r.short_elements += n;
      }
    }
    if (pv.exp_avg_sq) {
      if (const uint8_t* v = element_ptr(*pv.exp_avg_sq, t.partition_offset, t.numel)) {
        r.exp_avg_sq = be.value_stats(v, pv.exp_avg_sq->dtype, n);
        r.bytes += n * element_size(pv.exp_avg_sq->dtype);
      } else {
        r.short_elements += n;
      }
    }
    // Read once: hand the mapped pages back (they stay in the page cache), so a pass over a checkpoint keeps
    // a small resident set instead of growing by everything it read. Small tasks: with their batch only.
    if (t.numel >= kReleaseNowElements) {
      for (const auto* x : {&pv.fp32, &pv.exp_avg, &pv.exp_avg_sq})
        if (*x) release_pages(**x, t.partition_offset, t.numel);
      if (lpt) release_pages(*lpt, t.param_offset, t.numel);
    }
    return r;
  }

  // Every page the batch read, handed back in ranges coalesced per file (neighbouring tensors of a rank
  // partition, and the records of a model file, lie side by side) and widened to whole 2 MiB blocks: the page
  // cache holds file data in large folios (ext4 and XFS on Linux 6.x), and a fault maps a whole folio, so a
  // task reading the first bytes of a folio maps back pages that the task before it already released. Without
  // this ZeRO-3 at dp 64 kept ~30 MB of every rank file mapped, 1.9 GB for a 1B model. Releasing a page
  // another thread still reads costs it one more fault, never a wrong value (read-only file pages).
  void release_batch(const std::vector<Task>& tasks, const std::vector<size_t>& batch) const {
    struct Range {
      const MappedFile* file;
      uint64_t begin, end;
      bool operator<(const Range& o) const { return std::tie(file, begin) < std::tie(o.file, o.begin); }
    };
    constexpr uint64_t kBlock = 2 << 20;
    std::vector<Range> ranges;
    auto add = [&](const Tensor* t, int64_t first, int64_t n) {
      if (!t || !t->storage || !t->storage->file || n <= 0) return;
      const uint64_t es = element_size(t->dtype);
      const uint64_t at = t->storage->file_offset + static_cast<uint64_t>(t->storage_offset + first) * es;
      const uint64_t end = at + static_cast<uint64_t>(n) * es;
      ranges.push_back({t->storage->file.get(), at / kBlock * kBlock, (end + kBlock - 1) / kBlock * kBlock});
    };
    for (size_t i : batch) {
      const Task& t = tasks[i];
      const auto& pv = partitions_.at({t.group, t.rank});
      for (const auto* x : {&pv.fp32, &pv.exp_avg, &pv.exp_avg_sq})
        if (*x) add(&**x, t.partition_offset, t.numel);
      add(lp_tensor(t.group, t.param), t.param_offset, t.numel);
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 0; i < ranges.size();) {
      Range r = ranges[i];
      for (++i; i < ranges.size() && ranges[i].file == r.file && ranges[i].begin <= r.end; ++i)
        r.end = std::max(r.end, ranges[i].end);
      r.file->dont_need(r.begin, r.end - r.begin);
    }
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
    if (r.short_elements) out.not_analysed["partition_short"] += r.short_elements;
    merge_into(p.lp, r.lp);
    merge_into(p.fp32, r.fp32);
    merge_into(p.exp_avg, r.exp_avg);
    merge_into(p.exp_avg_sq, r.exp_avg_sq);
    if (r.exp_avg || r.exp_avg_sq) {
      analysis::RankMoments& m = p.moments_by_rank[t.rank];
      if (r.exp_avg) {
        m.exp_avg_count += r.exp_avg->finite_count();
        m.exp_avg_sum_sq += r.exp_avg->sum_sq;
      }
      if (r.exp_avg_sq) {
        m.exp_avg_sq_count += r.exp_avg_sq->finite_count();
        m.exp_avg_sq_sum += r.exp_avg_sq->sum;
      }
    }
    if (r.div) {
      if (!p.lp_vs_fp32) p.lp_vs_fp32 = DivergenceStats{};
      p.lp_vs_fp32->merge(*r.div);
      p.per_rank[t.rank].merge(*r.div);
    }
  }

  // The ranks holding a fragment of param i of group g, in catalog order (the same on every process).
  static std::vector<int> ranks_of(const deepspeed::GroupLayout& g, size_t i) {
    std::vector<int> ranks;
    for (const auto& part : g.partitions)
      for (const auto& f : part.fragments)
        if (f.param == static_cast<int>(i)) ranks.push_back(part.rank);
    return ranks;
  }

  // Collective: every process packs the same params and ranks in the same order into four flat arrays, one
  // all-reduce merges them (NCCL between GPUs where it loads, else MPI), and every process unpacks the
  // totals.
  void merge_across_processes(ScanResult& out) {
    static const char* kKinds[] = {"lp", "fp32", "exp_avg", "exp_avg_sq"};
    ReductionArrays a;
    for (const auto& g : ckpt_.catalog().groups) {
      for (size_t i = 0; i < g.params.size(); ++i) {
        ParamReport& p = report_of(g.index, static_cast<int>(i));
        for (auto* s : {&p.lp, &p.fp32, &p.exp_avg, &p.exp_avg_sq}) pack(s->value_or(ValueStats{}), a);
        pack(p.lp_vs_fp32.value_or(DivergenceStats{}), a);
        for (int r : ranks_of(g, i)) {
          pack(p.per_rank.count(r) ? p.per_rank.at(r) : DivergenceStats{}, a);
          for (const char* k : kKinds) {
            auto it = p.nonfinite_by_rank.find(k);
            a.counts.push_back(it != p.nonfinite_by_rank.end() && it->second.count(r) ? it->second.at(r) : 0);
          }
          const auto m = p.moments_by_rank.count(r) ? p.moments_by_rank.at(r) : analysis::RankMoments{};
          a.counts.insert(a.counts.end(), {m.exp_avg_count, m.exp_avg_sq_count});
          a.sums.insert(a.sums.end(), {m.exp_avg_sum_sq, m.exp_avg_sq_sum});
        }
      }
    }
    a.counts.push_back(out.bytes_scanned);
    for_each_not_analysed_reason([&](const char* k) { a.counts.push_back(out.not_analysed[k]); });

    std::string note;
    std::unique_ptr<Reducer> reducer = make_reducer(backends_[0]->kind(), device_, &note);
    reducer->allreduce(a);

    UnpackCursor c;
    for (const auto& g : ckpt_.catalog().groups) {
      for (size_t i = 0; i < g.params.size(); ++i) {
        ParamReport& p = report_of(g.index, static_cast<int>(i));
        for (auto* s : {&p.lp, &p.fp32, &p.exp_avg, &p.exp_avg_sq}) {
          ValueStats v;
          unpack(a, c, v);
          *s = v.count ? std::optional<ValueStats>(v) : std::nullopt;
        }
        DivergenceStats d;
        unpack(a, c, d);
        p.lp_vs_fp32 = d.count ? std::optional<DivergenceStats>(d) : std::nullopt;
        p.per_rank.clear();
        p.nonfinite_by_rank.clear();
        p.moments_by_rank.clear();
        for (int r : ranks_of(g, i)) {
          DivergenceStats rd;
          unpack(a, c, rd);
          if (rd.count) p.per_rank[r] = rd;
          for (const char* k : kKinds)
            if (const uint64_t n = a.counts.at(c.counts++)) p.nonfinite_by_rank[k][r] = n;
          analysis::RankMoments m;
          m.exp_avg_count = a.counts.at(c.counts++);
          m.exp_avg_sq_count = a.counts.at(c.counts++);
          m.exp_avg_sum_sq = a.sums.at(c.sums++);
          m.exp_avg_sq_sum = a.sums.at(c.sums++);
          if (m.exp_avg_count || m.exp_avg_sq_count) p.moments_by_rank[r] = m;
        }
      }
    }
    out.bytes_scanned = a.counts.at(c.counts++);
    for_each_not_analysed_reason([&](const char* k) { out.not_analysed[k] = a.counts.at(c.counts++); });
    out.backend += " x " + std::to_string(mpi_size()) + " MPI processes, merged by " + reducer->name();
    if (!note.empty()) out.backend += " (" + note + ")";
  }

  const deepspeed::Checkpoint& ckpt_;
  DiagnoseOptions options_;
  Progress* progress_;
  std::vector<std::unique_ptr<Backend>> backends_;
  bool spread_ = false;  // whole rank files per backend (several GPUs) instead of one shared queue
  int device_ = 0;       // this process's first CUDA device (the NCCL communicator's)
  std::vector<ParamReport> reports_;
  std::map<int, size_t> group_first_;
  std::map<std::pair<int, int>, PartitionViews> partitions_;
  std::map<std::pair<int, int>, LpView> lp_;
  std::map<int, const deepspeed::GroupLayout*> layouts_;  // by group index
  std::set<int> loaded_;                                  // groups whose views are open
  std::set<int> visited_;                                 // groups whose views were opened (each once)
  bool said_16bit_masters_ = false;                       // the masters-in-16-bit note, once
  std::set<std::tuple<int, int, std::string>>
      failed_;                        // (group, rank, tensor) that could not be read: counted
  std::map<int, size_t> tasks_left_;  // per group: tasks not yet merged
  std::exception_ptr changed_;        // the first file found changed while its views were open
  deepspeed::RankOwners owners_;      // under MPI only
};

}  // namespace

ScanResult scan_params(const deepspeed::Checkpoint& ckpt, const DiagnoseOptions& options,
                       Progress* progress) {
  return Scanner(ckpt, options, progress).run();
}

}  // namespace ckptdoc::deepspeed::detail
