// The tensor list of a weights-only export, in zero_to_fp32.py's order and with its dtype rules (§5.4):
// buffers as float32, frozen params in the lp dtype (ZeRO-3: gathered from every rank's fragment),
// trainable params from the fp32 partitions in param_shapes order, then shared-param aliases.
#include <algorithm>
#include <map>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/export.h"
#include "ckptdoc/weights/weights_source.h"
#include "sources/deepspeed/export_parallel.h"
#include "sources/deepspeed/tensor_convert.h"
#include "sources/deepspeed/tensor_slice.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

namespace {

struct Planner {
  const Checkpoint& ck;
  const Catalog& cat;
  const ExportOptions& opt;
  Progress* progress;

  // Wraps a tensor so that writing it reports progress and honours cancel.
  Tensor with_progress(Tensor t) const {
    if (!progress) return t;
    Progress* pr = progress;
    const DType dtype = t.dtype;
    auto shape = t.shape;
    const uint64_t nbytes = t.nbytes();
    return Tensor::produced(dtype, shape, [t = std::move(t), pr, nbytes](ByteSink& sink) {
      pr->check();
      t.storage->write_to(sink);
      pr->add(nbytes);
    });
  }

  Tensor as_dtype(const Tensor& t, std::optional<DType> want) const {
    if (!want || *want == t.dtype) {
      // Re-emit as its own contiguous tensor so views of a shared flat buffer do not drag the whole buffer.
      return lazily_converted(t, t.dtype);
    }
    return lazily_converted(t, *want, float_converter(t.dtype, *want));
  }

  // The backend for float32 <-> float16/bfloat16, made on first need (a CUDA context costs time to create).
  std::shared_ptr<Backend> float_converter(DType from, DType to) const {
    auto lp = [](DType d) { return d == DType::F16 || d == DType::BF16; };
    if (!((from == DType::F32 && lp(to)) || (lp(from) && to == DType::F32))) return nullptr;
    if (!backend) backend = std::shared_ptr<Backend>(make_backend(opt.device));
    return backend;
  }
  mutable std::shared_ptr<Backend> backend;

  const Value* model_root() const { return &ck.model_file().root; }

  // zero_to_fp32 upcasts every buffer with .float(); lp exports keep the module dtype. Buffers live in the
  // module, or in pipeline layer files.
  void buffers(std::vector<NamedTensor>& out) const {
    std::optional<DType> want = opt.dtype;
    if (!want && opt.source == ExportSource::Fp32) want = DType::F32;
    std::vector<std::string> names = cat.buffer_names;
    if (!model_root()->get("buffer_names")) {
      // DeepSpeed's MoE model files have no buffer_names: the module's tensors that are not trainable params
      // (buffers and frozen params alike) are exported as zero_to_fp32 treats buffers.
      std::set<std::string> trainable;
      for (const auto& g : cat.groups)
        for (const auto& p : g.params) trainable.insert(p.name);
      for (const auto& k : cat.module_keys)
        if (!trainable.count(k)) names.push_back(k);
    }
    for (const auto& name : names) {
      const auto t = ck.module_tensor(name);
      if (!t) continue;
      out.push_back({name, as_dtype(*t, want)});
    }
  }

