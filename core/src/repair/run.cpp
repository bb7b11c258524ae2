// run_repair: writes the repaired checkpoint into "<output>.ckptdoc-partial-<pid>" (every file through
// AtomicFile on the injectable FileIo), renames it into place, then re-opens and re-diagnoses it.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/compute/exchange.h"
#include "ckptdoc/deepspeed/layout.h"
#include "ckptdoc/deepspeed/writer.h"
#include "ckptdoc/error.h"
#include "ckptdoc/repair/plan.h"
#include "repair/distributed_repartition.h"
#include "repair/sources.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair {

using deepspeed::FileRole;
using deepspeed::FloatFill;
using deepspeed::GroupLayout;
using deepspeed::OptimizerWrapper;
using deepspeed::ParamEntry;
using namespace detail;

namespace {

void check_io(int err, const std::string& path, const char* call) {
  if (err != 0 && !(err == EEXIST && std::string(call) == "mkdir"))
    throw Error(path, "", std::string(call) + ": " + std::strerror(err));
}

Value* need(Value* v, const char* key, const std::string& file) {
  Value* c = v ? v->get_mut(key) : nullptr;
  if (!c) throw Error(file, std::string("key '") + key + "'", "missing");
  return c;
}

void erase_group_steps(Value* param_groups) {
  if (!param_groups || !param_groups->is_sequence()) return;
  for (auto& g : param_groups->items_mut())
    if (g.is_dict()) g.erase("step");
}

// Fills flat elements [first, first+n) of a flat (or ZeRO-3 partition) layout from a per-param reader.
using ParamRead = std::function<void(const std::string& name, int64_t first, int64_t n, float* out)>;

void fill_zero12_flat(const GroupLayout& g, int64_t flat_first, int64_t n, float* out, const ParamRead& read) {
  int64_t done = 0;
  size_t k = 0;
  while (k < g.params.size() && g.params[k].offset + g.params[k].numel <= flat_first) ++k;
  while (done < n) {
    const int64_t at = flat_first + done;
    if (k >= g.params.size() || at < g.params[k].offset) {
      const int64_t stop = k < g.params.size() ? std::min(n, g.params[k].offset - flat_first) : n;
      std::fill(out + done, out + stop, 0.0f);
      done = stop;
      continue;
    }
    const auto& p = g.params[k];
    const int64_t in = at - p.offset;
    const int64_t take = std::min(n - done, p.numel - in);
    if (take > 0) read(p.name, in, take, out + done);
    done += std::max<int64_t>(take, 0);
    ++k;
  }
}

void fill_zero3_part(const GroupLayout& g, int rank, int dp, int64_t first, int64_t n, float* out, const ParamRead& read) {
  int64_t done = 0;
  for (const auto& p : g.params) {
    const int64_t part = deepspeed::zero3_partition_numel(p.numel, dp);
    if (p.offset + part <= first + done) continue;
    if (p.offset >= first + n) break;
    const int64_t j = first + done - p.offset;
    const int64_t run = std::min(n - done, part - j);
    const int64_t e = static_cast<int64_t>(rank) * part + j;
    const int64_t real = std::clamp<int64_t>(p.numel - e, 0, run);
    if (real > 0) read(p.name, e, real, out + done);
    std::fill(out + done + real, out + done + run, 0.0f);
    done += run;
    if (done >= n) return;
  }
  std::fill(out + done, out + n, 0.0f);
}

class Runner {
 public:
  Runner(const deepspeed::Checkpoint& ckpt, const RepairRequest& rq, Plan& plan, Progress* progress, FileIo& io)
      : ckpt_(ckpt), cat_(ckpt.catalog()), rq_(rq), plan_(plan), progress_(progress), io_(io) {
    backend_ = make_backend(rq.device);
  }
  // Under MPI: this process's share of a re-partition, and whether it writes the files every storage needs
  // once (model file, `latest`, extras): the first process on each storage does.
  void distribute(const Assignment* assignment, Exchanger* exchanger, bool writes_shared_files) {
    dist_ = assignment;
    exchanger_ = exchanger;
    writes_shared_files_ = writes_shared_files;
  }
  uint64_t exchange_bytes() const { return exchange_bytes_; }
  DeviceKind backend_kind() const { return backend_->kind(); }

  void run(const std::string& out_dir) {
    out_ = out_dir;
    tag_out_ = out_ + "/" + plan_.tag;
    check_io(io_.mkdir(out_), out_, "mkdir");
    check_io(io_.mkdir(tag_out_), tag_out_, "mkdir");
    if (progress_) progress_->set_stage("writing repaired checkpoint", plan_.files.size());
    if (rq_.target)
      graft();
    else if (rq_.world_size)
      repartition();
    else
      rewrite_in_layout();
    if (writes_shared_files_) {
      copy_save_dir_extras();
      deepspeed::write_text_file(out_ + "/latest", plan_.tag, io_);
    }
    check_io(io_.fsync_dir(tag_out_), tag_out_, "fsync of directory");
    check_io(io_.fsync_dir(out_), out_, "fsync of directory");
  }

