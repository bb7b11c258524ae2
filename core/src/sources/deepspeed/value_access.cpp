#include "sources/deepspeed/value_access.h"

#include <cstring>

#include "ckptdoc/format/known_objects.h"

namespace ckptdoc::deepspeed::detail {

const Value* dict_get(const Value* d, std::string_view key) {
  if (!d || !d->is_dict()) return nullptr;
  const Value* v = d->get(key);
  if (!v || v->is_none()) return nullptr;
  return v;
}

const Value* int_key(const Value* d, int64_t key) {
  if (!d || !d->is_dict()) return nullptr;
  for (const auto& [k, v] : d->as_dict().items) {
    if (k.is(Value::Kind::Int) && k.as_int() == key) return &v;
    if (k.is(Value::Kind::Str) && k.as_str() == std::to_string(key)) return &v;
  }
  return nullptr;
}

const Value* list_at(const Value* v, size_t i) {
  if (!v || !v->is_sequence()) return nullptr;
  const auto& items = v->items();
  return i < items.size() ? &items[i] : nullptr;
}

namespace {
// Python >= 3.12 pickles enum members by name: getattr(ZeroStageEnum, 'gradients'), which is how the
// DeepSpeed fixtures store zero_stage.
std::optional<int64_t> enum_by_name(const Value& v) {
  if (!v.is(Value::Kind::Object)) return std::nullopt;
  const auto& o = v.as_object();
  if (o.name != "getattr" || (o.module != "__builtin__" && o.module != "builtins") || !o.args ||
      !o.args->is(Value::Kind::Tuple) || o.args->items().size() != 2) {
    return std::nullopt;
  }
  const Value& cls = o.args->items()[0];
  const Value& member = o.args->items()[1];
  if (!cls.is(Value::Kind::Global) || cls.as_global().second != "ZeroStageEnum" ||
      !member.is(Value::Kind::Str)) {
    return std::nullopt;
  }
  static const std::pair<const char*, int64_t> names[] = {
      {"disabled", 0}, {"optimizer_states", 1}, {"gradients", 2}, {"weights", 3}, {"max_stage", 3}};
  for (const auto& [n, value] : names)
    if (member.as_str() == n) return value;
  return std::nullopt;
}
}  // namespace

std::optional<int64_t> opt_int(const Value* v) {
  if (!v) return std::nullopt;
  switch (v->kind()) {
    case Value::Kind::Int:
    case Value::Kind::Bool:
    case Value::Kind::Object:
      if (auto z = zero_stage_value(*v)) return z;
      if (auto z = enum_by_name(*v)) return z;
      try {
        return v->as_int();
      } catch (...) {
        return std::nullopt;
      }
    default:
      return std::nullopt;
  }
}

std::optional<double> opt_float(const Value* v) {
  if (!v) return std::nullopt;
  if (v->is(Value::Kind::Float) || v->is(Value::Kind::Int)) return v->as_float();
  if (v->is(Value::Kind::Bool)) return v->as_bool() ? 1.0 : 0.0;
  return std::nullopt;
}

std::optional<std::string> opt_str(const Value* v) {
  if (!v || !v->is(Value::Kind::Str)) return std::nullopt;
  return v->as_str();
}

std::optional<bool> opt_bool(const Value* v) {
  if (!v) return std::nullopt;
  if (v->is(Value::Kind::Bool)) return v->as_bool();
  if (v->is(Value::Kind::Int)) return v->as_int() != 0;
  return std::nullopt;
}

std::optional<std::vector<int64_t>> shape_of(const Value* v) {
  if (!v) return std::nullopt;
  if (v->is(Value::Kind::Size)) return v->as_size();
  if (v->is_sequence()) {
    std::vector<int64_t> out;
    for (const auto& item : v->items()) {
      auto i = opt_int(&item);
      if (!i) return std::nullopt;
      out.push_back(*i);
    }
    return out;
  }
  return std::nullopt;
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<std::pair<std::string, const Value*>> str_items(const Value* d) {
  std::vector<std::pair<std::string, const Value*>> out;
  if (!d || !d->is_dict()) return out;
  for (const auto& [k, v] : d->as_dict().items) {
    if (k.is(Value::Kind::Str)) out.emplace_back(k.as_str(), &v);
  }
  return out;
}

const Value* attr_or_key(const Value* v, std::string_view name) {
  if (!v) return nullptr;
  if (v->is_dict()) return dict_get(v, name);
  if (v->is(Value::Kind::Object)) {
    if (is_loss_scaler(*v)) {
      if (const Value* st = loss_scaler_state(*v)) return dict_get(st, name);
    }
    try {
      return v->attr(name);
    } catch (...) {
      return nullptr;
    }
  }
  return nullptr;
}

std::optional<int64_t> tensor_numel(const Value* v) {
  if (!v || !v->is_tensor()) return std::nullopt;
  return v->as_tensor().numel();
}

std::optional<double> scalar_value(const Value* v) {
  if (!v) return std::nullopt;
  if (auto f = opt_float(v)) return f;
  if (v->is_tensor() && v->as_tensor().numel() == 1) {
    try {
      const auto vals = v->as_tensor().to_float();
      if (!vals.empty()) return vals[0];
    } catch (...) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace ckptdoc::deepspeed::detail
