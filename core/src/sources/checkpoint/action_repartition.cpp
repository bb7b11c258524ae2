// Repair action --repartition --world-size N: new flat (or ZeRO-3 sub-group) layouts at the new data-parallel
// size, filled from the old partitions directly or, under MPI, through an exchange between processes.
#include <algorithm>
#include <filesystem>
#include <functional>

#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"
#include "sources/checkpoint/runner.h"
#include "sources/deepspeed/catalog_topology.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair::detail {

using deepspeed::FileRole;
using deepspeed::FloatFill;
using deepspeed::GroupLayout;
using deepspeed::OptimizerWrapper;
using deepspeed::ParamEntry;

std::vector<std::string> Runner::state_keys(const Value& entry, int64_t len) const {
  std::vector<std::string> keys;
  if (!entry.is_dict()) return keys;
  for (const auto& [k, v] : entry.as_dict().items)
    if (k.is(Value::Kind::Str) && v.is_tensor() && v.as_tensor().shape.size() == 1 &&
        v.as_tensor().numel() == len)
      keys.push_back(k.as_str());
  return keys;
}

Runner::NewLayout Runner::new_layout(const SourceLayout& src, const TorchFile& optim_tmpl, int n) const {
  NewLayout nl;
  if (cat_.wrapper != OptimizerWrapper::Zero3) {
    const auto rules = deepspeed::zero12_rules_for_version(cat_.ds_version);
    for (const auto& g : src.groups) {
      std::vector<ParamEntry> entries;
      for (const auto& p : g.params) entries.push_back(ParamEntry{p.name, p.shape, p.numel, 0});
      // An expert group keeps its expert-parallel size E: n / E partitions, partition k of ep rank e in dp
      // rank e + k * E.
      const int E = g.expert ? expert_parallel_size(g) : 1;
      const int parts = n / E;
      GroupLayout ng = src.bf16_optimizer
                           ? deepspeed::layout_bf16_optimizer(g.index, std::move(entries), parts)
                           : deepspeed::layout_zero12(g.index, std::move(entries), parts, rules);
      ng.file_group = g.file_group;
      ng.expert = g.expert;
      ng.ep_rank = g.ep_rank;
      if (g.expert)
        for (size_t k = 0; k < ng.partitions.size(); ++k)
          ng.partitions[k].rank = g.ep_rank + static_cast<int>(k) * E;
      nl.groups.push_back(std::move(ng));
    }
    return nl;
  }
  int64_t sgs = 1000000000;
  if (const Value* cfg = model_template().root.get("ds_config"))
    if (const Value* z = cfg->get("zero_optimization"))
      if (const Value* s = z->get("sub_group_size");
          s && (s->is(Value::Kind::Int) || s->is(Value::Kind::Float)))
        if (const double v = s->as_float(); v >= 1.0 && v <= 9.0e15) sgs = static_cast<int64_t>(v);
  const Value* osd0 = optim_tmpl.root.get("optimizer_state_dict");
  const Value* pgs = osd0 && osd0->get("optimizer_state_dict")
                         ? osd0->get("optimizer_state_dict")->get("param_groups")
                         : nullptr;
  if (!pgs || !pgs->is_sequence())
    throw Error(ErrorKind::Corrupt, optim_tmpl.path, "optimizer_state_dict.param_groups", "missing");
  for (const auto& pg : pgs->items()) {
    const Value* ids = pg.get("params");
    std::vector<ParamEntry> entries;
    std::vector<deepspeed::ParamSpan> spans;
    int first_old = -1;
    if (ids && ids->is_sequence())
      for (const auto& id : ids->items()) {
        const auto k = static_cast<size_t>(id.as_int());
        if (k >= src.groups.size())
          throw Error(ErrorKind::Corrupt, optim_tmpl.path, "param_groups params",
                      "sub-group id out of range");
        if (first_old < 0) first_old = static_cast<int>(k);
        for (const auto& p : src.groups[k].params) {
          entries.push_back(ParamEntry{p.name, p.shape, p.numel, 0});
          spans.push_back({p.name, p.shape, p.numel});
        }
      }
    nl.sub_ids.emplace_back();
    for (const auto& sg : deepspeed::zero3_sub_groups(spans, n, sgs)) {
      std::vector<ParamEntry> sub;
      sub.reserve(sg.size());
      for (int i : sg) sub.push_back(entries[static_cast<size_t>(i)]);
      nl.sub_ids.back().push_back(Value::integer(static_cast<int64_t>(nl.groups.size())));
      nl.old_first_sub.push_back(first_old);
      nl.groups.push_back(deepspeed::layout_zero3(static_cast<int>(nl.groups.size()), std::move(sub), n));
      nl.groups.back().file_group = nl.groups.back().index;
    }
  }
  return nl;
}

