// Exporting a tensor/pipeline-parallel job: the stages one after the other (a tied module saved by several
// stages once), each tensor-parallel param merged from its slices as ds_to_universal.py::merge_tp_slices
// would.
#include "sources/deepspeed/export_parallel.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/sources/deepspeed/replica_vote.h"
#include "ckptdoc/sources/deepspeed/tp_rules.h"
#include "sources/deepspeed/tensor_convert.h"

namespace ckptdoc::deepspeed::detail {

namespace {

int64_t prod(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < s.size(); ++i) n *= s[i];
  return n;
}

// The slices concatenated along `dim` (equal shapes but for that dim).
std::vector<uint8_t> concat(const std::vector<std::vector<uint8_t>>& parts,
                            const std::vector<std::vector<int64_t>>& shapes, size_t dim, size_t elem) {
  const int64_t outer = prod(shapes[0], 0, dim);
  size_t total = 0;
  for (const auto& p : parts) total += p.size();
  std::vector<uint8_t> out(total);
  size_t at = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < parts.size(); ++k) {
      const size_t block = static_cast<size_t>(prod(shapes[k], dim, shapes[k].size())) * elem;
      std::memcpy(out.data() + at, parts[k].data() + static_cast<size_t>(o) * block, block);
      at += block;
    }
  return out;
}

// One merged param from its tensor-parallel slices (produced when written: the slices' bytes are read then).
// `take`: for a replicated param, the tensor rank whose copy is written.
NamedTensor merged(const std::string& name, const std::vector<Tensor>& slices, const TpRule& rule,
                   const TpRules& rules, size_t take) {
  const Tensor& first = slices.front();
  const DType dtype = first.dtype;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& t : slices) {
    if (t.dtype != dtype)
      throw Error(ErrorKind::Inconsistent, rules.source, name,
                  "its tensor-parallel slices have different dtypes; cannot merge");
    shapes.push_back(t.shape);
  }
  std::vector<int64_t> shape = first.shape;
  const auto dim = static_cast<size_t>(rule.cat_dim);
  if (rule.kind == TpMerge::Concat || rule.kind == TpMerge::SubParams2) {
    if (shape.size() <= dim)
      throw Error(ErrorKind::Inconsistent, rules.source, name,
                  "rule '" + rule.pattern + "' concatenates on dim " + std::to_string(dim) +
                      " but the slices are " + shape_text(shape));
    for (const auto& s : shapes) {
      std::vector<int64_t> a = s, b = first.shape;
      a[dim] = b[dim] = 0;
      if (a != b)
        throw Error(ErrorKind::Inconsistent, rules.source, name,
                    "tensor-parallel slices " + shape_text(first.shape) + " and " + shape_text(s) +
                        " do not concatenate on dim " + std::to_string(dim));
    }
    shape[dim] = 0;
    for (const auto& s : shapes) shape[dim] += s[dim];
    if (rule.kind == TpMerge::SubParams2 && first.shape[0] % 2 != 0)
      throw Error(ErrorKind::Inconsistent, rules.source, name,
                  "two sub-params per slice need an even dim 0, found " + shape_text(first.shape));
  } else {
    for (const auto& s : shapes)
      if (s != first.shape)
        throw Error(ErrorKind::Inconsistent, rules.source, name,
                    "replicated/averaged slices " + shape_text(first.shape) + " and " + shape_text(s) +
                        " differ in shape");
  }
  if (rule.vocabulary) {
    if (!rules.original_vocab_size)
      throw Error(ErrorKind::InvalidRequest, rules.source, name,
                  "a vocabulary param, but original_vocab_size is not given");
    if (shape.empty() || *rules.original_vocab_size > shape[0])
      throw Error(ErrorKind::InvalidRequest, rules.source, name,
                  "original_vocab_size " + std::to_string(*rules.original_vocab_size) +
                      " exceeds the merged rows " + shape_text(shape));
    shape[0] = *rules.original_vocab_size;
  }
  const auto kind = rule.kind;
  return {name,
          Tensor::produced(dtype, shape, [slices, shapes, kind, dim, shape, dtype, take](ByteSink& sink) {
            const size_t elem = element_size(dtype);
            std::vector<std::vector<uint8_t>> parts;
            parts.reserve(slices.size());
            if (kind != TpMerge::Replicated)
              for (const auto& t : slices) parts.push_back(t.to_bytes());
            std::vector<uint8_t> out;
            switch (kind) {
              case TpMerge::Replicated:
                out = slices[take].to_bytes();
                break;
              case TpMerge::Average: {
                // ds_to_universal: sum(slices) / len(slices), in float32
                std::vector<float> acc = slices[0].to_float();
                for (size_t k = 1; k < slices.size(); ++k) {
                  const auto f = slices[k].to_float();
                  for (size_t i = 0; i < acc.size(); ++i) acc[i] += f[i];
                }
                for (auto& v : acc) v /= static_cast<float>(slices.size());
                Tensor avg = Tensor::from_bytes(
                    DType::F32, shapes[0],
                    std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(acc.data()),
                                         reinterpret_cast<const uint8_t*>(acc.data() + acc.size())));
                if (dtype == DType::F32) {
                  out = avg.to_bytes();
                } else {
                  VectorSink c;
                  write_as(avg, dtype, c);
                  out = std::move(c.data);
                }
                break;
              }
              case TpMerge::Concat:
                out = concat(parts, shapes, dim, elem);
                break;
              case TpMerge::SubParams2: {
                // each slice is [first sub-param rows; second sub-param rows]: all first halves, then all
                // second
                std::vector<std::vector<uint8_t>> halves;
                std::vector<std::vector<int64_t>> hshapes;
                for (int h = 0; h < 2; ++h)
                  for (size_t k = 0; k < parts.size(); ++k) {
                    const size_t half = parts[k].size() / 2;
                    halves.emplace_back(parts[k].begin() + static_cast<std::ptrdiff_t>(h * half),
                                        parts[k].begin() + static_cast<std::ptrdiff_t>((h + 1) * half));
                    auto hs = shapes[k];
                    hs[0] /= 2;
                    hshapes.push_back(hs);
                  }
                out = concat(halves, hshapes, 0, elem);
                break;
              }
            }
            const size_t keep = static_cast<size_t>(prod(shape, 0, shape.size())) * elem;
            sink.write({out.data(), std::min(keep, out.size())});  // vocabulary: the rows before the padding
          })};
}