 private:
  const deepspeed::Checkpoint& ckpt_;
  const deepspeed::Catalog& cat_;
  const RepairRequest& rq_;
  Plan& plan_;
  Progress* progress_;
  FileIo& io_;
  std::unique_ptr<Backend> backend_;
  std::string out_, tag_out_;
  const Assignment* dist_ = nullptr;
  Exchanger* exchanger_ = nullptr;
  bool writes_shared_files_ = true;
  uint64_t exchange_bytes_ = 0;
  const SourceLayout* src_ = nullptr;  // while repartition() runs

  void tick() {
    if (progress_) {
      progress_->check();
      progress_->add(1);
    }
  }
  FloatFill guarded(FloatFill f) const {
    Progress* p = progress_;
    return [f = std::move(f), p](int64_t first, int64_t n, float* out) {
      if (p) p->check();
      f(first, n, out);
    };
  }
  void write(const std::string& name, const Value& root) {
    deepspeed::write_checkpoint_file(tag_out_ + "/" + name, root, io_);
    tick();
  }
  void copy(const deepspeed::CheckpointFile& f) {
    deepspeed::copy_file(f.abs_path, tag_out_ + "/" + f.path, io_);
    tick();
  }
  void copy_save_dir_extras() {
    // zero_to_fp32.py and similar helpers next to the tag folder are copied; other tags are not.
    std::error_code ec;
    const fs::path script = fs::path(cat_.save_dir) / "zero_to_fp32.py";
    if (fs::is_regular_file(script, ec)) deepspeed::copy_file(script.string(), out_ + "/zero_to_fp32.py", io_);
  }
  void copy_other_files() {
    for (const auto& f : cat_.files)
      if (f.role != FileRole::Model && f.role != FileRole::Optim && fs::is_regular_file(f.abs_path)) copy(f);
  }

  // ---- refresh / reset / drop: same layout, same files ---------------------------------------------------

  void rewrite_in_layout() {
    const OptimizerWrapper w = cat_.wrapper;
    SourceLayout layout = source_layout(ckpt_);
    LpReader lp(*backend_);
    std::shared_ptr<void> keep;
    if (rq_.refresh_fp32) {
      if (w == OptimizerWrapper::Zero3)
        keep = add_file_lp(*rq_.lp_source, lp);
      else
        add_module_lp(ckpt_, layout, lp);
    }
    const ParamRead lp_read = [&lp](const std::string& name, int64_t first, int64_t n, float* out) {
      lp.read(name, first, n, out);
    };
    for (const auto& f : cat_.files) {
      if (f.role == FileRole::Model) {
        if (w == OptimizerWrapper::FP16Optimizer && (rq_.reset_optimizer || rq_.drop_optimizer)) {
          Value root = ckpt_.model_file(f.mp_rank, std::max(f.dp_rank, 0)).root.clone();
          if (rq_.drop_optimizer) {
            root.set("optimizer", Value::none());
          } else {
            Value* osd = need(need(&root, "optimizer", f.path), "optimizer_state_dict", f.path);
            osd->set("state", Value::dict());
            erase_group_steps(osd->get_mut("param_groups"));
          }
          write(f.path, root);
        } else {
          copy(f);
        }
        continue;
      }
      if (f.role != FileRole::Optim) continue;
      if (rq_.drop_optimizer) continue;
      const int r = f.dp_rank;
      Value root = ckpt_.optim_file(r, f.mp_rank).root.clone();
      Value* osd = need(&root, "optimizer_state_dict", f.path);
      if (rq_.refresh_fp32) {
        if (w == OptimizerWrapper::Zero3) {
          Value* flat = need(osd, "fp32_flat_groups", f.path);
          auto& items = flat->items_mut();
          for (size_t k = 0; k < items.size() && k < layout.groups.size(); ++k) {
            const GroupLayout& g = layout.groups[k];
            const int dp = layout.dp;
            const int64_t len = items[k].as_tensor().numel();
            items[k] = Value::tensor(deepspeed::produced_f32(
                len, guarded([&g, r, dp, lp_read](int64_t first, int64_t n, float* out) {
                  fill_zero3_part(g, r, dp, first, n, out, lp_read);
                })));
          }
        } else {
          Value* parts = need(osd, "single_partition_of_fp32_groups", f.path);
          auto& items = parts->items_mut();
          for (size_t gi = 0; gi < items.size() && gi < layout.groups.size(); ++gi) {
            const GroupLayout& g = layout.groups[gi];
            const Tensor& old = items[gi].as_tensor();
            const int64_t P = g.partition_numel;
            const int64_t L = old.numel();
            if (L > P)
              throw Error(f.abs_path, "single_partition_of_fp32_groups[" + std::to_string(gi) + "]",
                          expected_found("at most " + std::to_string(P) + " elements", std::to_string(L)));
            const int64_t base = static_cast<int64_t>(r) * P;
            items[gi] = Value::tensor(deepspeed::produced_f32(
                L, guarded([&g, base, lp_read](int64_t first, int64_t n, float* out) {
                  fill_zero12_flat(g, base + first, n, out, lp_read);
                }),
                P, old.requires_grad));
          }
        }
      }
      if (rq_.reset_optimizer) {
        Value* inner = w == OptimizerWrapper::Zero3 ? need(osd, "optimizer_state_dict", f.path)
                                                    : need(osd, "base_optimizer_state", f.path);
        if (inner->is_dict()) {
          inner->set("state", Value::dict());
          erase_group_steps(inner->get_mut("param_groups"));
        } else if (inner->is_sequence()) {  // elastic list: one dict of state per group
          for (auto& e : inner->items_mut()) e = Value::dict();
        }
        osd->erase("base_optimizer_state_step");
      }
      write(f.path, root);
    }
    copy_other_files();
  }

