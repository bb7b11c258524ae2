#include "main_params.h"

#include <cstring>
#include <set>

#include "ckptdoc/compute/backend.h"
#include "ckptdoc/dtype.h"
#include "ckptdoc/error.h"

namespace ckptdoc::megatron {
namespace {

constexpr const char* kPrefixes[] = {"optimizer.state.fp32_param.", "optimizer.state.param."};

// Calls f(offset into the global row-major tensor, offset into the box, run length) for each contiguous run
// of the box `offsets`/`sizes` inside a tensor of shape `global` (in elements).
template <class F>
void for_each_run(const std::vector<int64_t>& global, const std::vector<int64_t>& offsets,
                  const std::vector<int64_t>& sizes, F&& f) {
  const size_t nd = global.size();
  if (nd == 0) return f(int64_t{0}, int64_t{0}, int64_t{1});
  for (auto s : sizes)
    if (s == 0) return;
  std::vector<int64_t> idx(nd - 1, 0);  // the box's index over every dimension but the last
  int64_t box_at = 0;
  while (true) {
    int64_t g = 0;
    for (size_t d = 0; d < nd; ++d) g = g * global[d] + offsets[d] + (d + 1 < nd ? idx[d] : 0);
    f(g, box_at, sizes[nd - 1]);
    box_at += sizes[nd - 1];
    auto d = static_cast<std::ptrdiff_t>(nd) - 2;
    for (; d >= 0; --d) {
      const auto at = static_cast<size_t>(d);
      if (++idx[at] < sizes[at]) break;
      idx[at] = 0;
    }
    if (d < 0) return;
  }
}

// The whole tensor of `entry`, row-major, in its own dtype (element_size bytes each).
std::vector<uint8_t> read_whole(const dcp::Checkpoint& ckpt, const dcp::Entry& entry, size_t esize) {
  std::vector<uint8_t> out(static_cast<size_t>(entry.numel()) * esize);
  for (const auto& chunk : entry.chunks) {
    const auto bytes = ckpt.read_chunk(entry, chunk).to_bytes();
    for_each_run(entry.size, chunk.offsets, chunk.sizes, [&](int64_t g, int64_t b, int64_t n) {
      std::memcpy(out.data() + g * esize, bytes.data() + b * esize, n * esize);
    });
  }
  return out;
}

// Whether the chunks' boxes lie inside the global shape and add up to it (else the DCP diagnosis reports
// dcp-chunk-outside or -gap, and the comparison would read what is not there).
bool chunks_inside(const dcp::Entry& e) {
  int64_t covered = 0;
  for (const auto& c : e.chunks) {
    if (c.offsets.size() != e.size.size() || c.sizes.size() != e.size.size()) return false;
    for (size_t d = 0; d < e.size.size(); ++d)
      if (c.offsets[d] < 0 || c.sizes[d] < 0 || c.offsets[d] + c.sizes[d] > e.size[d]) return false;
    covered += c.numel();
  }
  return covered == e.numel();  // a gap would read as zeros
}

int rank_of(const std::string& file) {  // "__<rank>_<n>.distcp"
  if (file.rfind("__", 0) != 0) return -1;
  try {
    return std::stoi(file.substr(2));
  } catch (...) {
    return -1;
  }
}

}  // namespace

std::vector<MainPair> main_pairs(const dcp::Metadata& md, std::vector<std::string>& not_compared) {
  std::vector<MainPair> out;
  for (const auto& e : md.entries) {
    if (e.kind != dcp::EntryKind::Tensor || e.dtype != "float32") continue;
    for (const char* prefix : kPrefixes) {
      const std::string p = prefix;
      if (e.key.rfind(p, 0) != 0) continue;
      const std::string key = e.key.substr(p.size());
      const auto* w = md.find(key);
      if (!w || w->kind != dcp::EntryKind::Tensor) continue;
      const auto lp = dtype_from_name(w->dtype);
      if (!lp || (*lp != DType::BF16 && *lp != DType::F16)) continue;  // an fp32 model keeps no main copy
      if (w->size != e.size)
        not_compared.push_back(key + ": the main's shape differs from the weight's");
      else if (!chunks_inside(*w) || !chunks_inside(e))
        not_compared.push_back(key +
                               ": its chunks do not tile the global shape (see the dcp-chunk problems)");
      else
        out.push_back({&e, w, key, p, *lp});
    }
  }
  return out;
}

std::vector<uint8_t> read_weight(const dcp::Checkpoint& ckpt, const MainPair& pair) {
  return read_whole(ckpt, *pair.weight, element_size(pair.lp));
}

std::vector<uint8_t> weight_box(const std::vector<uint8_t>& weight, const MainPair& pair,
                                const dcp::Chunk& chunk) {
  const size_t esize = element_size(pair.lp);
  std::vector<uint8_t> box(static_cast<size_t>(chunk.numel()) * esize);
  for_each_run(pair.main->size, chunk.offsets, chunk.sizes, [&](int64_t g, int64_t b, int64_t n) {
    std::memcpy(box.data() + b * esize, weight.data() + g * esize, n * esize);
  });
  return box;
}

MainParamComparison compare_main_params(const dcp::Checkpoint& ckpt, Progress* progress) {
  MainParamComparison c;
  const auto& md = ckpt.metadata();
  for (const auto& e : md.entries)
    if (e.key.rfind("optimizer.distributed.", 0) == 0) c.bucket_space = true;
  auto backend = make_cpu_backend(1);
  std::map<int, std::set<std::string>> files;
  const auto pairs = main_pairs(md, c.not_compared);
  if (progress) progress->set_stage(progress->stage(), pairs.size());
  for (const auto& pair : pairs) {
    if (progress) progress->check();
    try {
      const auto weight = read_weight(ckpt, pair);
      analysis::ParamReport r;
      r.name = pair.key;
      r.shape = pair.weight->size;
      r.numel = pair.weight->numel();
      r.lp_dtype = pair.lp;
      DivergenceStats total;
      for (const auto& chunk : pair.main->chunks) {
        const auto main = ckpt.read_chunk(*pair.main, chunk).to_float();
        const auto box = weight_box(weight, pair, chunk);
        const auto d = backend->divergence(box.data(), pair.lp, main.data(), main.size());
        total.merge(d);
        const int rank = chunk.item ? rank_of(chunk.item->file) : -1;
        r.per_rank[rank].merge(d);
        if (chunk.item) files[rank].insert(chunk.item->file);
      }
      r.lp_vs_fp32 = total;
      c.params.push_back(std::move(r));
      c.prefix = pair.prefix;
      c.lp_dtype = pair.lp;
    } catch (const Error& err) {  // the DCP diagnosis names the missing or damaged item
      c.not_compared.push_back(pair.key + ": " + err.what());
    }
    if (progress) progress->add(1);
  }
  for (auto& [rank, names] : files) c.files_by_rank[rank].assign(names.begin(), names.end());
  return c;
}

std::vector<analysis::Finding> main_param_findings(const MainParamComparison& c) {
  analysis::MasterContext ctx;
  ctx.lp_dtype = c.lp_dtype;
  ctx.masters = "fp32 main params (" + c.prefix + "<key>)";
  ctx.cause =
      "e.g. a --finetune / --no-load-optim load that never called optimizer.reload_model_params(), "
      "Megatron-LM "
      "#174";
  ctx.fix =
      "ckptdoc repair --refresh-fp32, or Megatron-LM's optimizer.reload_model_params() after loading the "
      "weights";
  ctx.files_of = [&c](const std::set<int>& ranks) {
    std::vector<std::string> out;
    for (int r : ranks)
      if (auto it = c.files_by_rank.find(r); it != c.files_by_rank.end())
        out.insert(out.end(), it->second.begin(), it->second.end());
    return out;
  };
  std::vector<analysis::Finding> out;
  analysis::master_findings(c.params, ctx, {}, out);
  return out;
}

}  // namespace ckptdoc::megatron
