// Synthetic DeepSpeed checkpoints (see synthesize.h). Every element value is a pure function of
// (seed, stream, param, element), so each tensor can be generated in chunks while it is written.
#include "ckptdoc/sources/deepspeed/synthesize.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "ckptdoc/error.h"
#include "ckptdoc/format/value.h"
#include "ckptdoc/sources/deepspeed/layout.h"
#include "ckptdoc/sources/deepspeed/writer.h"

namespace fs = std::filesystem;

namespace ckptdoc::deepspeed {
namespace {

enum class Kind : uint8_t { Weight, NormWeight, Bias };
enum class Stream : uint8_t { Trained = 1, Init = 2, ExpAvg = 3, ExpAvgSq = 4 };

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  Kind kind = Kind::Weight;
  int group = 0;
  int index = 0;  // module order
};

struct Model {
  std::vector<Param> params;                 // module order
  std::vector<std::vector<int>> groups;      // param indices per param group, flat order
  std::vector<std::string> module_prefixes;  // for _metadata
  std::string buffer_name = "rotary_inv_freq";
  int64_t buffer_numel = 0;
  // A language model (--vocab): the head is the embedding itself, as GPT-2 ties them. DeepSpeed saves the
  // alias in the module state dict and names it in shared_params; it is no param of its own.
  std::string tied_head;  // "head.weight", or empty
  int tied_to = -1;       // the embedding's param index
};

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Roughly normal (sum of two uniforms, variance 1/6 * 2 -> scaled to ~1).
inline float noise(uint64_t seed, Stream s, int param, int64_t i) {
  const uint64_t h = mix(seed * 0x100000001b3ULL ^ (static_cast<uint64_t>(s) << 56) ^
                         (static_cast<uint64_t>(param) << 40) ^ static_cast<uint64_t>(i));
  const float u1 = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  const float u2 = static_cast<float>((h >> 16) & 0xffffffu) * (1.0f / 16777216.0f);
  return (u1 + u2 - 1.0f) * 1.7320508f;
}

struct Values {
  const Model* model;
  uint64_t seed;
  SynthBreak brk;
  float trained(int p, int64_t i) const {
    const float n = noise(seed, Stream::Trained, p, i);
    switch (model->params[static_cast<size_t>(p)].kind) {
      case Kind::Weight:
        return 0.05f * n;
      case Kind::NormWeight:
        return 1.0f + 0.05f * n;
      case Kind::Bias:
        return 0.01f * n;
    }
    return 0;
  }
  float init(int p, int64_t i) const {
    switch (model->params[static_cast<size_t>(p)].kind) {
      case Kind::Weight:
        return 0.02f * noise(seed ^ 0x5eed, Stream::Init, p, i);
      case Kind::NormWeight:
        return 1.0f;
      case Kind::Bias:
        return 0.0f;
    }
    return 0;
  }
  float master(int p, int64_t i) const { return brk == SynthBreak::StaleFp32 ? init(p, i) : trained(p, i); }
  Values stale() const {  // the values of the one stale rank of StaleFp32OneRank
    Values s = *this;
    s.brk = SynthBreak::StaleFp32;
    return s;
  }
  float exp_avg(int p, int64_t i) const {
    if (brk == SynthBreak::ZeroMomentsWithStep) return 0;
    return 1e-3f * noise(seed, Stream::ExpAvg, p, i);
  }
  float exp_avg_sq(int p, int64_t i) const {
    if (brk == SynthBreak::ZeroMomentsWithStep) return 0;
    const float n = noise(seed, Stream::ExpAvgSq, p, i);
    return 1e-6f * (n * n + 0.01f);
  }
};

enum class Field : uint8_t { Lp, Master, ExpAvg, ExpAvgSq };

float field_value(const Values& v, Field f, int p, int64_t i) {
  switch (f) {
    case Field::Lp:
      return v.trained(p, i);
    case Field::Master:
      return v.master(p, i);
    case Field::ExpAvg:
      return v.exp_avg(p, i);
    case Field::ExpAvgSq:
      return v.exp_avg_sq(p, i);
  }
  return 0;
}

// Fills out[0..n) with flat elements [first, first+n) of a ZeRO-1/2 flat group (zeros past the params).
void fill_flat(const Values& v, const Model& m, const std::vector<int>& group, Field f, int64_t first,
               int64_t n, float* out) {
  int64_t pos = 0;
  size_t k = 0;
  int64_t done = 0;
  while (k < group.size() && pos + m.params[static_cast<size_t>(group[k])].numel <= first) {
    pos += m.params[static_cast<size_t>(group[k])].numel;
    ++k;
  }
  while (done < n) {
    const int64_t at = first + done;
    if (k >= group.size()) {
      std::fill(out + done, out + n, 0.0f);
      return;
    }
    const Param& p = m.params[static_cast<size_t>(group[k])];
    const int64_t in = at - pos;
    const int64_t take = std::min(n - done, p.numel - in);
    for (int64_t j = 0; j < take; ++j) out[done + j] = field_value(v, f, p.index, in + j);
    done += take;
    pos += p.numel;
    ++k;
  }
}

// ZeRO-3: rank r's partition of sub-group `sub` (params' partitions concatenated, zero padding).
void fill_zero3(const Values& v, const Model& m, const std::vector<int>& sub, int dp, int rank, Field f,
                int64_t first, int64_t n, float* out) {
  int64_t pos = 0;
  int64_t done = 0;
  for (int pi : sub) {
    const Param& p = m.params[static_cast<size_t>(pi)];
    const int64_t part = zero3_partition_numel(p.numel, dp);
    if (pos + part <= first) {
      pos += part;
      continue;
    }
    while (done < n && first + done < pos + part) {
      const int64_t j = first + done - pos;
      const int64_t e = static_cast<int64_t>(rank) * part + j;
      out[done] = e < p.numel ? field_value(v, f, p.index, e) : 0.0f;
      ++done;
    }
    pos += part;
    if (done >= n) return;
  }
  std::fill(out + done, out + n, 0.0f);
}

Model build_model(const SynthOptions& o, int64_t hidden) {
  Model m;
  const int64_t H = hidden;
  const int64_t V = o.vocab > 0 ? o.vocab : 8 * H;
  auto add = [&](std::string name, std::vector<int64_t> shape, Kind kind) {
    Param p;
    p.name = std::move(name);
    p.numel = 1;
    for (auto d : shape) p.numel *= d;
    p.shape = std::move(shape);
    p.kind = kind;
    p.group = kind == Kind::Weight ? 0 : 1;
    p.index = static_cast<int>(m.params.size());
    m.params.push_back(std::move(p));
  };
  m.module_prefixes.push_back("");
  m.module_prefixes.push_back("embed");
  add("embed.weight", {V, H}, Kind::Weight);
  m.module_prefixes.push_back("layers");
  for (int l = 0; l < o.layers; ++l) {
    const std::string pre = "layers." + std::to_string(l);
    for (const char* sub :
         {"", ".ln1", ".attn", ".attn.qkv", ".attn.out", ".ln2", ".mlp", ".mlp.up", ".mlp.down"})
      m.module_prefixes.push_back(pre + sub);
    add(pre + ".ln1.weight", {H}, Kind::NormWeight);
    add(pre + ".ln1.bias", {H}, Kind::Bias);
    add(pre + ".attn.qkv.weight", {3 * H, H}, Kind::Weight);
    add(pre + ".attn.qkv.bias", {3 * H}, Kind::Bias);
    add(pre + ".attn.out.weight", {H, H}, Kind::Weight);
    add(pre + ".attn.out.bias", {H}, Kind::Bias);
    add(pre + ".ln2.weight", {H}, Kind::NormWeight);
    add(pre + ".ln2.bias", {H}, Kind::Bias);
    add(pre + ".mlp.up.weight", {4 * H, H}, Kind::Weight);
    add(pre + ".mlp.up.bias", {4 * H}, Kind::Bias);
    add(pre + ".mlp.down.weight", {H, 4 * H}, Kind::Weight);
    add(pre + ".mlp.down.bias", {H}, Kind::Bias);
  }
  m.module_prefixes.push_back("final_ln");
  add("final_ln.weight", {H}, Kind::NormWeight);
  add("final_ln.bias", {H}, Kind::Bias);
  if (o.vocab > 0) {
    m.module_prefixes.push_back("head");
    m.tied_head = "head.weight";
    m.tied_to = 0;
  }
  m.groups.resize(2);
  for (const auto& p : m.params) m.groups[static_cast<size_t>(p.group)].push_back(p.index);
  m.buffer_numel = std::max<int64_t>(1, H / 2);
  return m;
}

int64_t choose_hidden(const SynthOptions& o) {
  if (o.target_params <= 0) return std::max<int64_t>(1, o.hidden);
  // params ~ (8 + 12 L) H^2 when vocab = 8H
  const double per = o.vocab > 0 ? 12.0 * o.layers : 8.0 + 12.0 * o.layers;
  double h = o.vocab > 0 ? (-(o.vocab + 13.0 * o.layers) +
                            std::sqrt((o.vocab + 13.0 * o.layers) * (o.vocab + 13.0 * o.layers) +
                                      4.0 * per * o.target_params)) /
                               (2.0 * per)
                         : std::sqrt(static_cast<double>(o.target_params) / per);
  return std::max<int64_t>(8, static_cast<int64_t>(std::llround(h / 8.0)) * 8);
}

Value adam_group(double weight_decay, std::vector<Value> params) {
  Value g = Value::dict();
  g.set("weight_decay", Value::real(weight_decay));
  g.set("lr", Value::real(1e-4));
  g.set("betas", Value::list({Value::real(0.9), Value::real(0.999)}));
  g.set("eps", Value::real(1e-8));
  g.set("amsgrad", Value::boolean(false));
  g.set("foreach", Value::none());
  g.set("maximize", Value::boolean(false));
  g.set("capturable", Value::boolean(false));
  g.set("params", Value::list(std::move(params)));
  return g;
}

Value ds_config(const SynthOptions& o) {
  Value c = Value::dict();
  c.set("train_micro_batch_size_per_gpu", Value::integer(4));
  c.set("gradient_accumulation_steps", Value::integer(1));
  c.set("steps_per_print", Value::integer(1000000));
  c.set("gradient_clipping", Value::real(1.0));
  Value opt = Value::dict();
  opt.set("type", Value::str("AdamW"));
  Value op = Value::dict();
  op.set("lr", Value::real(1e-4));
  op.set("betas", Value::list({Value::real(0.9), Value::real(0.999)}));
  op.set("eps", Value::real(1e-8));
  op.set("weight_decay", Value::real(0.01));
  opt.set("params", op);
  c.set("optimizer", opt);
  Value sch = Value::dict();
  sch.set("type", Value::str("WarmupLR"));
  Value sp = Value::dict();
  sp.set("warmup_min_lr", Value::real(0.0));
  sp.set("warmup_max_lr", Value::real(1e-4));
  sp.set("warmup_num_steps", Value::integer(100));
  sch.set("params", sp);
  c.set("scheduler", sch);
  Value z = Value::dict();
  z.set("stage", Value::integer(o.stage));
  if (o.stage == 3) z.set("sub_group_size", Value::integer(o.sub_group_size));
  c.set("zero_optimization", z);
  Value prec = Value::dict();
  prec.set("enabled", Value::boolean(true));
  if (o.dtype == DType::F16) {
    prec.set("loss_scale", Value::integer(0));
    prec.set("initial_scale_power", Value::integer(16));
    c.set("fp16", prec);
  } else {
    c.set("bf16", prec);
    if (o.bf16_optimizer) {
      Value dt = Value::dict();
      dt.set("grad_accum_dtype", Value::str("fp32"));
      c.set("data_types", dt);
    }
  }
  return c;
}

Value module_metadata(const Model& m) {
  Value md = ordered_dict();
  for (const auto& p : m.module_prefixes) {
    Value e = Value::dict();
    e.set("version", Value::integer(1));
    md.set(p, e);
  }
  return md;
}

struct Writer {
  const SynthOptions& o;
  const Model& m;
  Values vals;
  std::string tag_dir;
  FileIo& io;
  Progress* progress;
  SynthResult& result;
  std::string tag;

