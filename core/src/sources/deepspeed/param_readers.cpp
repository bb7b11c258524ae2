// Per-param readers over a checkpoint's partitions and over lp weights (see param_readers.h).
#include "sources/deepspeed/param_readers.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/format/safetensors.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "ckptdoc/weights/weights_source.h"
#include "format/tensor_pages.h"

namespace ckptdoc::deepspeed::detail {

SourceLayout source_layout(const deepspeed::Checkpoint& ckpt) {
  const auto& cat = ckpt.catalog();
  SourceLayout s;
  s.zero3 = cat.wrapper == OptimizerWrapper::Zero3;
  s.bf16_optimizer = cat.wrapper == OptimizerWrapper::BF16Optimizer;
  s.groups = cat.groups;
  s.dp = s.groups.empty() ? cat.dp_world_size : static_cast<int>(s.groups.front().partitions.size());
  for (const auto& g : s.groups) {
    for (const auto& p : g.params) {
      ParamPlace pp{p.name, p.shape, p.numel, g.index, p.offset};
      s.params[p.name] = pp;
      s.order.push_back(p.name);
    }
  }
  return s;
}

StateReader::StateReader(const deepspeed::Checkpoint& ckpt, const SourceLayout& layout)
    : ckpt_(ckpt), layout_(layout) {}

std::span<const float> StateReader::span(const std::string& field, int rank, int group) const {
  const auto key = std::make_tuple(field, rank, group);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    // A missing or unreadable rank, or a field it lacks while others hold it, throws here naming file, key
    // and rank: a repair never writes zeros in place of data.
    std::optional<Tensor> t =
        field == "fp32" ? ckpt_.fp32_partition(group, rank) : ckpt_.moment_partition(group, rank, field);
    if (!t)
      throw Error(ErrorKind::NotFound, where(rank), "'" + field + "' of group " + std::to_string(group),
                  "the checkpoint holds none");
    if (t->dtype != DType::F32 || !t->is_contiguous()) {
      // Rare (a non-fp32 master, e.g. fp32_optimizer_states off): keep a float copy.
      auto f = t->to_float();
      std::vector<uint8_t> bytes(f.size() * 4);
      if (!f.empty()) std::memcpy(bytes.data(), f.data(), bytes.size());
      t = Tensor::from_bytes(DType::F32, {static_cast<int64_t>(f.size())}, std::move(bytes));
    }
    it = cache_.emplace(key, std::move(*t)).first;
  }
  const auto b = it->second.contiguous_bytes();
  return {reinterpret_cast<const float*>(b.data()), b.size() / 4};
}

std::string StateReader::where(int rank) const {
  const auto* f = ckpt_.catalog().optim_file(rank);
  return f ? f->abs_path : ckpt_.catalog().tag_dir + " (dp rank " + std::to_string(rank) + ")";
}

bool StateReader::has_field(const std::string& field) const {
  if (layout_.groups.empty()) return false;
  if (field == "fp32") return true;
  const auto& keys = ckpt_.catalog().group_state_keys;
  return !keys.empty() && std::find(keys[0].begin(), keys[0].end(), field) != keys[0].end();
}

void StateReader::read(const std::string& field, const std::string& param, int64_t first, int64_t n,
                       float* out) const {
  const auto it = layout_.params.find(param);
  if (it == layout_.params.end())
    throw Error(ErrorKind::InvalidRequest, "", "param '" + param + "'",
                "not a trainable param of the checkpoint");
  const ParamPlace& p = it->second;
  const auto& g = layout_.groups[static_cast<size_t>(p.group)];
  const int dp = layout_.dp;  // ZeRO-3: every param is split over all dp ranks
  int64_t done = 0;
  while (done < n) {
    const int64_t e = first + done;
    int q;
    int64_t pos, run;
    if (layout_.zero3) {
      const int64_t part = deepspeed::zero3_partition_numel(p.numel, dp);
      q = static_cast<int>(e / part);
      pos = p.offset + e % part;
      run = std::min(n - done, part - e % part);
    } else {
      const int64_t P = g.partition_numel;
      const int64_t idx = p.offset + e;
      q = static_cast<int>(idx / P);
      pos = idx % P;
      run = std::min(n - done, P - pos);
    }
    // Partition q's file: dp rank q, or for an expert group the dp rank holding that expert-parallel
    // instance.
    if (q < 0 || static_cast<size_t>(q) >= g.partitions.size())
      throw Error(ErrorKind::Inconsistent, "", "param '" + param + "'",
                  "element " + std::to_string(e) + " lies beyond the " + std::to_string(g.partitions.size()) +
                      " ranks' partitions");
    const int rank = g.partitions[static_cast<size_t>(q)].rank;
    const auto s = span(field, rank, p.group);
    if (pos + run > static_cast<int64_t>(s.size()))
      throw Error(ErrorKind::Inconsistent, where(rank), "'" + field + "' of group " + std::to_string(p.group),
                  "dp rank " + std::to_string(rank) + " holds " + std::to_string(s.size()) +
                      " elements; param '" + param + "' needs elements up to " + std::to_string(pos + run) +
                      " (a short partition: data is missing)");
    std::copy(s.begin() + pos, s.begin() + pos + run, out + done);
    done += run;
  }
}