  // ---- repartition --world-size ---------------------------------------------------------------------------

  // Rebuilds a state entry (clone of `tmpl`) whose 1-D tensors of length `old_len` become `len`-long
  // tensors filled from `fill(key, ...)`.
  Value remap_state_entry(const Value& tmpl, int64_t old_len, int64_t len,
                          const std::function<void(const std::string&, int64_t, int64_t, float*)>& fill) const {
    Value e = tmpl.clone();
    for (auto& [k, v] : e.dict_mut().items) {
      if (!k.is(Value::Kind::Str) || !v.is_tensor()) continue;
      const Tensor& t = v.as_tensor();
      if (t.shape.size() != 1 || t.numel() != old_len) continue;
      const std::string key = k.as_str();
      v = Value::tensor(deepspeed::produced_f32(
          len, guarded([fill, key](int64_t first, int64_t n, float* out) { fill(key, first, n, out); })));
    }
    return e;
  }

  std::vector<std::string> state_keys(const Value& entry, int64_t len) const {
    std::vector<std::string> keys;
    if (!entry.is_dict()) return keys;
    for (const auto& [k, v] : entry.as_dict().items)
      if (k.is(Value::Kind::Str) && v.is_tensor() && v.as_tensor().shape.size() == 1 && v.as_tensor().numel() == len)
        keys.push_back(k.as_str());
    return keys;
  }

  // The groups of the new layout (flat groups or ZeRO-3 sub-groups) with the same params in the same order.
  struct NewLayout {
    std::vector<GroupLayout> groups;
    std::vector<std::vector<Value>> sub_ids;  // ZeRO-3: new sub-group ids per param group
    std::vector<int> old_first_sub;           // ZeRO-3: an old sub-group of each new one (state template)
  };
  NewLayout new_layout(const SourceLayout& src, const TorchFile& optim_tmpl, int n) const {
    NewLayout nl;
    if (cat_.wrapper != OptimizerWrapper::Zero3) {
      const auto rules = deepspeed::zero12_rules_for_version(cat_.ds_version);
      for (const auto& g : src.groups) {
        std::vector<ParamEntry> entries;
        for (const auto& p : g.params) entries.push_back(ParamEntry{p.name, p.shape, p.numel, 0});
        nl.groups.push_back(src.bf16_optimizer ? deepspeed::layout_bf16_optimizer(g.index, std::move(entries), n)
                                               : deepspeed::layout_zero12(g.index, std::move(entries), n, rules));
      }
      return nl;
    }
    int64_t sgs = 1000000000;
    if (const Value* cfg = model_template().root.get("ds_config"))
      if (const Value* z = cfg->get("zero_optimization"))
        if (const Value* s = z->get("sub_group_size"); s && (s->is(Value::Kind::Int) || s->is(Value::Kind::Float)))
          if (const double v = s->as_float(); v >= 1.0 && v <= 9.0e15) sgs = static_cast<int64_t>(v);
    const Value* osd0 = optim_tmpl.root.get("optimizer_state_dict");
    const Value* pgs = osd0 && osd0->get("optimizer_state_dict") ? osd0->get("optimizer_state_dict")->get("param_groups") : nullptr;
    if (!pgs || !pgs->is_sequence()) throw Error(optim_tmpl.path, "optimizer_state_dict.param_groups", "missing");
    for (const auto& pg : pgs->items()) {
      const Value* ids = pg.get("params");
      std::vector<ParamEntry> entries;
      std::vector<deepspeed::ParamSpan> spans;
      int first_old = -1;
      if (ids && ids->is_sequence())
        for (const auto& id : ids->items()) {
          const auto k = static_cast<size_t>(id.as_int());
          if (k >= src.groups.size()) throw Error(optim_tmpl.path, "param_groups params", "sub-group id out of range");
          if (first_old < 0) first_old = static_cast<int>(k);
          for (const auto& p : src.groups[k].params) {
            entries.push_back(ParamEntry{p.name, p.shape, p.numel, 0});
            spans.push_back({p.name, p.shape, p.numel});
          }
        }
      nl.sub_ids.emplace_back();
      for (const auto& sg : deepspeed::zero3_sub_groups(spans, n, sgs)) {
        std::vector<ParamEntry> sub;
        for (int i : sg) sub.push_back(entries[static_cast<size_t>(i)]);
        nl.sub_ids.back().push_back(Value::integer(static_cast<int64_t>(nl.groups.size())));
        nl.old_first_sub.push_back(first_old);
        nl.groups.push_back(deepspeed::layout_zero3(static_cast<int>(nl.groups.size()), std::move(sub), n));
      }
    }
    return nl;
  }