  void write(const std::string& name, const Value& root) {
    if (progress) progress->check();
    const std::string path = tag_dir + "/" + name;
    write_checkpoint_file(path, root, io);
    std::error_code ec;
    const uint64_t bytes = fs::file_size(path, ec);
    if (ec) throw Error(ErrorKind::Io, path, "", "cannot be read back: " + ec.message());
    result.bytes += bytes;
    result.files.push_back(tag + "/" + name);
    if (progress) progress->add(1);
  }

  bool at_least(DsVersion want) const {
    const auto v = parse_ds_version(o.ds_version);
    return v && *v >= want;
  }

  // Before 0.19 the engine cast the whole module (module.half() / bfloat16()), buffers too; 0.19.8 casts only
  // the params and buffers keep their dtype (engine._cast_module_mixed_precision; 0.18.4 still cast them).
  DType buffer_dtype() const { return at_least({0, 19, 8}) ? DType::F32 : o.dtype; }

  Value buffer_tensor() const {
    const int64_t n = m.buffer_numel;
    auto st = produced_lp_storage(buffer_dtype(), n, [n](int64_t first, int64_t cnt, float* out) {
      for (int64_t i = 0; i < cnt; ++i)
        out[i] =
            static_cast<float>(std::pow(10000.0, -static_cast<double>(first + i) / static_cast<double>(n)));
    });
    return Value::tensor(view_of(st, buffer_dtype(), {n}, 0));
  }

