// Protocol-2 pickle writer restricted to the opcodes torch's weights_only unpickler (1.13 and newer) accepts.
#include "ckptdoc/format/pickler.h"

#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "ckptdoc/error.h"

namespace ckptdoc {
namespace {

constexpr size_t kBatch = 1000;      // CPython's APPENDS/SETITEMS batch size
constexpr size_t kMaxDepth = 10000;  // recursion bound for hand-built trees

class Writer {
 public:
  explicit Writer(const PickleOptions& o) : opt_(o) {}
  std::vector<uint8_t> out;

  void op(uint8_t b) { out.push_back(b); }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  void le(uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void global(std::string_view module, std::string_view name) {
    if (module.find('\n') != std::string_view::npos || name.find('\n') != std::string_view::npos)
      throw Error(ErrorKind::InvalidRequest, "", "", "cannot pickle a global whose name contains a newline");
    // A dotted name (read from a protocol 4 stream) is an attribute walk there, but a protocol-2 GLOBAL looks
    // the whole string up as one attribute: written as it is, torch / os.system would load as an
    // AttributeError instead of os.system. Like CPython at protocols below 4, write it as getattr calls on
    // its first part, so the output reaches what the input reached.
    std::vector<std::string_view> parts;
    for (size_t at = 0;;) {
      const size_t dot = name.find('.', at);
      parts.push_back(name.substr(at, dot == std::string_view::npos ? dot : dot - at));
      if (dot == std::string_view::npos) break;
      at = dot + 1;
    }
    for (const auto& p : parts)
      if (p.empty())
        throw Error(ErrorKind::InvalidRequest, "", "",
                    "cannot pickle a global whose dotted name has an empty part");
    for (size_t i = 1; i < parts.size(); ++i) plain_global("builtins", "getattr");
    plain_global(module, parts[0]);
    for (size_t i = 1; i < parts.size(); ++i) {
      str(parts[i]);
      op(0x86);
      op('R');
    }
  }
  void plain_global(std::string_view module, std::string_view name) {
    op('c');
    raw(module.data(), module.size());
    op('\n');
    raw(name.data(), name.size());
    op('\n');
  }
  void str(std::string_view s) {
    if (s.size() > UINT32_MAX) throw Error(ErrorKind::Unsupported, "", "", "string too long for protocol 2");
    op('X');
    le(s.size(), 4);
    raw(s.data(), s.size());
  }
  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');
      op(static_cast<uint8_t>(v));
    } else if (v >= 0 && v < 65536) {
      op('M');
      le(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      le(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    } else {
      // Minimal little-endian two's complement.
      std::vector<uint8_t> b;
      auto u = static_cast<uint64_t>(v);
      for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(u >> (8 * i)));
      while (b.size() > 1 &&
             ((b.back() == 0 && !(b[b.size() - 2] & 0x80)) || (b.back() == 0xff && (b[b.size() - 2] & 0x80))))
        b.pop_back();
      op(0x8a);
      op(static_cast<uint8_t>(b.size()));
      raw(b.data(), b.size());
    }
  }
  void memoize(const void* id) {
    if (!id) return;
    const uint64_t idx = memo_.size();
    memo_.emplace(id, idx);
    if (idx < 256) {
      op('q');
      op(static_cast<uint8_t>(idx));
    } else {
      op('r');
      le(idx, 4);
    }
  }
  bool memo_get(const void* id) {
    auto it = memo_.find(id);
    if (it == memo_.end()) return false;
    if (it->second < 256) {
      op('h');
      op(static_cast<uint8_t>(it->second));
    } else {
      op('j');
      le(it->second, 4);
    }
    return true;
  }
  void empty_ordered_dict() {
    global("collections", "OrderedDict");
    op(')');
    op('R');
  }
  void tuple_of_ints(const std::vector<int64_t>& v) {
    if (v.empty()) {
      op(')');
      return;
    }
    if (v.size() > 3) op('(');
    for (int64_t x : v) integer(x);
    op(v.size() == 1 ? 0x85 : v.size() == 2 ? 0x86 : v.size() == 3 ? 0x87 : 't');
  }
  void storage_pid(const std::shared_ptr<Storage>& s) {
    if (!opt_.storage_key) throw Error("", "", "pickling a tensor needs PickleOptions::storage_key");
    op('(');
    str("storage");
    global("torch", storage_class_name(s->dtype));
    str(opt_.storage_key(s));
    str(s->location.empty() ? "cpu" : s->location);
    integer(static_cast<int64_t>(s->numel));
    if (opt_.legacy_persistent_ids) op('N');
    op('t');
    op('Q');
  }
  void tensor(const Tensor& t) {
    if (!t.storage) throw Error("", "", "cannot pickle a tensor without a storage");
    if (t.dtype != t.storage->dtype)
      throw Error("", "", "cannot pickle a tensor whose dtype differs from its storage's");
    if (t.is_parameter) global("torch._utils", "_rebuild_parameter");
    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    storage_pid(t.storage);
    integer(t.storage_offset);
    tuple_of_ints(t.shape);
    tuple_of_ints(t.strides);
    op(t.is_parameter ? 0x89 : (t.requires_grad ? 0x88 : 0x89));
    empty_ordered_dict();
    op('t');
    op('R');
    if (t.is_parameter) {
      op(t.requires_grad ? 0x88 : 0x89);
      empty_ordered_dict();
      op(0x87);
      op('R');
    }
  }
  void items_batched(const std::vector<Value>& items, size_t depth) {
    for (size_t i = 0; i < items.size(); i += kBatch) {
      const size_t n = std::min(kBatch, items.size() - i);
      if (n == 1) {
        save(items[i], depth);
        op('a');
        continue;
      }
      op('(');
      for (size_t k = 0; k < n; ++k) save(items[i + k], depth);
      op('e');
    }
  }
  void pairs_batched(const std::vector<std::pair<Value, Value>>& items, size_t depth) {
    for (size_t i = 0; i < items.size(); i += kBatch) {
      const size_t n = std::min(kBatch, items.size() - i);
      if (n == 1) {
        save(items[i].first, depth);
        save(items[i].second, depth);
        op('s');
        continue;
      }
      op('(');
      for (size_t k = 0; k < n; ++k) {
        save(items[i + k].first, depth);
        save(items[i + k].second, depth);
      }
      op('u');
    }
  }