  void frozen(std::vector<NamedTensor>& out) const {
    if (opt.exclude_frozen || cat.frozen_params.empty()) return;
    const Value* frags0 = dict_get(model_root(), "frozen_param_fragments");
    if (cat.wrapper != OptimizerWrapper::Zero3) {
      for (const auto& p : cat.frozen_params) {
        const Value* t = dict_get(frags0, p.name);
        if (!t || !t->is_tensor()) {
          throw Error(ErrorKind::NotFound, cat.metadata_model_file()->path,
                      "frozen_param_fragments['" + p.name + "']",
                      "missing; pass --exclude-frozen to export without frozen params");
        }
        out.push_back({p.name, as_dtype(t->as_tensor(), opt.dtype)});
      }
      return;
    }
    // ZeRO-3: every rank's model file holds a ceil(n/dp) slice of each frozen param.
    const int dp = cat.groups.empty() ? std::max(cat.dp_world_size, 1)
                                      : static_cast<int>(cat.groups[0].partitions.size());
    for (const auto& p : cat.frozen_params) {
      const int64_t part = (p.numel + dp - 1) / dp;
      std::vector<Tensor> pieces;
      DType lp = cat.lp_dtype;
      for (int r = 0; r < dp; ++r) {
        const int64_t n = std::clamp<int64_t>(p.numel - r * part, 0, part);
        if (n == 0) break;
        const Value* t = dict_get(dict_get(&ck.model_file(-1, r).root, "frozen_param_fragments"), p.name);
        if (!t || !t->is_tensor()) {
          throw Error(ErrorKind::Inconsistent,
                      cat.model_file(-1, r) ? cat.model_file(-1, r)->path : cat.tag_dir,
                      "frozen_param_fragments['" + p.name + "']", "missing on dp rank " + std::to_string(r));
        }
        lp = t->as_tensor().dtype;
        pieces.push_back(slice_1d(t->as_tensor(), 0, n));
      }
      const DType to = opt.dtype.value_or(lp);
      out.push_back({p.name, Tensor::produced(to, p.shape, [pieces, to](ByteSink& sink) {
                       for (const auto& piece : pieces) write_as(piece, to, sink);
                     })});
    }
  }

  void trainable_fp32(std::vector<NamedTensor>& out) const {
    const auto w = cat.wrapper;
    // FP16_UnfusedOptimizer (one master per param) and FP16_Optimizer (one flat master per group): laid out
    // as groups when they matched the module's params.
    if (w != OptimizerWrapper::Zero12 && w != OptimizerWrapper::Zero3 &&
        w != OptimizerWrapper::BF16Optimizer && w != OptimizerWrapper::FP16UnfusedOptimizer &&
        w != OptimizerWrapper::FP16Optimizer) {
      throw Error(
          ErrorKind::Unsupported, cat.tag_dir, "",
          "fp32 export needs ZeRO, BF16_Optimizer, FP16_UnfusedOptimizer or FP16_Optimizer masters; this "
          "checkpoint's optimizer is " +
              std::string(wrapper_name(w)) + " (use --source lp)");
    }
    if (cat.groups.empty())
      throw Error(ErrorKind::Unsupported, cat.tag_dir, "",
                  "no param groups could be laid out (see the problems)");
    const DType to = opt.dtype.value_or(DType::F32);
    // AutoEP: each expert param's pieces per expert-parallel rank, written once whole (autoep_merged), and
    // the param as one rank lists it (its layer and local shape).
    std::map<std::string, std::map<int, std::vector<Tensor>>> expert_pieces;
    std::map<std::string, std::pair<const AutoEpParam*, std::vector<int64_t>>> expert_local;
    for (const auto& g : cat.groups) {
      // Every rank's partition must be there and long enough before anything is written.
      std::vector<Tensor> parts;
      for (const auto& rp : g.partitions) {
        auto t = ck.fp32_partition(g.index, rp.rank);
        if (!t) {
          throw Error(
              ErrorKind::NotFound, cat.tag_dir,
              "group " + std::to_string(g.index) + ", dp rank " + std::to_string(rp.rank),
              "the fp32 partition is missing (optimizer file absent or unreadable); cannot consolidate");
        }
        int64_t need = 0;
        for (const auto& f : rp.fragments) need = std::max(need, f.partition_offset + f.numel);
        if (t->numel() < need) {
          throw Error(ErrorKind::Inconsistent, cat.tag_dir,
                      "group " + std::to_string(g.index) + ", dp rank " + std::to_string(rp.rank),
                      expected_found("at least " + std::to_string(need) + " fp32 elements",
                                     std::to_string(t->numel())));
        }
        parts.push_back(*t);
      }
      for (size_t i = 0; i < g.params.size(); ++i) {
        std::vector<Tensor> pieces;  // in param order: partition order is param_offset order
        for (size_t k = 0; k < g.partitions.size(); ++k) {
          for (const auto& f : g.partitions[k].fragments) {
            if (f.param == static_cast<int>(i))
              pieces.push_back(slice_1d(parts[k], f.partition_offset, f.numel));
          }
        }
        if (const auto* ep = cat.autoep ? autoep_param(g.params[i].name) : nullptr) {
          auto& by_rank = expert_pieces[ep->name];
          if (by_rank.empty()) {
            expert_local[ep->name] = {ep, g.params[i].shape};
            out.push_back({ep->name, Tensor{}});  // its place in the output; filled below
          }
          by_rank[ep->ep_rank] = std::move(pieces);
          continue;
        }
        out.push_back(
            {g.params[i].name, Tensor::produced(to, g.params[i].shape, [pieces, to](ByteSink& sink) {
               for (const auto& piece : pieces) write_as(piece, to, sink);
             })});
      }
    }
    for (auto& t : out)
      if (!t.tensor.storage && expert_pieces.count(t.name))
        t.tensor = autoep_merged(t.name, *expert_local[t.name].first, expert_local[t.name].second,
                                 expert_pieces[t.name], to);
  }

