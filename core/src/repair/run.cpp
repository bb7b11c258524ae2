// run_repair: writes the repaired checkpoint into "<output>.ckptdoc-partial-<pid>" (every file through
// AtomicFile on the injectable FileIo), renames it into place, then re-opens and re-diagnoses it.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/deepspeed/layout.h"
#include "ckptdoc/deepspeed/writer.h"
#include "ckptdoc/error.h"
#include "ckptdoc/repair/plan.h"
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
    copy_save_dir_extras();
    deepspeed::write_text_file(out_ + "/latest", plan_.tag, io_);
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

  void repartition() {
    const int n = *rq_.world_size;
    const SourceLayout src = source_layout(ckpt_);
    const StateReader reader(ckpt_, src);
    const bool zero3 = cat_.wrapper == OptimizerWrapper::Zero3;
    const deepspeed::CheckpointFile* of0 = cat_.optim_file(0);
    const bool bf16_prefix = of0 && of0->bf16_prefix;
    const TorchFile& optim0 = ckpt_.optim_file(0);
    const Value* osd0 = optim0.root.get("optimizer_state_dict");
    if (!osd0) throw Error(optim0.path, "key 'optimizer_state_dict'", "missing");

    // New groups (flat groups or ZeRO-3 sub-groups) with the same params in the same order.
    std::vector<GroupLayout> groups;
    std::vector<std::vector<Value>> sub_ids;  // ZeRO-3: new sub-group ids per param group
    std::vector<int> old_first_sub;           // ZeRO-3: an old sub-group of each param group (state template)
    if (!zero3) {
      const auto rules = deepspeed::zero12_rules_for_version(cat_.ds_version);
      for (const auto& g : src.groups) {
        std::vector<ParamEntry> entries;
        for (const auto& p : g.params) entries.push_back(ParamEntry{p.name, p.shape, p.numel, 0});
        groups.push_back(src.bf16_optimizer ? deepspeed::layout_bf16_optimizer(g.index, std::move(entries), n)
                                            : deepspeed::layout_zero12(g.index, std::move(entries), n, rules));
      }
    } else {
      int64_t sgs = 1000000000;
      if (const Value* cfg = ckpt_.model_file(0, 0).root.get("ds_config"))
        if (const Value* z = cfg->get("zero_optimization"))
          if (const Value* s = z->get("sub_group_size"); s && (s->is(Value::Kind::Int) || s->is(Value::Kind::Float)))
            if (const double v = s->as_float(); v >= 1.0 && v <= 9.0e15) sgs = static_cast<int64_t>(v);
      const Value* pgs = osd0->get("optimizer_state_dict") ? osd0->get("optimizer_state_dict")->get("param_groups") : nullptr;
      if (!pgs || !pgs->is_sequence()) throw Error(optim0.path, "optimizer_state_dict.param_groups", "missing");
      for (const auto& pg : pgs->items()) {
        const Value* ids = pg.get("params");
        std::vector<ParamEntry> entries;
        std::vector<deepspeed::ParamSpan> spans;
        int first_old = -1;
        if (ids && ids->is_sequence())
          for (const auto& id : ids->items()) {
            const auto k = static_cast<size_t>(id.as_int());
            if (k >= src.groups.size()) throw Error(optim0.path, "param_groups params", "sub-group id out of range");
            if (first_old < 0) first_old = static_cast<int>(k);
            for (const auto& p : src.groups[k].params) {
              entries.push_back(ParamEntry{p.name, p.shape, p.numel, 0});
              spans.push_back({p.name, p.shape, p.numel});
            }
          }
        sub_ids.emplace_back();
        for (const auto& sg : deepspeed::zero3_sub_groups(spans, n, sgs)) {
          std::vector<ParamEntry> sub;
          for (int i : sg) sub.push_back(entries[static_cast<size_t>(i)]);
          sub_ids.back().push_back(Value::integer(static_cast<int64_t>(groups.size())));
          old_first_sub.push_back(first_old);
          groups.push_back(deepspeed::layout_zero3(static_cast<int>(groups.size()), std::move(sub), n));
        }
      }
    }

    const ParamRead fp32_read = [&reader](const std::string& name, int64_t first, int64_t cnt, float* out) {
      reader.read("fp32", name, first, cnt, out);
    };

    // Optimizer files.
    for (int r = 0; r < n; ++r) {
      Value root = optim0.root.clone();
      Value* osd = need(&root, "optimizer_state_dict", optim0.path);
      auto flat_fill = [&, r](const GroupLayout& g, const std::string& field) {
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
      if (!zero3) {
        std::vector<Value> fp32s, paddings, counts, mappings;
        Value* bos = need(osd, "base_optimizer_state", optim0.path);
        if (!bos->is_dict())
          throw Error(optim0.path, "base_optimizer_state", "elastic (list) optimizer state cannot be re-partitioned yet");
        const Value* old_state = bos->get("state");
        Value state = Value::dict();
        for (size_t gi = 0; gi < groups.size(); ++gi) {
          const GroupLayout& g = groups[gi];
          const auto& rp = g.partitions[static_cast<size_t>(r)];
          fp32s.push_back(Value::tensor(deepspeed::produced_f32(rp.saved_numel, guarded(flat_fill(g, "fp32")),
                                                                g.partition_numel, true)));
          paddings.push_back(Value::integer(rp.recorded_padding));
          counts.push_back(Value::integer(n));
          mappings.push_back(deepspeed::slice_mappings_value(g, r));
          const Value* entry = nullptr;
          if (old_state && old_state->is_dict())
            for (const auto& [k, v] : old_state->as_dict().items)
              if (k.is(Value::Kind::Int) && k.as_int() == static_cast<int64_t>(gi)) entry = &v;
          if (entry && !rq_.reset_optimizer) {
            const int64_t old_len = src.groups[gi].partition_numel;
            state.set_item(Value::integer(static_cast<int64_t>(gi)),
                           remap_state_entry(*entry, old_len, g.partition_numel,
                                             [&](const std::string& key, int64_t first, int64_t cnt, float* out) {
                                               flat_fill(g, key)(first, cnt, out);
                                             }));
          }
        }
        bos->set("state", state);
        if (rq_.reset_optimizer) erase_group_steps(bos->get_mut("param_groups"));
        osd->set("single_partition_of_fp32_groups", Value::list(std::move(fp32s)));
        if (osd->get("group_paddings")) osd->set("group_paddings", Value::list(std::move(paddings)));
        if (osd->get("groups_padding")) osd->set("groups_padding", Value::list(std::move(paddings)));
        if (osd->get("partition_count")) osd->set("partition_count", Value::list(std::move(counts)));
        if (osd->get("param_slice_mappings")) osd->set("param_slice_mappings", Value::list(std::move(mappings)));
      } else {
        Value* inner = need(osd, "optimizer_state_dict", optim0.path);
        const Value* old_state = inner->get("state");
        Value state = Value::dict();
        std::vector<Value> fp32s;
        for (size_t k = 0; k < groups.size(); ++k) {
          const GroupLayout& g = groups[k];
          fp32s.push_back(Value::tensor(deepspeed::produced_f32(g.partition_numel, guarded(flat_fill(g, "fp32")))));
          const Value* entry = nullptr;
          if (old_state && old_state->is_dict())
            for (const auto& [key, v] : old_state->as_dict().items)
              if (key.is(Value::Kind::Int) && key.as_int() == old_first_sub[k]) entry = &v;
          if (entry && !rq_.reset_optimizer) {
            const int64_t old_len = src.groups[static_cast<size_t>(old_first_sub[k])].partition_numel;
            state.set_item(Value::integer(static_cast<int64_t>(k)),
                           remap_state_entry(*entry, old_len, g.partition_numel,
                                             [&](const std::string& key, int64_t first, int64_t cnt, float* out) {
                                               flat_fill(g, key)(first, cnt, out);
                                             }));
          }
        }
        inner->set("state", state);
        Value* pgs = need(inner, "param_groups", optim0.path);
        auto& items = pgs->items_mut();
        for (size_t gi = 0; gi < items.size() && gi < sub_ids.size(); ++gi) items[gi].set("params", Value::list(sub_ids[gi]));
        if (rq_.reset_optimizer) erase_group_steps(pgs);
        osd->set("fp32_flat_groups", Value::list(std::move(fp32s)));
        osd->set("partition_count", Value::integer(n));
      }
      write(deepspeed::optim_file_name(bf16_prefix, r), root);
    }

    // Model files.
    if (!zero3) {
      for (const auto& f : cat_.files) {
        if (f.role != FileRole::Model) continue;
        Value root = ckpt_.model_file(f.mp_rank, 0).root.clone();
        root.set("dp_world_size", Value::integer(n));
        write(f.path, root);
      }
    } else {
      std::vector<Value> shapes;
      for (const auto& g : groups) {
        Value d = deepspeed::ordered_dict();
        for (const auto& p : g.params) d.set(p.name, Value::size(p.shape));
        shapes.push_back(std::move(d));
      }
      for (int r = 0; r < n; ++r) {
        Value root = ckpt_.model_file(0, 0).root.clone();
        root.set("dp_world_size", Value::integer(n));
        root.set("param_shapes", Value::list(shapes));
        write(deepspeed::model_file_name(3, r), root);
      }
    }
    for (const auto& f : cat_.files)
      if (f.role != FileRole::Model && f.role != FileRole::Optim && fs::is_regular_file(f.abs_path)) copy(f);
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

}  // namespace

RepairResult run_repair(const deepspeed::Checkpoint& ckpt, const std::string& output, const RepairRequest& rq,
                        Progress* progress, FileIo& io) {
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