  // The old optimizer state entry a new group's state is modelled on (nullptr when there is none).
  const Value* old_state_entry(const Value& osd, size_t gi, const NewLayout& nl, int64_t* old_len) const {
    const bool zero3 = cat_.wrapper == OptimizerWrapper::Zero3;
    const Value* holder = zero3 ? osd.get("optimizer_state_dict") : osd.get("base_optimizer_state");
    const Value* state = holder && holder->is_dict() ? holder->get("state") : nullptr;
    const int64_t want = zero3 ? nl.old_first_sub[gi] : static_cast<int64_t>(gi);
    const SourceLayout& src = *src_;
    *old_len = src.groups[static_cast<size_t>(want)].partition_numel;
    if (state && state->is_dict())
      for (const auto& [k, v] : state->as_dict().items)
        if (k.is(Value::Kind::Int) && k.as_int() == want) return &v;
    return nullptr;
  }

  // The model file the new files copy their metadata from: rank 0's, or under MPI one this process has.
  const TorchFile& model_template() const { return ckpt_.model_file(0, dist_ ? dist_->template_rank : 0); }

  // Elements of `field` ("fp32" or a state key) of new rank r's partition of new group gi.
  using RankFill = std::function<FloatFill(size_t gi, int r, const std::string& field)>;

  // The optimizer file of new rank r: `tmpl` (an old rank's file) with every partition-shaped part rebuilt.
  Value repartitioned_optim_root(int r, int n, const TorchFile& tmpl, const NewLayout& nl, const RankFill& fill) const {
    const auto& groups = nl.groups;
    Value root = tmpl.root.clone();
    Value* osd = need(&root, "optimizer_state_dict", tmpl.path);
    auto remap = [&](size_t gi, const Value* entry, int64_t old_len) {
      return remap_state_entry(*entry, old_len, groups[gi].partition_numel,
                               // Runs when the file is written, after this function returns: copies only.
                               [fill, gi, r](const std::string& key, int64_t first, int64_t cnt, float* out) {
                                 fill(gi, r, key)(first, cnt, out);
                               });
    };
    if (cat_.wrapper != OptimizerWrapper::Zero3) {
      std::vector<Value> fp32s, paddings, counts, mappings;
      Value* bos = need(osd, "base_optimizer_state", tmpl.path);
      if (!bos->is_dict())
        throw Error(tmpl.path, "base_optimizer_state", "elastic (list) optimizer state cannot be re-partitioned yet");
      Value state = Value::dict();
      for (size_t gi = 0; gi < groups.size(); ++gi) {
        const GroupLayout& g = groups[gi];
        const auto& rp = g.partitions[static_cast<size_t>(r)];
        fp32s.push_back(Value::tensor(deepspeed::produced_f32(rp.saved_numel, guarded(fill(gi, r, "fp32")),
                                                              g.partition_numel, true)));
        paddings.push_back(Value::integer(rp.recorded_padding));
        counts.push_back(Value::integer(n));
        mappings.push_back(deepspeed::slice_mappings_value(g, r));
        int64_t old_len = 0;
        const Value* entry = old_state_entry(*osd, gi, nl, &old_len);
        if (entry && !rq_.reset_optimizer) state.set_item(Value::integer(static_cast<int64_t>(gi)), remap(gi, entry, old_len));
      }
      bos->set("state", state);
      if (rq_.reset_optimizer) erase_group_steps(bos->get_mut("param_groups"));
      osd->set("single_partition_of_fp32_groups", Value::list(std::move(fp32s)));
      if (osd->get("group_paddings")) osd->set("group_paddings", Value::list(std::move(paddings)));
      if (osd->get("groups_padding")) osd->set("groups_padding", Value::list(std::move(paddings)));
      if (osd->get("partition_count")) osd->set("partition_count", Value::list(std::move(counts)));
      if (osd->get("param_slice_mappings")) osd->set("param_slice_mappings", Value::list(std::move(mappings)));
      return root;
    }
    Value* inner = need(osd, "optimizer_state_dict", tmpl.path);
    Value state = Value::dict();
    std::vector<Value> fp32s;
    for (size_t k = 0; k < groups.size(); ++k) {
      fp32s.push_back(Value::tensor(deepspeed::produced_f32(groups[k].partition_numel, guarded(fill(k, r, "fp32")))));
      int64_t old_len = 0;
      const Value* entry = old_state_entry(*osd, k, nl, &old_len);
      if (entry && !rq_.reset_optimizer) state.set_item(Value::integer(static_cast<int64_t>(k)), remap(k, entry, old_len));
    }
    inner->set("state", state);
    Value* pgs = need(inner, "param_groups", tmpl.path);
    auto& items = pgs->items_mut();
    for (size_t gi = 0; gi < items.size() && gi < nl.sub_ids.size(); ++gi) items[gi].set("params", Value::list(nl.sub_ids[gi]));
    if (rq_.reset_optimizer) erase_group_steps(pgs);
    osd->set("fp32_flat_groups", Value::list(std::move(fp32s)));
    osd->set("partition_count", Value::integer(n));
    return root;
  }