  void save(const Value& v, size_t depth) {
    using K = Value::Kind;
    if (++depth > kMaxDepth)
      throw Error(ErrorKind::Unsupported, "", "",
                  "value nested deeper than " + std::to_string(kMaxDepth) + " levels");
    const void* id = v.identity();
    if (id && v.kind() != K::Storage && memo_get(id)) return;
    if (id && !in_progress_.insert(id).second)
      throw Error(
          ErrorKind::Unsupported, "", "",
          "cannot pickle a " + v.type_name() + " that contains itself through a tuple or object arguments");
    switch (v.kind()) {
      case K::None:
        op('N');
        break;
      case K::Bool:
        op(v.as_bool() ? 0x88 : 0x89);
        break;
      case K::Int:
        integer(v.as_int());
        break;
      case K::BigInt: {
        const auto& b = v.as_big_int();
        if (b.size() < 256) {
          op(0x8a);
          op(static_cast<uint8_t>(b.size()));
        } else {
          op(0x8b);
          le(b.size(), 4);
        }
        raw(b.data(), b.size());
        break;
      }
      case K::Float: {
        double d = v.as_float();
        uint64_t bits;
        std::memcpy(&bits, &d, 8);
        op('G');
        for (int i = 7; i >= 0; --i) op(static_cast<uint8_t>(bits >> (8 * i)));
        break;
      }
      case K::Str:
        str(v.as_str());
        break;
      case K::Bytes: {
        const auto& b = v.as_str();
        if (b.empty()) {
          global("__builtin__", "bytes");
          op(')');
          op('R');
          break;
        }
        global("_codecs", "encode");
        std::string latin;
        latin.reserve(b.size() * 2);
        for (unsigned char c : b) {
          if (c < 0x80) {
            latin += static_cast<char>(c);
          } else {
            latin += static_cast<char>(0xc0 | (c >> 6));
            latin += static_cast<char>(0x80 | (c & 0x3f));
          }
        }
        str(latin);
        str("latin1");
        op(0x86);
        op('R');
        break;
      }
      case K::List:
        op(']');
        memoize(id);
        items_batched(v.items(), depth);
        break;
      case K::Tuple: {
        const auto& it = v.items();
        if (it.empty()) {
          op(')');
          break;
        }
        if (it.size() > 3) op('(');
        for (const auto& x : it) save(x, depth);
        op(it.size() == 1 ? 0x85 : it.size() == 2 ? 0x86 : it.size() == 3 ? 0x87 : 't');
        memoize(id);
        break;
      }
      case K::Set:
      case K::FrozenSet:
        global("__builtin__", v.is(K::Set) ? "set" : "frozenset");
        op(']');
        items_batched(v.items(), depth);
        op(0x85);
        op('R');
        memoize(id);
        break;
      case K::Dict: {
        const auto& d = v.as_dict();
        if (d.ordered) {
          empty_ordered_dict();
        } else {
          op('}');
        }
        memoize(id);
        pairs_batched(d.items, depth);
        if (d.state) {
          save(*d.state, depth);
          op('b');
        }
        break;
      }
      case K::Tensor:
        tensor(v.as_tensor());
        memoize(id);
        break;
      case K::Storage:
        storage_pid(v.as_storage());
        break;
      case K::Size:
        global("torch", "Size");
        tuple_of_ints(v.as_size());
        op(0x85);
        op('R');
        break;
      case K::DType:
        global("torch", v.as_str());
        break;
      case K::Device:
        global("torch", "device");
        str(v.as_str());
        op(0x85);
        op('R');
        break;
      case K::Global:
        global(v.as_global().first, v.as_global().second);
        break;
      case K::Object: {
        const auto& o = v.as_object();
        const bool ex = o.how == ObjectData::How::NewObjEx;
        if (ex) global("copy_reg", "__newobj_ex__");
        if (o.callable)
          save(*o.callable, depth);
        else
          global(o.module, o.name);
        if (ex) {
          if (o.args)
            save(*o.args, depth);
          else
            op(')');
          if (o.kwargs)
            save(*o.kwargs, depth);
          else
            op('}');
          op(0x87);
          op('R');
        } else {
          if (o.args)
            save(*o.args, depth);
          else
            op(')');
          op(o.how == ObjectData::How::NewObj ? 0x81 : 'R');
        }
        memoize(id);
        if (!o.list_items.empty()) items_batched(o.list_items, depth);
        if (!o.dict_items.empty()) pairs_batched(o.dict_items, depth);
        if (o.state) {
          save(*o.state, depth);
          op('b');
        }
        break;
      }
    }
    if (id) in_progress_.erase(id);
  }

 private:
  const PickleOptions& opt_;
  std::unordered_map<const void*, uint64_t> memo_;
  std::unordered_set<const void*> in_progress_;
};

}  // namespace

std::vector<uint8_t> pickle(const Value& root, const PickleOptions& options) {
  Writer w(options);
  w.op(0x80);
  w.op(2);
  w.save(root, 0);
  w.op('.');
  return std::move(w.out);
}

}  // namespace ckptdoc