  Value param_shapes(const std::vector<std::vector<int>>& lists) const {
    std::vector<Value> out;
    for (const auto& l : lists) {
      Value d = ordered_dict();
      for (int pi : l)
        d.set(m.params[static_cast<size_t>(pi)].name, Value::size(m.params[static_cast<size_t>(pi)].shape));
      out.push_back(std::move(d));
    }
    return Value::list(std::move(out));
  }

  // `rank`: the dp rank whose model file this is (ZeRO-3 writes one per rank).
  Value model_root(Value module, const std::vector<std::vector<int>>& shape_lists, int rank) const {
    Value root = Value::dict();
    root.set("module", std::move(module));
    root.set("buffer_names", Value::list({Value::str(m.buffer_name)}));
    root.set("optimizer", Value::none());
    root.set("param_shapes", param_shapes(shape_lists));
    const bool frozen = o.stage >= 2;
    root.set("frozen_param_shapes", frozen ? ordered_dict() : Value::none());
    Value shared = Value::dict();
    if (!m.tied_head.empty() && rank == 0)  // engine._get_shared_params looks only on global rank 0
      shared.set(m.tied_head, Value::str(m.params[static_cast<size_t>(m.tied_to)].name));
    root.set("shared_params", std::move(shared));
    root.set("frozen_param_fragments", frozen ? ordered_dict() : Value::none());
    Value sched = Value::dict();
    sched.set("last_batch_iteration", Value::integer(o.global_steps - 1));
    root.set("lr_scheduler", sched);
    root.set("data_sampler", Value::none());
    root.set("random_ltd", Value::none());
    if (!at_least({0, 19, 8}))  // 0.18.4 saved it; 0.19.8 does not
      root.set("sparse_tensor_module_names", string_set());
    root.set("skipped_steps", Value::integer(0));
    root.set("global_steps", Value::integer(o.global_steps));
    root.set("global_samples", Value::integer(o.global_steps * 4 * o.dp));
    root.set("dp_world_size", Value::integer(o.breakage == SynthBreak::WrongDpWorldSize ? o.dp + 1 : o.dp));
    root.set("mp_world_size", Value::integer(1));
    if (at_least({0, 19, 5})) {  // 0.19.5+: the pipeline and tensor degrees the files were saved with
      Value dims = Value::dict();
      dims.set("pp_degree", Value::integer(1));
      dims.set("tp_degree", Value::integer(1));
      root.set("checkpoint_parallel_dimensions", std::move(dims));
    }
    root.set("ds_config", ds_config(o));
    root.set("ds_version", Value::str(o.ds_version));
    return root;
  }

