// distrib_optim.pt read inertly and its fp32 mains placed on the params (legacy_distopt.h).
#include "legacy_distopt.h"

namespace ckptdoc::megatron_legacy {
namespace {

constexpr int64_t kParamAlignment = 64;  // param_layout.py:24-26 (0.18.0): each param's start, in elements

std::string dtype_pair(const Value& k) {
  if (!k.is_sequence()) return k.repr(60);
  std::string s = "(";
  for (size_t i = 0; i < k.items().size(); ++i) {
    const auto& v = k.items()[i];
    s += (i ? ", " : "") + (v.is(Value::Kind::DType) ? v.as_str() : v.repr(30));
  }
  return s + ")";
}

void place(DistOptState& d, const RankContent& rank) {
  if (rank.model.empty()) {
    d.why = "the rank file's model was not read";
    return;
  }
  for (const auto& t : rank.model)
    if (t.tensor.dtype != rank.model.front().tensor.dtype) {
      d.why = "the model's params are of more than one dtype (one grad buffer each): not placed";
      return;
    }
  // reverse named_parameters order, each start 64-aligned (one bucket; see legacy_distopt.h)
  int64_t at = 0;
  for (size_t i = rank.model.size(); i-- > 0;) {
    at = (at + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
    d.slots.push_back({i, at});
    at += rank.model[i].tensor.numel();
  }
  if (at != d.numel_unpadded || d.param.numel() != d.numel_unpadded) {
    d.slots.clear();
    d.why = "its buffer holds " + std::to_string(d.numel_unpadded) +
            " elements, the model's params laid out in "
            "megatron-core's order " +
            std::to_string(at) + " (several buckets, frozen params or another layout): not placed";
  }
}

}  // namespace

DistOptState read_distopt(const std::string& path, const std::string& shown, const RankContent& rank) {
  DistOptState d;
  d.path = path;
  d.shown = shown;
  d.hazards = pickle_hazards_of_file(path, shown);
  try {
    auto tf = std::make_shared<TorchFile>(TorchFile::open(path));
    const Value& root = tf->root;
    if (!root.is_dict())
      throw Error(ErrorKind::Unsupported, path, "", "its root is a " + root.type_name() + ", not a dict");
    size_t buffers = 0;
    for (const auto& [k, v] : root.as_dict().items) {
      if (!k.is(Value::Kind::Int) || !v.is_dict()) continue;
      ++buffers;
      for (const auto& [dk, state] : v.as_dict().items) {
        const std::string dtypes = dtype_pair(dk);
        if (!state.is_dict()) continue;
        for (const auto& [name, t] : state.as_dict().items)
          if (name.is(Value::Kind::Str) && t.is_tensor())
            d.tensors.push_back(
                {std::to_string(k.as_int()) + "." + dtypes + "." + name.as_str(), t.as_tensor()});
        if (k.as_int() != 0 || v.as_dict().items.size() != 1) continue;
        d.dtypes = dtypes;
        if (const Value* p = state.get("param"); p && p->is_tensor()) d.param = p->as_tensor();
        if (const Value* n = state.get("numel_unpadded"); n && n->is(Value::Kind::Int))
          d.numel_unpadded = n->as_int();
      }
    }
    const Value* coalesced = root.get("buckets_coalesced");
    if (!coalesced || !coalesced->is(Value::Kind::Bool) || !coalesced->as_bool())
      d.why = "its buckets are not coalesced (an older layout): not placed";
    else if (buffers != 1)
      d.why = "it holds " + std::to_string(buffers) + " grad buffers (model chunks or dtypes): not placed";
    else if (d.param.dtype != DType::F32 || d.param.shape.size() != 1)
      d.why = "buffer 0 holds no one-dtype 1-D float32 \"param\" state: not placed";
    else
      place(d, rank);
    d.file = std::move(tf);
  } catch (const Error& e) {
    d.error = e.what();
    d.error_kind = e.kind();
  } catch (const std::exception& e) {
    d.error = shown + ": " + e.what();
  }
  return d;
}

}  // namespace ckptdoc::megatron_legacy
