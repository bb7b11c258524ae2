#include "ckptdoc/format/known_objects.h"

#include <algorithm>
#include <cstring>

namespace ckptdoc {
namespace {

using K = Value::Kind;

bool is_module(const std::string& m, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (m == n) return true;
  return false;
}

const std::vector<Value>* args_of(const Value& v) {
  if (!v.is(K::Object)) return nullptr;
  const auto& o = v.as_object();
  if (!o.args || !o.args->is(K::Tuple)) return nullptr;
  return &o.args->items();
}

const Value* state_dict(const Value& v) {
  if (!v.is(K::Object)) return nullptr;
  const auto& st = v.as_object().state;
  if (!st) return nullptr;
  if (st->is_dict()) return st.get();
  if (st->is(K::Tuple) && st->items().size() == 2 && st->items()[0].is_dict()) return &st->items()[0];
  return nullptr;
}

}  // namespace

std::optional<int64_t> zero_stage_value(const Value& v) {
  if (v.is(K::Int)) return v.as_int();
  if (v.is_object("deepspeed.runtime.zero.config", "ZeroStageEnum")) {
    const auto* a = args_of(v);
    if (a && a->size() == 1 && (*a)[0].is(K::Int)) return (*a)[0].as_int();
  }
  // Python 3.11+: getattr(ZeroStageEnum, 'gradients'); Value::as_int knows the members.
  if (v.is(K::Object) && v.as_object().name == "getattr") {
    const auto* a = args_of(v);
    if (a && a->size() == 2 && (*a)[0].is(K::Global) &&
        (*a)[0].as_global() ==
            std::make_pair(std::string("deepspeed.runtime.zero.config"), std::string("ZeroStageEnum"))) {
      try {
        return v.as_int();
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

std::optional<std::pair<int64_t, int64_t>> fragment_address_of(const Value& v) {
  if (!v.is(K::Object) || v.as_object().name != "fragment_address" ||
      !is_module(v.as_object().module,
                 {"deepspeed.utils.tensor_fragment", "deepspeed.runtime.bf16_optimizer"}))
    return std::nullopt;
  if (const Value* st = state_dict(v)) {
    const Value* n = st->get("numel");
    const Value* s = st->get("start");
    if (n && s && n->is(K::Int) && s->is(K::Int)) return std::make_pair(n->as_int(), s->as_int());
  }
  if (const auto* a = args_of(v); a && a->size() == 2 && (*a)[0].is(K::Int) && (*a)[1].is(K::Int))
    return std::make_pair((*a)[0].as_int(), (*a)[1].as_int());
  return std::nullopt;
}

bool is_loss_scaler(const Value& v) {
  return v.is(K::Object) && v.as_object().module == "deepspeed.runtime.fp16.loss_scaler" &&
         (v.as_object().name == "LossScaler" || v.as_object().name == "DynamicLossScaler");
}

const Value* loss_scaler_state(const Value& v) {
  return is_loss_scaler(v) ? state_dict(v) : nullptr;
}

const Value* namespace_attrs(const Value& v) {
  return v.is_object("argparse", "Namespace") ? state_dict(v) : nullptr;
}

std::optional<std::pair<double, double>> complex_of(const Value& v) {
  if (!v.is(K::Object) || v.as_object().name != "complex" ||
      !is_module(v.as_object().module, {"builtins", "__builtin__"}))
    return std::nullopt;
  const auto* a = args_of(v);
  if (!a || a->empty() || a->size() > 2) return std::nullopt;
  for (const auto& x : *a)
    if (!x.is(K::Float) && !x.is(K::Int)) return std::nullopt;
  return std::make_pair((*a)[0].as_float(), a->size() == 2 ? (*a)[1].as_float() : 0.0);
}

std::optional<std::string> numpy_dtype_of(const Value& v) {
  if (!v.is_object("numpy", "dtype")) return std::nullopt;
  const auto* a = args_of(v);
  if (!a || a->empty() || !(*a)[0].is(K::Str)) return std::nullopt;
  std::string order = "|";
  const auto& st = v.as_object().state;
  if (st && st->is(K::Tuple) && st->items().size() >= 2 && st->items()[1].is(K::Str))
    order = st->items()[1].as_str();
  return order + (*a)[0].as_str();
}

std::optional<NumpyArray> numpy_array_of(const Value& v) {
  if (!v.is(K::Object)) return std::nullopt;
  const auto& o = v.as_object();
  const auto* a = args_of(v);
  if (!a) return std::nullopt;
  NumpyArray arr;
  if (o.name == "_reconstruct" && is_module(o.module, {"numpy.core.multiarray", "numpy._core.multiarray"})) {
    // BUILD((version, shape, dtype, is_fortran, data))
    if (!o.state || !o.state->is(K::Tuple) || o.state->items().size() != 5) return std::nullopt;
    const auto& s = o.state->items();
    if (!s[1].is(K::Tuple)) return std::nullopt;
    for (const auto& d : s[1].items()) {
      if (!d.is(K::Int)) return std::nullopt;
      arr.shape.push_back(d.as_int());
    }
    auto dt = numpy_dtype_of(s[2]);
    if (!dt || !s[3].is(K::Bool)) return std::nullopt;
    arr.dtype = *dt;
    arr.fortran_order = s[3].as_bool();
    if (s[4].is(K::Bytes) || s[4].is(K::Str))
      arr.data = s[4].as_str();
    else if (s[4].is(K::List))
      arr.objects = &s[4];
    else
      return std::nullopt;
    return arr;
  }
  if (o.name == "_frombuffer" && is_module(o.module, {"numpy.core.numeric", "numpy._core.numeric"})) {
    // (buffer, dtype, shape, order)
    if (a->size() != 4 || !(*a)[0].is(K::Bytes) || !(*a)[2].is(K::Tuple) || !(*a)[3].is(K::Str))
      return std::nullopt;
    auto dt = numpy_dtype_of((*a)[1]);
    if (!dt) return std::nullopt;
    arr.dtype = *dt;
    for (const auto& d : (*a)[2].items()) {
      if (!d.is(K::Int)) return std::nullopt;
      arr.shape.push_back(d.as_int());
    }
    arr.fortran_order = (*a)[3].as_str() == "F";
    arr.data = (*a)[0].as_str();
    return arr;
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> numpy_scalar_of(const Value& v) {
  if (!v.is(K::Object) || v.as_object().name != "scalar" ||
      !is_module(v.as_object().module, {"numpy.core.multiarray", "numpy._core.multiarray"}))
    return std::nullopt;
  const auto* a = args_of(v);
  if (!a || a->size() != 2 || !(*a)[1].is(K::Bytes)) return std::nullopt;
  auto dt = numpy_dtype_of((*a)[0]);
  if (!dt) return std::nullopt;
  return std::make_pair(*dt, (*a)[1].as_str());
}

std::optional<double> numpy_scalar_as_double(const Value& v) {
  auto s = numpy_scalar_of(v);
  if (!s || s->first.size() < 3) return std::nullopt;
  const char order = s->first[0];
  const char kind = s->first[1];
  size_t size = 0;
  for (size_t i = 2; i < s->first.size(); ++i) {
    if (s->first[i] < '0' || s->first[i] > '9') return std::nullopt;
    size = size * 10 + static_cast<size_t>(s->first[i] - '0');
  }
  std::string b = s->second;
  if (b.size() != size || size == 0 || size > 8) return std::nullopt;
  if (order == '>') std::reverse(b.begin(), b.end());
  uint64_t u = 0;
  std::memcpy(&u, b.data(), size);
  switch (kind) {
    case 'b':
      return u ? 1.0 : 0.0;
    case 'u':
      return static_cast<double>(u);
    case 'i': {
      if (size < 8 && (u >> (8 * size - 1)) & 1) u |= ~uint64_t{0} << (8 * size);
      return static_cast<double>(static_cast<int64_t>(u));
    }
    case 'f':
      if (size == 8) {
        double d;
        std::memcpy(&d, &u, 8);
        return d;
      }
      if (size == 4) {
        float f;
        uint32_t w = static_cast<uint32_t>(u);
        std::memcpy(&f, &w, 4);
        return f;
      }
      if (size == 2) return half_to_float(static_cast<uint16_t>(u));
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace ckptdoc