  Value with_metadata(Value module) const {
    Value state = Value::dict();
    state.set("_metadata", module_metadata(m));
    module.dict_mut().state = std::make_shared<Value>(std::move(state));
    return module;
  }

  LossScalerState scaler() const {
    LossScalerState s;
    if (o.dtype == DType::F16) {
      s.dynamic = true;
      s.cur_scale = 65536;
      s.cur_iter = o.global_steps;
      s.scale_window = 1000;
      s.dtype = DType::F16;
    } else {
      s.dynamic = false;
      s.cur_scale = 1.0;
    }
    return s;
  }

  Value field_tensor(Field f, int64_t numel, int64_t storage_numel, bool requires_grad,
                     const std::function<void(Field, int64_t, int64_t, float*)>& fill) const {
    return Value::tensor(produced_f32(
        numel, [fill, f](int64_t first, int64_t n, float* out) { fill(f, first, n, out); }, storage_numel,
        requires_grad));
  }

  // Adam's step as DeepSpeed saves it: before 0.13.2 the engine ran one zero-gradient optimizer step at
  // initialisation, so step = global_steps + 1 (read from real 0.12.6 files: 6 after 5 steps; 0.14.5: 5).
  float step() const {
    const auto v = parse_ds_version(o.ds_version);
    const bool init_step = v && *v < DsVersion{0, 13, 2};
    return static_cast<float>(o.global_steps + (init_step ? 1 : 0));
  }

