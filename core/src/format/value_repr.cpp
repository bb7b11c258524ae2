// Value::repr: a Python-like one-line rendering, truncated.
#include <cmath>
#include <cstring>
#include <limits>

#include "ckptdoc/format/value.h"

namespace ckptdoc {

// ---------------------------------------------------------------------------------------------------------
// repr

namespace {
std::string quote(const std::string& s, bool is_bytes) {
  std::string out = is_bytes ? "b'" : "'";
  for (unsigned char c : s) {
    switch (c) {
      case '\'':
        out += "\\'";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f || (is_bytes && c >= 0x80)) {
          static const char* hex = "0123456789abcdef";
          out += "\\x";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '\'';
  return out;
}

std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string big_to_decimal(const std::vector<uint8_t>& le) {
  // Magnitude in base 1e9 limbs.
  const bool neg = !le.empty() && (le.back() & 0x80);
  std::vector<uint8_t> mag = le;
  if (neg) {  // two's complement negate
    unsigned carry = 1;
    for (auto& b : mag) {
      unsigned x = static_cast<uint8_t>(~b) + carry;
      b = static_cast<uint8_t>(x);
      carry = x >> 8;
    }
  }
  std::vector<uint32_t> dec{0};
  for (size_t i = mag.size(); i-- > 0;) {
    uint64_t carry = mag[i];
    for (auto& limb : dec) {
      uint64_t x = static_cast<uint64_t>(limb) * 256 + carry;
      limb = static_cast<uint32_t>(x % 1000000000u);
      carry = x / 1000000000u;
    }
    while (carry) {
      dec.push_back(static_cast<uint32_t>(carry % 1000000000u));
      carry /= 1000000000u;
    }
  }
  std::string s = std::to_string(dec.back());
  for (size_t i = dec.size() - 1; i-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%09u", dec[i]);
    s += buf;
  }
  return neg ? "-" + s : s;
}

void repr_into(const Value& v, std::string& out, size_t limit) {
  using K = Value::Kind;
  if (out.size() > limit) return;
  auto seq = [&](const std::vector<Value>& items, const char* open, const char* close, bool one_tuple) {
    out += open;
    for (size_t i = 0; i < items.size(); ++i) {
      if (out.size() > limit) return;
      if (i) out += ", ";
      repr_into(items[i], out, limit);
    }
    if (one_tuple && items.size() == 1) out += ",";
    out += close;
  };
  auto kv = [&](const std::vector<std::pair<Value, Value>>& items) {
    out += "{";
    for (size_t i = 0; i < items.size(); ++i) {
      if (out.size() > limit) return;
      if (i) out += ", ";
      repr_into(items[i].first, out, limit);
      out += ": ";
      repr_into(items[i].second, out, limit);
    }
    out += "}";
  };
  auto dims = [&](const std::vector<int64_t>& d) {
    out += "[";
    for (size_t i = 0; i < d.size(); ++i) out += (i ? ", " : "") + std::to_string(d[i]);
    out += "]";
  };
  switch (v.kind()) {
    case K::None:
      out += "None";
      break;
    case K::Bool:
      out += v.as_bool() ? "True" : "False";
      break;
    case K::Int:
      out += std::to_string(v.as_int());
      break;
    case K::BigInt:
      out += big_to_decimal(v.as_big_int());
      break;
    case K::Float:
      out += format_double(v.as_float());
      break;
    case K::Str:
      out += quote(v.as_str(), false);
      break;
    case K::Bytes:
      out += quote(v.as_str(), true);
      break;
    case K::List:
      seq(v.items(), "[", "]", false);
      break;
    case K::Tuple:
      seq(v.items(), "(", ")", true);
      break;
    case K::Set:
      if (v.items().empty())
        out += "set()";
      else
        seq(v.items(), "{", "}", false);
      break;
    case K::FrozenSet:
      out += "frozenset(";
      seq(v.items(), "{", "}", false);
      out += ")";
      break;
    case K::Dict:
      if (v.as_dict().ordered) {
        out += "OrderedDict(";
        kv(v.as_dict().items);
        out += ")";
      } else {
        kv(v.as_dict().items);
      }
      break;
    case K::Tensor: {
      const auto& t = v.as_tensor();
      out += t.is_parameter ? "Parameter(" : "tensor(";
      out += dtype_name(t.dtype);
      out += ", ";
      dims(t.shape);
      if (!t.is_contiguous()) {
        out += ", stride=";
        dims(t.strides);
      }
      if (t.storage) out += ", storage='" + t.storage->key + "'";
      out += ")";
      break;
    }
    case K::Storage: {
      const auto& s = *v.as_storage();
      out += "storage(" + std::string(dtype_name(s.dtype)) + ", numel=" + std::to_string(s.numel) +
             ", key='" + s.key + "', " + s.location + ")";
      break;
    }
    case K::Size:
      out += "torch.Size(";
      dims(v.as_size());
      out += ")";
      break;
    case K::DType:
      out += "torch." + v.as_str();
      break;
    case K::Device:
      out += "device(type='" + v.as_str() + "')";
      break;
    case K::Global:
      out += "<global " + v.as_global().first + "." + v.as_global().second + ">";
      break;
    case K::Object: {
      const auto& o = v.as_object();
      if (o.callable) {
        repr_into(*o.callable, out, limit);
        out += "(";
      } else {
        out += o.qualified() + "(";
      }
      bool first = true;
      auto sep = [&] {
        if (!first) out += ", ";
        first = false;
      };
      if (o.args && !(o.args->is(K::Tuple) && o.args->items().empty())) {
        sep();
        if (o.args->is(K::Tuple)) {
          const auto& a = o.args->items();
          for (size_t i = 0; i < a.size(); ++i) {
            if (out.size() > limit) return;
            if (i) out += ", ";
            repr_into(a[i], out, limit);
          }
        } else {
          repr_into(*o.args, out, limit);
        }
      }
      if (o.kwargs) {
        sep();
        out += "**";
        repr_into(*o.kwargs, out, limit);
      }
      if (o.state) {
        sep();
        out += "state=";
        repr_into(*o.state, out, limit);
      }
      if (!o.list_items.empty()) {
        sep();
        out += "items=";
        seq(o.list_items, "[", "]", false);
      }
      if (!o.dict_items.empty()) {
        sep();
        out += "dict_items=";
        kv(o.dict_items);
      }
      out += ")";
      break;
    }
  }
}
}  // namespace

std::string Value::repr(size_t max_chars) const {
  std::string out;
  repr_into(*this, out, max_chars);
  if (out.size() > max_chars) {
    out.resize(max_chars > 3 ? max_chars - 3 : 0);
    out += "...";
  }
  return out;
}

}  // namespace ckptdoc