int Runner::expert_parallel_size(const GroupLayout& g) const {
  int e = 0;
  for (const auto& h : cat_.groups) e += h.file_group == g.file_group ? 1 : 0;
  return std::max(e, 1);
}

Value Runner::file_slice_mappings(const GroupLayout& g, int part) const {
  if (!g.expert) return deepspeed::slice_mappings_value(g, part);
  // As the checkpoint's DeepSpeed version records them: before v0.14.5 over a window of padded numel / the
  // whole data-parallel size (layout.h); and the files name experts by their local id.
  const int dp = static_cast<int>(g.partitions.size()) * expert_parallel_size(g);
  const int64_t window = g.padded_numel / std::max(dp, 1);
  const bool global_dp = deepspeed::zero12_rules_for_version(cat_.ds_version).expert_mappings_use_global_dp;
  Value m = deepspeed::ordered_dict();
  for (const auto& sm : global_dp ? deepspeed::slice_mappings_in(g, part * window, window)
                                  : deepspeed::expected_slice_mappings(g, part))
    m.set(deepspeed::detail::local_expert_name(cat_.topology, sm.name, g.ep_rank),
          deepspeed::fragment_address_object(sm.numel, sm.start));
  return m;
}

const Value* Runner::old_state_entry(const Value& osd, size_t gi, const NewLayout& nl,
                                     int64_t* old_len) const {
  const bool zero3 = cat_.wrapper == OptimizerWrapper::Zero3;
  const Value* holder = zero3 ? osd.get("optimizer_state_dict") : osd.get("base_optimizer_state");
  const Value* state = holder && holder->is_dict() ? holder->get("state") : nullptr;
  const int64_t want = zero3 ? nl.old_first_sub[gi] : static_cast<int64_t>(nl.groups[gi].file_group);
  const SourceLayout& src = *src_;
  for (const auto& g : src.groups)  // expert groups: every expert-parallel instance has the same length
    if (g.file_group == want) *old_len = g.partition_numel;
  if (state && state->is_dict())
    for (const auto& [k, v] : state->as_dict().items)
      if (k.is(Value::Kind::Int) && k.as_int() == want) return &v;
  return nullptr;
}

Value Runner::repartitioned_optim_root(int r, int n, const TorchFile& tmpl, const NewLayout& nl,
                                       const RankFill& fill) const {
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
      throw Error(ErrorKind::Unsupported, tmpl.path, "base_optimizer_state",
                  "elastic (list) optimizer state cannot be re-partitioned yet");
    Value state = Value::dict();
    // One entry per group of the file; an expert group's entry is this rank's expert-parallel instance.
    int file_groups = 0;
    for (const auto& g : groups) file_groups = std::max(file_groups, g.file_group + 1);
    for (int fg = 0; fg < file_groups; ++fg) {
      size_t gi = groups.size();
      for (size_t i = 0; i < groups.size() && gi == groups.size(); ++i)
        if (groups[i].file_group == fg && groups[i].partition_of(r)) gi = i;
      if (gi == groups.size())
        throw Error(ErrorKind::Inconsistent, tmpl.path, "group " + std::to_string(fg),
                    "no partition for new dp rank " + std::to_string(r));
      const GroupLayout& g = groups[gi];
      const int k = g.partition_index(r);
      const auto& rp = g.partitions[static_cast<size_t>(k)];
      fp32s.push_back(Value::tensor(
          deepspeed::produced_f32(rp.saved_numel, guarded(fill(gi, r, "fp32")), g.partition_numel, true)));
      paddings.push_back(Value::integer(rp.recorded_padding));
      counts.push_back(Value::integer(static_cast<int64_t>(g.partitions.size())));
      mappings.push_back(file_slice_mappings(g, k));
      int64_t old_len = 0;
      const Value* entry = old_state_entry(*osd, gi, nl, &old_len);
      if (entry && !rq_.reset_optimizer)
        state.set_item(Value::integer(static_cast<int64_t>(fg)), remap(gi, entry, old_len));
    }
    bos->set("state", state);
    if (rq_.reset_optimizer) erase_group_steps(bos->get_mut("param_groups"));
    osd->set("single_partition_of_fp32_groups", Value::list(std::move(fp32s)));
    // One of the two names (groups_padding: v0.6.2-v0.6.7's BF16_Optimizer); a file with both gets both.
    if (osd->get("group_paddings")) osd->set("group_paddings", Value::list(paddings));
    if (osd->get("groups_padding")) osd->set("groups_padding", Value::list(std::move(paddings)));
    if (osd->get("partition_count")) osd->set("partition_count", Value::list(std::move(counts)));
    if (osd->get("param_slice_mappings")) osd->set("param_slice_mappings", Value::list(std::move(mappings)));
    return root;
  }
  Value* inner = need(osd, "optimizer_state_dict", tmpl.path);
  Value state = Value::dict();
  std::vector<Value> fp32s;
  for (size_t k = 0; k < groups.size(); ++k) {
    fp32s.push_back(
        Value::tensor(deepspeed::produced_f32(groups[k].partition_numel, guarded(fill(k, r, "fp32")))));
    int64_t old_len = 0;
    const Value* entry = old_state_entry(*osd, k, nl, &old_len);
    if (entry && !rq_.reset_optimizer)
      state.set_item(Value::integer(static_cast<int64_t>(k)), remap(k, entry, old_len));
  }
  inner->set("state", state);
  Value* pgs = need(inner, "param_groups", tmpl.path);
  auto& items = pgs->items_mut();
  for (size_t gi = 0; gi < items.size() && gi < nl.sub_ids.size(); ++gi)
    items[gi].set("params", Value::list(nl.sub_ids[gi]));
  if (rq_.reset_optimizer) erase_group_steps(pgs);
  osd->set("fp32_flat_groups", Value::list(std::move(fp32s)));
  osd->set("partition_count", Value::integer(n));
  return root;
}