  void write_zero12() {
    const int dp = o.dp;
    const Zero12Rules rules = zero12_rules_for_version(o.ds_version);
    std::vector<GroupLayout> parts;
    for (size_t g = 0; g < m.groups.size(); ++g) {
      std::vector<ParamEntry> entries;
      for (int pi : m.groups[g]) {
        const Param& p = m.params[static_cast<size_t>(pi)];
        entries.push_back(ParamEntry{p.name, p.shape, p.numel, 0});
      }
      parts.push_back(o.bf16_optimizer ? layout_bf16_optimizer(static_cast<int>(g), std::move(entries), dp)
                                       : layout_zero12(static_cast<int>(g), std::move(entries), dp, rules));
    }
    // Model file: lp params are views into one padded flat storage per group, as DeepSpeed saves them.
    Value module = ordered_dict();
    module.set(m.buffer_name, buffer_tensor());
    std::vector<std::shared_ptr<Storage>> flats;
    std::vector<std::vector<int64_t>> offsets(m.params.size());
    std::vector<int64_t> param_offset(m.params.size());
    for (size_t g = 0; g < m.groups.size(); ++g) {
      const auto& grp = m.groups[g];
      const Values v = vals;
      const Model* mp = &m;
      flats.push_back(produced_lp_storage(o.dtype, parts[g].padded_numel,
                                          [v, mp, grp](int64_t first, int64_t n, float* out) {
                                            fill_flat(v, *mp, grp, Field::Lp, first, n, out);
                                          }));
      int64_t off = 0;
      for (int pi : grp) {
        param_offset[static_cast<size_t>(pi)] = off;
        off += m.params[static_cast<size_t>(pi)].numel;
      }
    }
    for (const auto& p : m.params)
      module.set(p.name, Value::tensor(view_of(flats[static_cast<size_t>(p.group)], o.dtype, p.shape,
                                               param_offset[static_cast<size_t>(p.index)])));
    if (!m.tied_head.empty()) {  // the same tensor under the head's name
      const Param& e = m.params[static_cast<size_t>(m.tied_to)];
      module.set(m.tied_head, Value::tensor(view_of(flats[static_cast<size_t>(e.group)], o.dtype, e.shape,
                                                    param_offset[static_cast<size_t>(e.index)])));
    }
    write(model_file_name(o.stage, 0), model_root(with_metadata(std::move(module)), m.groups, 0));

    for (int r = 0; r < dp; ++r) {
      if (o.breakage == SynthBreak::MissingRank && r == dp - 1 && dp > 1) continue;
      Value osd = Value::dict();
      if (!o.bf16_optimizer) {
        osd.set("loss_scaler", loss_scaler_object(scaler()));
        osd.set("dynamic_loss_scale", Value::boolean(o.dtype == DType::F16));
        osd.set("overflow", Value::boolean(false));
      }
      osd.set("clip_grad", Value::real(1.0));
      Value state = Value::dict();
      std::vector<Value> pgroups, fp32s, paddings, alignment_paddings, counts, mappings;
      for (size_t g = 0; g < m.groups.size(); ++g) {
        const auto& grp = m.groups[g];
        const int64_t P = parts[g].partition_numel;
        const int64_t base = static_cast<int64_t>(r) * P;
        const Values v = o.breakage == SynthBreak::StaleFp32OneRank && r == dp / 2 ? vals.stale() : vals;
        const Model* mp = &m;
        const bool nan_rank = o.breakage == SynthBreak::NanInExpAvgSq && r == 0;
        auto fill = [v, mp, grp, base, nan_rank](Field f, int64_t first, int64_t n, float* out) {
          fill_flat(v, *mp, grp, f, base + first, n, out);
          if (nan_rank && f == Field::ExpAvgSq)
            for (int64_t i = 0; i < n; ++i)
              if ((first + i) % 1009 == 7) out[i] = std::numeric_limits<float>::quiet_NaN();
        };
        Value st = Value::dict();
        st.set("step", step_tensor(step()));
        st.set("exp_avg", field_tensor(Field::ExpAvg, P, P, false, fill));
        st.set("exp_avg_sq", field_tensor(Field::ExpAvgSq, P, P, false, fill));
        state.set_item(Value::integer(static_cast<int64_t>(g)), st);
        pgroups.push_back(adam_group(g == 0 ? 0.01 : 0.0, {Value::integer(static_cast<int64_t>(g))}));
        const RankPartition& rp = parts[g].partitions[static_cast<size_t>(r)];
        fp32s.push_back(field_tensor(Field::Master, rp.saved_numel, P, true, fill));
        paddings.push_back(Value::integer(rp.recorded_padding));
        // 0.19.8: the padding after each param for zero_optimization.parameter_alignment (default 1: none)
        alignment_paddings.push_back(Value::list(std::vector<Value>(grp.size(), Value::integer(0))));
        counts.push_back(Value::integer(dp));
        mappings.push_back(slice_mappings_value(parts[g], r));
      }
      Value base_state = Value::dict();
      base_state.set("state", state);
      base_state.set("param_groups", Value::list(std::move(pgroups)));
      osd.set("base_optimizer_state", base_state);
      osd.set("single_partition_of_fp32_groups", Value::list(std::move(fp32s)));
      if (!o.bf16_optimizer) osd.set("zero_stage", zero_stage_object(o.stage));
      osd.set("group_paddings", Value::list(std::move(paddings)));
      if (at_least({0, 19, 8}) && !o.bf16_optimizer)
        osd.set("param_alignment_paddings", Value::list(std::move(alignment_paddings)));
      osd.set("partition_count", Value::list(std::move(counts)));
      osd.set("ds_version", Value::str(o.ds_version));
      osd.set("param_slice_mappings", Value::list(std::move(mappings)));
      Value root = Value::dict();
      root.set("optimizer_state_dict", osd);
      root.set("ds_config", ds_config(o));
      root.set("ds_version", Value::str(o.ds_version));
      write(optim_file_name(o.dtype == DType::BF16, r), root);
    }
  }