  const AutoEpParam* autoep_param(const std::string& catalog_name) const {
    const auto it = cat.autoep->params.find(catalog_name);
    return it == cat.autoep->params.end() ? nullptr : &it->second;
  }

  // One AutoEP expert param whole, as DeepSpeed's own gather builds it: [num_experts, ...], global expert x
  // being row i of the expert-parallel rank whose placement lists x i-th (each rank's rows are its local
  // experts in packed order; the catalog has checked that every expert is placed exactly once).
  Tensor autoep_merged(const std::string& name, const AutoEpParam& ep, std::vector<int64_t> shape,
                       const std::map<int, std::vector<Tensor>>& by_rank, DType to) const {
    const AutoEpLayer& L = cat.autoep->layers[static_cast<size_t>(ep.layer)];
    int64_t row = 1;
    for (size_t d = 1; d < shape.size(); ++d) row *= shape[d];
    shape[0] = L.num_experts;
    // (ep rank, local row) of every global expert
    std::vector<std::pair<int, int64_t>> where(static_cast<size_t>(L.num_experts), {-1, 0});
    for (size_t r = 0; r < L.experts_of_rank.size(); ++r)
      for (size_t i = 0; i < L.experts_of_rank[r].size(); ++i)
        where[static_cast<size_t>(L.experts_of_rank[r][i])] = {static_cast<int>(r), static_cast<int64_t>(i)};
    std::vector<Tensor> rows;  // in global order: slices of the ranks' pieces
    for (const auto& [r, i] : where) {
      const auto it = by_rank.find(r);
      if (r < 0 || it == by_rank.end())
        throw Error(ErrorKind::Inconsistent, cat.tag_dir, name,
                    "an expert has no expert-parallel rank holding it; cannot assemble the param");
      int64_t at = 0;  // element offset of the current piece within the rank's local tensor
      const int64_t begin = i * row, end = begin + row;
      for (const auto& piece : it->second) {
        const int64_t len = piece.numel();
        const int64_t lo = std::max(begin, at), hi = std::min(end, at + len);
        if (lo < hi) rows.push_back(slice_1d(piece, lo - at, hi - lo));
        at += len;
      }
    }
    return Tensor::produced(to, shape, [rows, to](ByteSink& sink) {
      for (const auto& piece : rows) write_as(piece, to, sink);
    });
  }

  // A weights-only source: every tensor in load order, converted when asked. Tensors that are one view of one
  // storage (tied weights in a torch file) stay one tensor, so torch output shares them as the input did.
  void weights(std::vector<NamedTensor>& out) const {
    std::map<std::tuple<const Storage*, int64_t, std::vector<int64_t>, std::vector<int64_t>, DType>, Tensor>
        made;
    for (const auto& t : ck.weights()->tensors()) {
      const Tensor& in = t.tensor;
      const auto key = std::make_tuple(in.storage.get(), in.storage_offset, in.shape, in.strides, in.dtype);
      auto it = made.find(key);
      if (it == made.end() || in.numel() == 0) it = made.insert_or_assign(key, as_dtype(in, opt.dtype)).first;
      out.push_back({t.name, it->second});
    }
  }