bool same_bytes(const std::vector<Tensor>& ts) {
  const auto b0 = ts[0].to_bytes();
  for (size_t k = 1; k < ts.size(); ++k)
    if (ts[k].shape != ts[0].shape || ts[k].to_bytes() != b0) return false;
  return true;
}

// Which tensor rank's copy of a replicated param to write: all copies agree (rank 0's), or, when allowed, the
// copy held bit for bit by more than half of three or more ranks (else rank 0's). Otherwise the param is
// refused, naming the ranks that differ from the others, as ds_to_universal.py refuses it.
size_t replicated_copy(const std::string& name, const std::vector<Tensor>& slices, const TpRules& rules,
                       bool allow_differing, std::vector<std::string>* notes) {
  std::vector<std::vector<uint8_t>> bytes;
  bytes.reserve(slices.size());
  for (const auto& s : slices) bytes.push_back(s.to_bytes());
  const ReplicaVote v =
      vote_replicas(slices.size(), [&](size_t a, size_t b) { return bytes[a] == bytes[b]; });
  if (v.classes() <= 1) return 0;
  const bool majority = v.majority;
  std::string differ;
  for (size_t k = 0; k < slices.size(); ++k)
    if (v.class_of[k] != v.reference) differ += (differ.empty() ? "" : ", ") + std::to_string(k);
  if (!allow_differing)
    throw Error(
        ErrorKind::Inconsistent, rules.source, name,
        "replicated across tensor ranks, but the tensor ranks hold " + std::to_string(v.classes()) +
            " different copies (" +
            (majority ? "tensor rank(s) " + differ + " differ from the others, which agree"
                      : "tensor rank(s) " + differ + " differ from tensor rank 0, and no majority agrees") +
            "), as ckptdoc diagnose reports (tp-replicated-mismatch). Export one tensor rank's slices with "
            "--tp-rank K, or pass --force to write the copy most tensor ranks hold (tensor rank 0's "
            "when none)");
  size_t take = 0;
  while (v.class_of[take] != v.reference) ++take;
  if (notes)
    notes->push_back(
        name + ": replicated across tensor ranks, but tensor rank(s) " + differ + " differ from " +
        (majority
             ? "the others, which agree; their copy was written (tensor rank " + std::to_string(take) + "'s)"
             : "tensor rank 0, and no majority agrees; tensor rank 0's copy was written"));
  return take;
}

}  // namespace