  void write_zero3() {
    const int dp = o.dp;
    // Sub-groups per param group; `subs` lists global param indices per sub-group in order.
    std::vector<std::vector<int>> subs;
    std::vector<std::vector<Value>> group_sub_ids(m.groups.size());
    for (size_t g = 0; g < m.groups.size(); ++g) {
      std::vector<ParamSpan> spans;
      for (int pi : m.groups[g])
        spans.push_back(
            {m.params[static_cast<size_t>(pi)].name, {}, m.params[static_cast<size_t>(pi)].numel});
      for (const auto& sg : zero3_sub_groups(spans, dp, o.sub_group_size)) {
        std::vector<int> ids;
        ids.reserve(sg.size());
        for (int local : sg) ids.push_back(m.groups[g][static_cast<size_t>(local)]);
        group_sub_ids[g].push_back(Value::integer(static_cast<int64_t>(subs.size())));
        subs.push_back(std::move(ids));
      }
    }
    for (int r = 0; r < dp; ++r) {
      Value module = ordered_dict();
      module.set(m.buffer_name, buffer_tensor());
      std::vector<std::string> names;
      for (const auto& p : m.params) names.push_back(p.name);
      if (!m.tied_head.empty()) names.push_back(m.tied_head);
      for (const auto& name : names) {
        auto st = std::make_shared<Storage>();
        st->dtype = o.dtype;
        st->owned = std::make_shared<const std::vector<uint8_t>>();
        module.set(name, Value::tensor(view_of(st, o.dtype, {0}, 0)));
      }
      write(model_file_name(3, r), model_root(with_metadata(std::move(module)), subs, r));
    }
    for (int r = 0; r < dp; ++r) {
      if (o.breakage == SynthBreak::MissingRank && r == dp - 1 && dp > 1) continue;
      Value osd = Value::dict();
      osd.set("zero_stage", zero_stage_object(3));
      osd.set("loss_scaler", loss_scaler_object(scaler()));
      osd.set("dynamic_loss_scale", Value::boolean(o.dtype == DType::F16));
      osd.set("overflow", Value::boolean(false));
      osd.set("partition_count", Value::integer(dp));
      Value state = Value::dict();
      std::vector<Value> fp32s;
      for (size_t k = 0; k < subs.size(); ++k) {
        int64_t len = 0;
        for (int pi : subs[k]) len += zero3_partition_numel(m.params[static_cast<size_t>(pi)].numel, dp);
        const Values v = o.breakage == SynthBreak::StaleFp32OneRank && r == dp / 2 ? vals.stale() : vals;
        const Model* mp = &m;
        const auto sub = subs[k];
        const bool nan_rank = o.breakage == SynthBreak::NanInExpAvgSq && r == 0;
        auto fill = [v, mp, sub, dp, r, nan_rank](Field f, int64_t first, int64_t n, float* out) {
          fill_zero3(v, *mp, sub, dp, r, f, first, n, out);
          if (nan_rank && f == Field::ExpAvgSq)
            for (int64_t i = 0; i < n; ++i)
              if ((first + i) % 1009 == 7) out[i] = std::numeric_limits<float>::quiet_NaN();
        };
        Value st = Value::dict();
        st.set("step", step_tensor(step()));
        st.set("exp_avg", field_tensor(Field::ExpAvg, len, len, false, fill));
        st.set("exp_avg_sq", field_tensor(Field::ExpAvgSq, len, len, false, fill));
        state.set_item(Value::integer(static_cast<int64_t>(k)), st);
        fp32s.push_back(field_tensor(Field::Master, len, len, true, fill));  // as 0.12.6 and 0.19.8 save them
      }
      std::vector<Value> pgroups;
      for (size_t g = 0; g < m.groups.size(); ++g)
        pgroups.push_back(adam_group(g == 0 ? 0.01 : 0.0, group_sub_ids[g]));
      Value inner = Value::dict();
      inner.set("state", state);
      inner.set("param_groups", Value::list(std::move(pgroups)));
      osd.set("optimizer_state_dict", inner);
      osd.set("fp32_flat_groups", Value::list(std::move(fp32s)));
      Value root = Value::dict();
      root.set("optimizer_state_dict", osd);
      root.set("ds_config", ds_config(o));
      root.set("ds_version", Value::str(o.ds_version));
      write(optim_file_name(o.dtype == DType::BF16, r), root);
    }
  }
};

bool dir_is_empty(const std::string& d) {
  std::error_code ec;
  return fs::is_empty(d, ec) && !ec;
}

}  // namespace