  void trainable_lp(std::vector<NamedTensor>& out) const {
    if (cat.wrapper == OptimizerWrapper::Zero3 && !ck.weights()) {  // a Trainer folder keeps them beside
      throw Error(ErrorKind::Unsupported, cat.tag_dir, "",
                  "ZeRO-3 model files hold only placeholders; lp weights are not saved "
                  "(use --source fp32)");
    }
    std::vector<std::string> names;
    if (!cat.groups.empty()) {
      for (const auto& g : cat.groups)
        for (const auto& p : g.params) names.push_back(p.name);
    } else {  // non-ZeRO: every module key that is neither a buffer nor frozen
      std::set<std::string> skip(cat.buffer_names.begin(), cat.buffer_names.end());
      for (const auto& f : cat.frozen_params) skip.insert(f.name);
      for (const auto& k : cat.module_keys)
        if (!skip.count(k)) names.push_back(k);
    }
    for (const auto& name : names) {
      auto t = ck.lp_param(name);
      if (!t)
        throw Error(ErrorKind::NotFound, cat.tag_dir, "module['" + name + "']",
                    "missing from the model-states file");
      out.push_back({name, as_dtype(*t, opt.dtype)});
    }
  }
};

}  // namespace

namespace detail {

std::vector<NamedTensor> slice_export_tensors(const Checkpoint& ckpt, const ExportOptions& options) {
  const Catalog& cat = ckpt.catalog();
  const bool weights_only = ckpt.weights_only() && ckpt.weights();
  if (!weights_only && !cat.metadata_model_file())
    throw Error(ErrorKind::NotFound, cat.tag_dir, "", "no model-states file: buffers and names are unknown");
  Planner plan{ckpt, cat, options, nullptr, nullptr};
  std::vector<NamedTensor> out;
  if (weights_only) {  // weights files hold one set of weights: --source has nothing to choose
    plan.weights(out);
  } else {
    plan.buffers(out);
    plan.frozen(out);
    if (options.source == ExportSource::Fp32) {
      plan.trainable_fp32(out);
    } else {
      plan.trainable_lp(out);
    }
  }
  // Aliases share the owner's tensor (one storage in torch output), as zero_to_fp32 does.
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < out.size(); ++i) index[out[i].name] = i;
  for (const auto& [alias, owner] : cat.shared_params_in_order) {
    auto it = index.find(owner);
    if (it != index.end() && !index.count(alias)) out.push_back({alias, out[it->second].tensor});
  }
  return out;
}

}  // namespace detail

std::vector<NamedTensor> export_tensors(const Checkpoint& ckpt, const ExportOptions& options,
                                        Progress* progress, std::vector<std::string>* notes) {
  const Catalog& cat = ckpt.catalog();
  std::vector<NamedTensor> out = ckpt.slice_count() > 1 && cat.mp_rank == 0
                                     ? detail::job_export_tensors(ckpt, options, notes)
                                     : detail::slice_export_tensors(ckpt, options);
  if (progress) {
    Planner plan{ckpt, cat, options, progress, nullptr};
    uint64_t total = 0;
    std::map<const Storage*, Tensor> wrapped;  // a tensor listed under two names (an alias) stays one tensor
    std::set<const Storage*> counted;
    for (const auto& t : out)
      if (counted.insert(t.tensor.storage.get()).second) total += t.tensor.nbytes();
    progress->set_stage("export", total);
    for (auto& t : out) {
      auto it = wrapped.find(t.tensor.storage.get());
      if (it == wrapped.end())
        it = wrapped.emplace(t.tensor.storage.get(), plan.with_progress(t.tensor)).first;
      t.tensor = it->second;
    }
  }
  return out;
}

}  // namespace ckptdoc::deepspeed
