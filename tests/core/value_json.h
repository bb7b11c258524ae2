#pragma once
// Encodes ckptdoc::Value trees in the typed JSON of tests/fixtures/pickle_json.py, so C++ results and Python
// values can be compared value by value.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>
#include <cstring>
#include <string>
#include <vector>

#include "ckptdoc/format/known_objects.h"
#include "ckptdoc/format/value.h"

namespace ckptdoc::test {

inline QString hex_of(const std::string& b) {
  return QString::fromLatin1(QByteArray(b.data(), static_cast<qsizetype>(b.size())).toHex());
}

inline QString float_hex(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  std::string be(8, '\0');
  for (int i = 0; i < 8; ++i) be[static_cast<size_t>(i)] = static_cast<char>(bits >> (8 * (7 - i)));
  return hex_of(be);
}

inline QJsonObject to_json(const Value& v);

inline QJsonArray items_json(const std::vector<Value>& items) {
  QJsonArray a;
  for (const auto& x : items) a.append(to_json(x));
  return a;
}
inline QJsonArray pairs_json(const std::vector<std::pair<Value, Value>>& items) {
  QJsonArray a;
  for (const auto& [k, x] : items) a.append(QJsonArray{to_json(k), to_json(x)});
  return a;
}
inline QJsonArray ints_json(const std::vector<int64_t>& d) {
  QJsonArray a;
  for (auto x : d) a.append(static_cast<qint64>(x));
  return a;
}

inline QJsonObject to_json(const Value& v) {
  using K = Value::Kind;
  auto S = [](const std::string& s) { return QString::fromStdString(s); };
  switch (v.kind()) {
    case K::None:
      return {{"t", "none"}};
    case K::Bool:
      return {{"t", "bool"}, {"v", v.as_bool()}};
    case K::Int:
    case K::BigInt:
      return {{"t", "int"}, {"v", S(v.repr(100000))}};
    case K::Float:
      return {{"t", "float"}, {"v", float_hex(v.as_float())}};
    case K::Str:
      return {{"t", "str"}, {"v", S(v.as_str())}};
    case K::Bytes:
      return {{"t", "bytes"}, {"v", hex_of(v.as_str())}};
    case K::List:
      return {{"t", "list"}, {"items", items_json(v.items())}};
    case K::Tuple:
      return {{"t", "tuple"}, {"items", items_json(v.items())}};
    case K::Set:
      return {{"t", "set"}, {"items", items_json(v.items())}};
    case K::FrozenSet:
      return {{"t", "frozenset"}, {"items", items_json(v.items())}};
    case K::Dict: {
      QJsonObject o{{"t", v.as_dict().ordered ? "odict" : "dict"}, {"items", pairs_json(v.as_dict().items)}};
      if (v.as_dict().state && !(v.as_dict().state->is_dict() && v.as_dict().state->as_dict().items.empty()))
        o["state"] = to_json(*v.as_dict().state);
      return o;
    }
    case K::Tensor: {
      const auto& t = v.as_tensor();
      QJsonArray vals;
      for (float f : t.to_float()) vals.append(static_cast<double>(f));
      return {{"t", "tensor"},
              {"dtype", S(std::string(dtype_name(t.dtype)))},
              {"shape", ints_json(t.shape)},
              {"parameter", t.is_parameter},
              {"requires_grad", t.requires_grad},
              {"values", vals}};
    }
    case K::Storage:
      return {{"t", "storage"}, {"key", S(v.as_storage()->key)}};
    case K::Size:
      return {{"t", "size"}, {"v", ints_json(v.as_size())}};
    case K::DType:
      return {{"t", "dtype"}, {"v", S(v.as_str())}};
    case K::Device:
      return {{"t", "device"}, {"v", S(v.as_str())}};
    case K::Global:
      return {{"t", "global"}, {"module", S(v.as_global().first)}, {"name", S(v.as_global().second)}};
    case K::Object: {
      if (auto c = complex_of(v))
        return {{"t", "complex"}, {"re", float_hex(c->first)}, {"im", float_hex(c->second)}};
      if (auto a = numpy_array_of(v))
        return {{"t", "ndarray"},
                {"dtype", S(a->dtype)},
                {"shape", ints_json(a->shape)},
                {"data", hex_of(a->data)}};
      if (auto s = numpy_scalar_of(v))
        return {{"t", "npscalar"}, {"dtype", S(s->first)}, {"data", hex_of(s->second)}};
      const auto& o = v.as_object();
      std::string module = o.module, name = o.name;
      // Protocols 0-1 build plain instances through copyreg._reconstructor(cls, object, None).
      if ((module == "copy_reg" || module == "copyreg") && name == "_reconstructor" && o.args &&
          o.args->is(K::Tuple) && !o.args->items().empty() && o.args->items()[0].is(K::Global)) {
        module = o.args->items()[0].as_global().first;
        name = o.args->items()[0].as_global().second;
      } else if (o.how == ObjectData::How::Reduce && !o.state && o.args && o.args->is(K::Tuple) &&
                 o.args->items().size() == 1 && o.args->items()[0].is(K::Int)) {
        return {
            {"t", "enum"}, {"module", S(module)}, {"name", S(name)}, {"v", S(std::to_string(v.as_int()))}};
      } else if (name == "getattr" && (module == "builtins" || module == "__builtin__") && o.args &&
                 o.args->is(K::Tuple) && o.args->items().size() == 2 && o.args->items()[0].is(K::Global) &&
                 o.args->items()[1].is(K::Str)) {
        return {{"t", "enum"},
                {"module", S(o.args->items()[0].as_global().first)},
                {"name", S(o.args->items()[0].as_global().second)},
                {"member", S(o.args->items()[1].as_str())}};
      }
      QJsonObject out{{"t", "object"}, {"module", S(module)}, {"name", S(name)}};
      if (o.state) out["state"] = to_json(*o.state);
      return out;
    }
  }
  return {};
}

// Equality of typed JSON, except that an "enum" may carry only one of "v"/"member" (the stream has one form).
inline bool json_match(const QJsonValue& got, const QJsonValue& want) {
  if (got.isArray() && want.isArray()) {
    const auto a = got.toArray(), b = want.toArray();
    if (a.size() != b.size()) return false;
    for (qsizetype i = 0; i < a.size(); ++i)
      if (!json_match(a[i], b[i])) return false;
    return true;
  }
  if (got.isObject() && want.isObject()) {
    const auto a = got.toObject(), b = want.toObject();
    const bool is_enum = a["t"] == QJsonValue("enum") && b["t"] == QJsonValue("enum");
    if ((a["t"] == QJsonValue("set") || a["t"] == QJsonValue("frozenset")) && a["t"] == b["t"]) {
      // Set order depends on each process's string hashing: compare as multisets.
      auto x = a["items"].toArray(), y = b["items"].toArray();
      if (x.size() != y.size()) return false;
      std::vector<bool> used(static_cast<size_t>(y.size()), false);
      for (const auto& e : x) {
        bool found = false;
        for (qsizetype j = 0; j < y.size() && !found; ++j)
          if (!used[static_cast<size_t>(j)] && json_match(e, y[j]))
            found = used[static_cast<size_t>(j)] = true;
        if (!found) return false;
      }
      return true;
    }
    if (!is_enum && a.keys() != b.keys()) return false;
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !json_match(it.value(), b[it.key()])) return false;
    return true;
  }
  return got == want;
}

inline QString compact(const QJsonObject& o, int max = 3000) {
  return QString::fromUtf8(QJsonDocument(o).toJson(QJsonDocument::Compact)).left(max);
}

}  // namespace ckptdoc::test