SynthBreak parse_synth_break(const std::string& s0) {
  std::string s = s0;
  std::replace(s.begin(), s.end(), '-', '_');
  for (SynthBreak b : {SynthBreak::None, SynthBreak::StaleFp32, SynthBreak::StaleFp32OneRank,
                       SynthBreak::ZeroMomentsWithStep, SynthBreak::NanInExpAvgSq, SynthBreak::TruncateRank,
                       SynthBreak::MissingRank, SynthBreak::WrongDpWorldSize})
    if (s == synth_break_name(b)) return b;
  throw Error(ErrorKind::InvalidRequest, "", "",
              "unknown break mode '" + s0 +
                  "' (none, stale_fp32, stale_fp32_one_rank, zero_moments_with_step, nan_in_exp_avg_sq, "
                  "truncate_rank, "
                  "missing_rank, wrong_dp_world_size)");
}

std::string_view synth_break_name(SynthBreak b) {
  switch (b) {
    case SynthBreak::None:
      return "none";
    case SynthBreak::StaleFp32:
      return "stale_fp32";
    case SynthBreak::StaleFp32OneRank:
      return "stale_fp32_one_rank";
    case SynthBreak::ZeroMomentsWithStep:
      return "zero_moments_with_step";
    case SynthBreak::NanInExpAvgSq:
      return "nan_in_exp_avg_sq";
    case SynthBreak::TruncateRank:
      return "truncate_rank";
    case SynthBreak::MissingRank:
      return "missing_rank";
    case SynthBreak::WrongDpWorldSize:
      return "wrong_dp_world_size";
  }
  return "none";
}