const Tensor* LpReader::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void LpReader::read(const std::string& name, int64_t first, int64_t n, float* out) const {
  const Tensor* t = find(name);
  if (!t) throw Error(ErrorKind::NotFound, "", "param '" + name + "'", "no 16-bit weight for it");
  std::span<const uint8_t> bytes;
  if (t->is_contiguous() && t->storage && t->storage->has_bytes()) {
    bytes = t->contiguous_bytes();
  } else {
    auto& c = copies_[name];
    if (c.empty()) c = t->to_bytes();
    bytes = c;
  }
  const size_t es = element_size(t->dtype);
  if (static_cast<uint64_t>(first + n) * es > bytes.size())
    throw Error(ErrorKind::Inconsistent, "", "param '" + name + "'", "16-bit weight shorter than the param");
  const uint8_t* p = bytes.data() + static_cast<size_t>(first) * es;
  switch (t->dtype) {
    case DType::F16:
    case DType::BF16:
    case DType::F32:
      backend_.upcast(p, t->dtype, out, static_cast<size_t>(n));
      break;
    default: {
      Tensor tmp =
          Tensor::from_bytes(t->dtype, {n}, std::vector<uint8_t>(p, p + static_cast<size_t>(n) * es));
      const auto f = tmp.to_float();
      std::copy(f.begin(), f.end(), out);
    }
  }
  // A repair reads each weight once: the pages of a mapped one need not stay resident.
  if (bytes.data() != nullptr && copies_.count(name) == 0) release_pages(*t, first, n);
}

void add_module_lp(const deepspeed::Checkpoint& ckpt, const SourceLayout& layout, LpReader& lp) {
  for (const auto& name : layout.order) {
    if (auto t = ckpt.lp_param(name)) lp.add(name, *t);
  }
}

namespace {

std::string strip_module_prefix(const std::string& n) {
  return n.rfind("module.", 0) == 0 ? n.substr(7) : n;
}

}  // namespace

std::shared_ptr<void> add_file_lp(const std::string& path, LpReader& lp) {
  std::error_code ec;
  const bool folder = std::filesystem::is_directory(path, ec);
  if (folder || (path.size() > 11 && path.compare(path.size() - 11, 11, ".index.json") == 0)) {
    // A Hugging Face folder or index: every shard's tensors.
    auto source = weights::WeightsSource::open(path);
    for (const auto& t : source->tensors()) {
      lp.add(t.name, t.tensor);
      lp.add(strip_module_prefix(t.name), t.tensor);
    }
    return std::const_pointer_cast<weights::WeightsSource>(source);
  }
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(ErrorKind::NotFound, path, "", request_text("no such file ({lp_source})"));
  auto head = MappedFile::open(path);
  if (SafetensorsFile::looks_like_safetensors(
          head->bytes().subspan(0, std::min<size_t>(head->bytes().size(), 64)), head->size())) {
    auto st = std::make_shared<SafetensorsFile>(SafetensorsFile::open(path));
    for (const auto& e : st->entries) {
      lp.add(e.name, e.tensor);
      lp.add(strip_module_prefix(e.name), e.tensor);
    }
    return st;
  }
  auto tf = std::make_shared<TorchFile>(TorchFile::open(path));
  const Value* sd = &tf->root;
  for (const char* k : {"module", "state_dict", "model"}) {
    const Value* inner = sd->get(k);
    if (inner && inner->is_dict()) {
      sd = inner;
      break;
    }
  }
  if (!sd->is_dict()) throw Error(ErrorKind::Unsupported, path, "", "expected a state dict (name -> tensor)");
  for (const auto& [k, v] : sd->as_dict().items) {
    if (!k.is(Value::Kind::Str) || !v.is_tensor()) continue;
    lp.add(k.as_str(), v.as_tensor());
    lp.add(strip_module_prefix(k.as_str()), v.as_tensor());
  }
  return tf;
}

}  // namespace ckptdoc::deepspeed::detail