  // The fields each new group carries: the fp32 master and, unless the optimizer is reset, the
  // partition-shaped tensors of its old state entry (exp_avg, exp_avg_sq, ...).
  std::vector<std::vector<std::string>> group_fields(const TorchFile& tmpl, const NewLayout& nl) const {
    const Value* osd = tmpl.root.get("optimizer_state_dict");
    if (!osd) throw Error(tmpl.path, "key 'optimizer_state_dict'", "missing");
    std::vector<std::vector<std::string>> fields;
    for (size_t gi = 0; gi < nl.groups.size(); ++gi) {
      fields.push_back({"fp32"});
      int64_t old_len = 0;
      const Value* entry = old_state_entry(*osd, gi, nl, &old_len);
      if (entry && !rq_.reset_optimizer)
        for (const auto& k : state_keys(*entry, old_len)) fields.back().push_back(k);
    }
    return fields;
  }

  void repartition() {
    const int n = *rq_.world_size;
    const SourceLayout src = source_layout(ckpt_);
    src_ = &src;
    const StateReader reader(ckpt_, src);
    const bool zero3 = cat_.wrapper == OptimizerWrapper::Zero3;
    const int tmpl_rank = dist_ ? dist_->template_rank : 0;
    const deepspeed::CheckpointFile* oft = cat_.optim_file(tmpl_rank);
    const bool bf16_prefix = oft && oft->bf16_prefix;
    const TorchFile& optim_tmpl = ckpt_.optim_file(tmpl_rank);
    if (!optim_tmpl.root.get("optimizer_state_dict")) throw Error(optim_tmpl.path, "key 'optimizer_state_dict'", "missing");
    const NewLayout nl = new_layout(src, optim_tmpl, n);

    // Where new partitions come from: straight from the old files, or assembled by an exchange between
    // processes that each hold some of them.
    std::unique_ptr<ExchangedPartitions> exchanged;
    RankFill fill;
    if (dist_) {
      const auto fields = group_fields(optim_tmpl, nl);
      // Every process must carry the same fields, or their collectives would pair up wrongly.
      std::string sig;
      for (const auto& f : fields)
        for (const auto& k : f) sig += k + ",";
      std::vector<uint64_t> mine{std::hash<std::string>{}(sig)}, all(static_cast<size_t>(dist_->procs));
      mpi_allgather(mine.data(), sizeof(uint64_t), all.data());
      if (std::adjacent_find(all.begin(), all.end(), std::not_equal_to<>()) != all.end())
        throw Error(optim_tmpl.path, "optimizer state", "the processes' optimizer files carry different state keys");
      exchanged = exchange_partitions(reader, nl.groups, fields, zero3, *dist_,
                                      out_ + "/.ckptdoc-scratch-" + std::to_string(dist_->me), *exchanger_, progress_);
      exchange_bytes_ = exchanged->bytes_received;
      if (progress_) progress_->set_stage("writing repaired checkpoint", plan_.files.size());
      fill = [&exchanged](size_t gi, int r, const std::string& field) {
        return exchanged->fill(r, static_cast<int>(gi), field);
      };
    } else {
      fill = [&nl, &reader, n, zero3](size_t gi, int r, const std::string& field) {
        const GroupLayout& g = nl.groups[gi];
        const ParamRead read = [&reader, field](const std::string& name, int64_t first, int64_t cnt, float* out) {
          reader.read(field, name, first, cnt, out);
        };
        if (zero3)
          return FloatFill([&g, r, n, read](int64_t first, int64_t cnt, float* out) {
            fill_zero3_part(g, r, n, first, cnt, out, read);
          });
        const int64_t base = static_cast<int64_t>(r) * g.partition_numel;
        return FloatFill([&g, base, read](int64_t first, int64_t cnt, float* out) {
          fill_zero12_flat(g, base + first, cnt, out, read);
        });
      };
    }

    for (int r = 0; r < n; ++r)
      if (!dist_ || dist_->owns(r))
        write(deepspeed::optim_file_name(bf16_prefix, r), repartitioned_optim_root(r, n, optim_tmpl, nl, fill));

    // Model files: ZeRO-1/2 has one per mp rank (written once per storage); ZeRO-3 one per dp rank.
    if (!zero3) {
      if (writes_shared_files_)
        for (const auto& f : cat_.files) {
          if (f.role != FileRole::Model) continue;
          Value root = ckpt_.model_file(f.mp_rank, 0).root.clone();
          root.set("dp_world_size", Value::integer(n));
          write(f.path, root);
        }
    } else {
      std::vector<Value> shapes;
      for (const auto& g : nl.groups) {
        Value d = deepspeed::ordered_dict();
        for (const auto& p : g.params) d.set(p.name, Value::size(p.shape));
        shapes.push_back(std::move(d));
      }
      for (int r = 0; r < n; ++r) {
        if (dist_ && !dist_->owns(r)) continue;
        Value root = model_template().root.clone();
        root.set("dp_world_size", Value::integer(n));
        root.set("param_shapes", Value::list(shapes));
        write(deepspeed::model_file_name(3, r), root);
      }
    }
    if (writes_shared_files_)
      for (const auto& f : cat_.files)
        if (f.role != FileRole::Model && f.role != FileRole::Optim && fs::is_regular_file(f.abs_path)) copy(f);
    src_ = nullptr;
  }