SynthResult write_synthetic_checkpoint(const std::string& dir, const SynthOptions& o, Progress* progress,
                                       FileIo& io) {
  if (o.stage < 1 || o.stage > 3)
    throw Error(ErrorKind::InvalidRequest, dir, "", "ZeRO stage must be 1, 2 or 3");
  if (o.dtype != DType::F16 && o.dtype != DType::BF16)
    throw Error(ErrorKind::InvalidRequest, dir, "", "dtype must be fp16 or bf16");
  if (o.bf16_optimizer && (o.dtype != DType::BF16 || o.stage != 1))
    throw Error(ErrorKind::InvalidRequest, dir, "", "the BF16_Optimizer layout needs bf16 and stage 1");
  if (o.dp < 1 || o.dp > 4096)
    throw Error(ErrorKind::InvalidRequest, dir, "", "dp must be between 1 and 4096");
  if (o.layers < 0) throw Error(ErrorKind::InvalidRequest, dir, "", "layers must not be negative");

  SynthResult result;
  const int64_t hidden = choose_hidden(o);
  const Model model = build_model(o, hidden);
  for (const auto& p : model.params) result.params += p.numel;
  result.tag = "global_step" + std::to_string(o.global_steps);

  std::error_code ec;
  if (fs::exists(dir, ec) && !dir_is_empty(dir)) {
    if (!o.force)
      throw Error(ErrorKind::OutputExists, dir, "",
                  "the folder exists and is not empty (pass --force to replace a checkpoint there)");
    fs::remove(fs::path(dir) / "latest", ec);
    fs::remove_all(fs::path(dir) / result.tag, ec);
  }
  fs::create_directories(fs::path(dir) / result.tag, ec);
  if (ec) throw Error(ErrorKind::Io, dir, "", "cannot create the folder: " + ec.message());
  result.save_dir = fs::absolute(dir).lexically_normal().string();
  if (!result.save_dir.empty() && result.save_dir.back() == '/') result.save_dir.pop_back();

  Writer w{
      o,      model,     Values{&model, o.seed, o.breakage}, result.save_dir + "/" + result.tag, io, progress,
      result, result.tag};
  if (progress) progress->set_stage("writing synthetic checkpoint", static_cast<uint64_t>(o.dp) * 2 + 1);
  if (o.stage == 3)
    w.write_zero3();
  else
    w.write_zero12();

  if (o.breakage == SynthBreak::TruncateRank) {
    const std::string path = w.tag_dir + "/" + optim_file_name(o.dtype == DType::BF16, o.dp - 1);
    fs::resize_file(path, fs::file_size(path) / 2, ec);
    if (ec) throw Error(ErrorKind::Io, path, "", "cannot truncate: " + ec.message());
  }
  write_text_file(result.save_dir + "/latest", result.tag, io);
  result.files.push_back("latest");
  return result;
}

}  // namespace ckptdoc::deepspeed