std::vector<std::vector<std::string>> Runner::group_fields(const TorchFile& tmpl, const NewLayout& nl) const {
  const Value* osd = tmpl.root.get("optimizer_state_dict");
  if (!osd) throw Error(ErrorKind::Corrupt, tmpl.path, "key 'optimizer_state_dict'", "missing");
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

void Runner::repartition() {
  const int n = *rq_.world_size;
  const SourceLayout src = source_layout(ckpt_);
  src_ = &src;
  const StateReader reader(ckpt_, src);
  const bool zero3 = cat_.wrapper == OptimizerWrapper::Zero3;
  const int tmpl_rank = dist_ ? dist_->template_rank : 0;
  const deepspeed::CheckpointFile* oft = cat_.optim_file(tmpl_rank);  // this model-parallel rank's
  const bool bf16_prefix = oft && oft->bf16_prefix;
  const TorchFile& optim_tmpl = ckpt_.optim_file(tmpl_rank);
  if (!optim_tmpl.root.get("optimizer_state_dict"))
    throw Error(ErrorKind::Corrupt, optim_tmpl.path, "key 'optimizer_state_dict'", "missing");
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
      throw Error(ErrorKind::Inconsistent, optim_tmpl.path, "optimizer state",
                  "the processes' optimizer files carry different state keys");
    exchanged =
        exchange_partitions(reader, nl.groups, fields, zero3, *dist_,
                            out_ + "/.ckptdoc-scratch-" + std::to_string(dist_->me), *exchanger_, progress_);
    exchange_bytes_ = exchanged->bytes_received;
    if (progress_) progress_->set_stage("writing repaired checkpoint", plan_.files.size());
    fill = [&exchanged](size_t gi, int r, const std::string& field) {
      return exchanged->fill(r, static_cast<int>(gi), field);
    };
  } else {
    fill = [&nl, &reader, n, zero3](size_t gi, int r, const std::string& field) {
      const GroupLayout& g = nl.groups[gi];
      const ParamRead read = [&reader, field](const std::string& name, int64_t first, int64_t cnt,
                                              float* out) { reader.read(field, name, first, cnt, out); };
      if (zero3)
        return FloatFill([&g, r, n, read](int64_t first, int64_t cnt, float* out) {
          fill_zero3_part(g, r, n, first, cnt, out, read);
        });
      const int64_t base = static_cast<int64_t>(g.partition_index(r)) * g.partition_numel;
      return FloatFill([&g, base, read](int64_t first, int64_t cnt, float* out) {
        fill_zero12_flat(g, base + first, cnt, out, read);
      });
    };
  }

  for (int r = 0; r < n; ++r)
    if (!dist_ || dist_->owns(r))
      write(deepspeed::optim_file_name(bf16_prefix, r, cat_.mp_rank),
            repartitioned_optim_root(r, n, optim_tmpl, nl, fill));

  // Model files: ZeRO-1/2 has one per mp rank (written once per storage); ZeRO-3 one per dp rank.
  if (!zero3) {
    if (writes_shared_files_)
      for (const auto& f : cat_.files) {
        if (f.role != FileRole::Model || !owns(f)) continue;
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
      write(deepspeed::model_file_name(3, r, cat_.mp_rank), root);
    }
  }
  if (writes_shared_files_) copy_other_files();
  src_ = nullptr;
}

}  // namespace ckptdoc::repair::detail