  // ---- repartition --target: graft onto a template's layout -----------------------------------------------

  void graft() {
    auto tmpl = deepspeed::Checkpoint::open(*rq_.target);
    const auto& tc = tmpl->catalog();
    const SourceLayout src = source_layout(ckpt_);
    const SourceLayout tl = source_layout(*tmpl);
    const StateReader sreader(ckpt_, src);
    const StateReader treader(*tmpl, tl);
    std::map<std::string, bool> carried;
    for (const auto& [name, place] : tl.params) {
      const auto it = src.params.find(name);
      carried[name] = it != src.params.end() && it->second.shape == place.shape;
    }
    const int tdp = tl.dp;
    const ParamRead fp32_read = [&](const std::string& name, int64_t first, int64_t cnt, float* out) {
      if (carried.at(name)) sreader.read("fp32", name, first, cnt, out);
      else treader.read("fp32", name, first, cnt, out);
    };
    auto moment_read = [&](const std::string& key) {
      return ParamRead([&, key](const std::string& name, int64_t first, int64_t cnt, float* out) {
        if (carried.at(name)) sreader.read(key, name, first, cnt, out);
        else std::fill(out, out + cnt, 0.0f);
      });
    };
    // A state entry of the source (rank 0, group 0) gives the step and the set of moment keys.
    const Value& sosd = ckpt_.optimizer_state(0);
    const Value* sbos = sosd.get("base_optimizer_state");
    const Value* sstate = sbos ? sbos->get("state") : nullptr;
    const Value* sentry = nullptr;
    if (sstate && sstate->is_dict() && !sstate->as_dict().items.empty()) sentry = &sstate->as_dict().items.front().second;

    for (const auto& f : tc.files) {
      if (f.role == FileRole::Optim) {
        const int r = f.dp_rank;
        Value root = tmpl->optim_file(r, f.mp_rank).root.clone();
        Value* osd = need(&root, "optimizer_state_dict", f.path);
        Value* parts = need(osd, "single_partition_of_fp32_groups", f.path);
        auto& items = parts->items_mut();
        Value* bos = need(osd, "base_optimizer_state", f.path);
        Value state = Value::dict();
        for (size_t gi = 0; gi < items.size() && gi < tl.groups.size(); ++gi) {
          const GroupLayout& g = tl.groups[gi];
          const int64_t base = static_cast<int64_t>(r) * g.partition_numel;
          const int64_t L = items[gi].as_tensor().numel();
          items[gi] = Value::tensor(deepspeed::produced_f32(
              L, guarded([&g, base, fp32_read](int64_t first, int64_t cnt, float* out) {
                fill_zero12_flat(g, base + first, cnt, out, fp32_read);
              }),
              g.partition_numel, true));
          if (sentry && !rq_.reset_optimizer) {
            const int64_t slen = src.groups.front().partition_numel;
            state.set_item(Value::integer(static_cast<int64_t>(gi)),
                           remap_state_entry(*sentry, slen, g.partition_numel,
                                             [&g, base, moment_read](const std::string& key, int64_t first, int64_t cnt,
                                                                     float* out) {
                                               fill_zero12_flat(g, base + first, cnt, out, moment_read(key));
                                             }));
          }
        }
        bos->set("state", state);
        if (rq_.reset_optimizer) erase_group_steps(bos->get_mut("param_groups"));
        // Hyper-parameters and loss scale continue from the source run.
        if (const Value* sgroups = sbos ? sbos->get("param_groups") : nullptr) {
          Value* tgroups = bos->get_mut("param_groups");
          if (tgroups && tgroups->is_sequence() && sgroups->is_sequence() &&
              tgroups->items().size() == sgroups->items().size() && !rq_.reset_optimizer) {
            for (size_t gi = 0; gi < tgroups->items().size(); ++gi) {
              Value g = sgroups->items()[gi].clone();
              g.set("params", tgroups->items()[gi].at("params").clone());
              tgroups->items_mut()[gi] = g;
            }
          }
        }
        for (const char* key : {"loss_scaler", "dynamic_loss_scale", "overflow", "clip_grad"})
          if (const Value* v = sosd.get(key); v && osd->get(key)) osd->set(key, v->clone());
        write(f.path, root);
      } else if (f.role == FileRole::Model) {
        Value root = tmpl->model_file(f.mp_rank, 0).root.clone();
        Value* module = need(&root, "module", f.path);
        for (auto& [k, v] : module->dict_mut().items) {
          if (!k.is(Value::Kind::Str)) continue;
          const auto it = carried.find(k.as_str());
          if (it == carried.end() || !it->second) continue;
          if (auto t = ckpt_.lp_param(k.as_str())) v = Value::tensor(*t);
        }
        const Value& sroot = ckpt_.model_file(0, 0).root;
        for (const char* key : {"global_steps", "global_samples", "skipped_steps", "lr_scheduler"})
          if (const Value* v = sroot.get(key)) root.set(key, v->clone());
        root.set("dp_world_size", Value::integer(tdp));
        write(f.path, root);
      } else if (fs::is_regular_file(f.abs_path)) {
        deepspeed::copy_file(f.abs_path, tag_out_ + "/" + f.path, io_);
      }
    }
  }
};

void remove_tree_quietly(const std::string& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}


// Storage discovery under MPI: every process drops a marker in the shared partial folder name; the
// markers a process sees tell which processes write to the same storage as it does.
struct StorageView {
  int leader = 0;         // lowest process on this storage: writes the shared files and renames
  bool sees_all = false;  // every process on this storage (shared file system)
};
StorageView discover_storage(const std::string& partial) {
  const int procs = mpi_size(), me = mpi_rank();
  const std::string marker = partial + "/.ckptdoc-process-" + std::to_string(me);
  std::string err;
  try {
    std::error_code ec;
    fs::create_directories(partial, ec);
    if (ec) throw Error(partial, "", "cannot create the output folder: " + ec.message());
    std::ofstream(marker).put('\n');
    if (!fs::exists(marker)) throw Error(marker, "", "cannot write in the output folder");
  } catch (const std::exception& e) {
    err = e.what();
  }
  if (const std::string e = mpi_first_error(err); !e.empty()) throw Error("", "distributed repair", e);
  mpi_barrier();
  StorageView v;
  v.leader = me;
  int seen = 0;
  for (int p = 0; p < procs; ++p)
    if (fs::exists(partial + "/.ckptdoc-process-" + std::to_string(p))) {
      v.leader = std::min(v.leader, p);
      ++seen;
    }
  v.sees_all = seen == procs;
  mpi_barrier();
  std::error_code ec;
  fs::remove(marker, ec);
  mpi_barrier();
  return v;
}

std::string rank_ranges(const Assignment& a) {
  std::vector<int> mine;
  for (int r = 0; r < static_cast<int>(a.new_owner.size()); ++r)
    if (a.owns(r)) mine.push_back(r);
  if (mine.empty()) return "none";
  return mine.size() == 1 ? std::to_string(mine.front())
                          : std::to_string(mine.front()) + "-" + std::to_string(mine.back());
}

// Every process runs this (see RepairRequest::across_processes); each failure is agreed so that all
// processes stop together and leave nothing behind.
RepairResult run_repair_across_processes(const deepspeed::Checkpoint& ckpt, const std::string& output,
                                         const RepairRequest& rq, Progress* progress, FileIo& io) {
  auto agree = [](const std::string& mine) {
    if (const std::string e = mpi_first_error(mine); !e.empty()) throw Error("", "distributed repair", e);
  };
  RepairResult result;
  std::string err;
  try {
    result.plan = make_plan(ckpt, output, rq);
  } catch (const std::exception& e) {
    err = e.what();
  }
  agree(err);
  const std::string out = result.plan.output;
  int64_t pid0 = ::getpid();
  mpi_broadcast(&pid0, sizeof pid0, 0);
  const std::string partial = out + ".ckptdoc-partial-" + std::to_string(pid0);
  const StorageView storage = discover_storage(partial);
  const bool leader = storage.leader == mpi_rank();
  const int old_dp = ckpt.catalog().groups.empty() ? ckpt.catalog().dp_world_size
                                                   : static_cast<int>(ckpt.catalog().groups.front().partitions.size());
  bool renamed = false;
  try {
    const Assignment assignment = assign_ranks(ckpt.catalog(), old_dp, *rq.world_size);
    std::string note;
    Runner runner(ckpt, rq, result.plan, progress, io);
    const std::vector<int> gpus = devices_for_process(mpi_local_rank(), mpi_local_size(), cuda_device_count());
    const auto exchanger = make_exchanger(runner.backend_kind(), gpus.empty() ? 0 : gpus.front(), &note);
    runner.distribute(&assignment, exchanger.get(), leader);
    try {
      runner.run(partial);
    } catch (const std::exception& e) {
      err = e.what();
    }
    agree(err);
    // Totals for the report: bytes that crossed between processes.
    ReductionArrays sums;
    sums.counts.push_back(runner.exchange_bytes());
    mpi_allreduce(sums);
    result.distribution = std::to_string(assignment.procs) + " processes, slices exchanged over " +
                          exchanger->name() + " (" + std::to_string(sums.counts[0]) +
                          " bytes between processes); this process (" + std::to_string(assignment.me) +
                          ") wrote new rank(s) " + rank_ranges(assignment) +
                          (storage.sees_all ? " on shared storage" : " on its own storage") +
                          (note.empty() ? "" : "; " + note);
    // Each storage's first process publishes it: the same rename as one process does, once per storage.
    try {
      if (leader) {
        std::error_code ec;
        if (fs::exists(out, ec)) {
          fs::remove_all(out, ec);
          if (ec) throw Error(out, "", "cannot replace the existing output: " + ec.message());
        }
        check_io(io.rename(partial, out), out, "rename");
        renamed = true;
        fs::path parent = fs::path(out).parent_path();
        check_io(io.fsync_dir(parent.empty() ? std::string(".") : parent.string()), parent.string(),
                 "fsync of directory");
      }
    } catch (const std::exception& e) {
      err = e.what();
    }
    agree(err);
  } catch (...) {
    remove_tree_quietly(renamed ? out : partial);
    throw;
  }
  result.output = out;
  // Verification: a diagnosis across the processes, each reading the new rank files it sees (as diagnose
  // under mpirun does), and the loader invariants of the whole output where every process sees it all (a
  // shared file system), else of the files on each process's own storage.
  std::vector<uint8_t> all(static_cast<size_t>(mpi_size()));
  const uint8_t mine = storage.sees_all ? 1 : 0;
  mpi_allgather(&mine, 1, all.data());
  result.verified_as_whole = std::all_of(all.begin(), all.end(), [](uint8_t v) { return v == 1; });
  auto written = deepspeed::Checkpoint::open(out);
  analysis::DiagnoseOptions dopt;
  dopt.device = rq.device;
  if (progress) progress->set_stage("verifying", 0);
  result.verification = analysis::diagnose(*written, dopt, progress);
  result.invariant_failures = check_loader_invariants(*written, /*only_present_files=*/!result.verified_as_whole);
  result.verified_clean = !result.verification.has_error();
  return result;
}

}  // namespace