std::vector<NamedTensor> job_export_tensors(const Checkpoint& job, const ExportOptions& options,
                                            std::vector<std::string>* notes) {
  const Topology& t = job.catalog().topology;
  std::vector<NamedTensor> out;
  std::set<std::string> seen;  // tied modules saved by several stages: the first stage's
  auto add = [&](NamedTensor n) {
    if (seen.insert(n.name).second) out.push_back(std::move(n));
  };
  if (options.tp_rank >= t.tp)
    throw Error(ErrorKind::InvalidRequest, job.catalog().tag_dir,
                "--tp-rank " + std::to_string(options.tp_rank),
                "the job has " + std::to_string(t.tp) + " tensor-parallel ranks");
  if (t.tp == 1 || options.tp_rank >= 0) {
    const int k = std::max(options.tp_rank, 0);
    for (int s = 0; s < t.pp; ++s)
      for (auto& n : slice_export_tensors(*job.slice(s * t.tp + k), options)) add(std::move(n));
    return out;
  }
  std::optional<TpRules> rules =
      options.tp_rules ? std::optional<TpRules>(read_tp_rules(*options.tp_rules)) : tp_rules_of(job);
  if (!rules)
    throw Error(ErrorKind::Unsupported, job.catalog().tag_dir, "",
                "a tensor-parallel checkpoint (tp " + std::to_string(t.tp) +
                    ") without universal_checkpoint_info: "
                    "pass --tp-rules FILE saying how its slices merge, or --tp-rank K to write one tensor "
                    "rank's slices");
  std::vector<std::string> no_rule;
  std::vector<std::pair<std::string, std::vector<Tensor>>> todo;
  std::vector<std::pair<std::string, TpRule>> decided;
  for (int s = 0; s < t.pp; ++s) {
    std::vector<std::map<std::string, Tensor>> by_rank(static_cast<size_t>(t.tp));
    std::vector<std::string> order;
    for (int k = 0; k < t.tp; ++k)
      for (auto& n : slice_export_tensors(*job.slice(s * t.tp + k), options)) {
        if (k == 0) order.push_back(n.name);
        by_rank[static_cast<size_t>(k)].emplace(n.name, std::move(n.tensor));
      }
    for (const auto& name : order) {
      if (seen.count(name)) continue;
      std::vector<Tensor> slices;
      for (int k = 0; k < t.tp; ++k) {
        auto it = by_rank[static_cast<size_t>(k)].find(name);
        if (it == by_rank[static_cast<size_t>(k)].end())
          throw Error(ErrorKind::Inconsistent, job.catalog().tag_dir, name,
                      "on tensor rank 0 but not on tensor rank " + std::to_string(k));
        slices.push_back(it->second);
      }
      auto rule = rules->rule_for(name);
      if (!rule) {
        // A tensor no rule names but which every tensor rank holds bit for bit (a buffer, a frozen param) is
        // replicated; anything else needs a rule.
        if (same_bytes(slices)) {
          TpRule r;
          r.kind = TpMerge::Replicated;
          rule = r;
        } else {
          no_rule.push_back(name);
          continue;
        }
      }
      const size_t take =
          rule->kind == TpMerge::Replicated
              ? replicated_copy(name, slices, *rules, options.merge_differing_replicated, notes)
              : 0;
      seen.insert(name);
      out.push_back(merged(name, slices, *rule, *rules, take));
    }
  }
  if (!no_rule.empty()) {
    std::string list;
    for (const auto& n : no_rule) {
      list += (list.empty() ? "" : ", ") + n;
      if (auto why = rules->unmergeable_why(n)) list += " (" + *why + ")";
    }
    throw Error(
        ErrorKind::Unsupported, rules->source, "",
        "no tensor-parallel merge rule for " + std::to_string(no_rule.size()) +
            " param(s) whose slices differ: " + list +
            ". Give a --tp-rules file that covers them (tp_replicated_parameter_patterns, "
            "parameter_with_row_parallelism_patterns, cat_dim, default_cat_dim, ...), or --tp-rank K");
  }
  return out;
}

}  // namespace ckptdoc::deepspeed::detail