RepairResult run_repair(const deepspeed::Checkpoint& ckpt, const std::string& output, const RepairRequest& request,
                        Progress* progress, FileIo& io) {
  const RepairRequest rq = with_default_lp_source(ckpt, request);
  if (rq.across_processes && mpi_size() > 1) return run_repair_across_processes(ckpt, output, rq, progress, io);
  RepairResult result;
  result.plan = make_plan(ckpt, output, rq);
  const std::string out = result.plan.output;
  const std::string partial = out + ".ckptdoc-partial-" + std::to_string(::getpid());
  remove_tree_quietly(partial);
  bool renamed = false;
  try {
    Runner runner(ckpt, rq, result.plan, progress, io);
    runner.run(partial);
    std::error_code ec;
    if (fs::exists(out, ec)) {
      // make_plan allowed it: empty, or --force.
      fs::remove_all(out, ec);
      if (ec) throw Error(out, "", "cannot replace the existing output: " + ec.message());
    }
    check_io(io.rename(partial, out), out, "rename");
    renamed = true;
    fs::path parent = fs::path(out).parent_path();
    check_io(io.fsync_dir(parent.empty() ? std::string(".") : parent.string()), parent.string(), "fsync of directory");
  } catch (...) {
    // Nothing half-done stays behind: not the partial folder, nor an output whose durability is unknown.
    remove_tree_quietly(renamed ? out : partial);
    throw;
  }
  result.output = out;
  auto written = deepspeed::Checkpoint::open(out);
  analysis::DiagnoseOptions dopt;
  dopt.device = rq.device;
  if (progress) progress->set_stage("verifying", 0);
  result.verification = analysis::diagnose(*written, dopt, progress);
  result.verified_clean = !result.verification.has_error();
  result.invariant_failures = check_loader_invariants(*written);
  return result;
}

}  // namespace ckptdoc::repair
