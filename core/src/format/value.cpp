#include "ckptdoc/format/value.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "ckptdoc/error.h"

namespace ckptdoc {

namespace {

[[noreturn]] void fail(const std::string& what) { throw Error("", "", what); }

[[noreturn]] void wrong_kind(const std::string& expected, const Value& v) {
  fail(expected_found(expected, v.type_name()));
}

bool mul_overflow(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Storage

std::span<const uint8_t> Storage::bytes() const {
  uint64_t n = 0;
  if (mul_overflow(numel, element_size(dtype), &n)) fail("storage '" + key + "': size overflows");
  if (file) return file->slice(file_offset, n, "storage bytes");
  if (owned) {
    if (owned->size() < n)
      fail("storage '" + key + "': " + expected_found(std::to_string(n) + " bytes",
                                                      std::to_string(owned->size()) + " bytes"));
    return {owned->data(), static_cast<size_t>(n)};
  }
  fail("storage '" + key + "': bytes are produced on demand, not held in memory");
}

void Storage::write_to(ByteSink& sink) const {
  if (has_bytes()) {
    sink.write(bytes());
    return;
  }
  if (!producer) fail("storage '" + key + "' has no bytes");
  const uint64_t start = sink.position();
  producer(sink);
  const uint64_t wrote = sink.position() - start;
  if (wrote != nbytes())
    fail("storage '" + key + "': producer " +
         expected_found(std::to_string(nbytes()) + " bytes", std::to_string(wrote) + " bytes"));
}

std::shared_ptr<Storage> Storage::from_bytes(DType dtype, std::vector<uint8_t> bytes, std::string key) {
  const size_t es = element_size(dtype);
  if (bytes.size() % es != 0)
    fail("storage of " + std::string(dtype_name(dtype)) + ": " + std::to_string(bytes.size()) +
         " bytes is not a multiple of the element size " + std::to_string(es));
  auto s = std::make_shared<Storage>();
  s->key = std::move(key);
  s->dtype = dtype;
  s->numel = bytes.size() / es;
  s->owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return s;
}

// ---------------------------------------------------------------------------------------------------------
// Tensor

int64_t Tensor::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("tensor has a negative size " + std::to_string(d));
    if (mul_overflow(n, static_cast<uint64_t>(d), &n) || n > static_cast<uint64_t>(INT64_MAX))
      fail("tensor element count overflows");
  }
  return static_cast<int64_t>(n);
}

bool Tensor::is_contiguous() const {
  if (strides.size() != shape.size()) return false;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

namespace {
// Checks the view fits the storage; returns the storage's byte span when available (empty span with
// *have=false for producer-only storages).
void check_view(const Tensor& t) {
  if (!t.storage) fail("tensor has no storage");
  if (t.strides.size() != t.shape.size()) fail("tensor has " + std::to_string(t.shape.size()) +
                                               " sizes but " + std::to_string(t.strides.size()) + " strides");
  if (t.storage_offset < 0) fail("tensor has a negative storage offset");
  const int64_t n = t.numel();
  if (n == 0) return;
  uint64_t extent = static_cast<uint64_t>(t.storage_offset);
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.strides[i] < 0) fail("tensor has a negative stride");
    uint64_t span = 0;
    if (mul_overflow(static_cast<uint64_t>(t.shape[i] - 1), static_cast<uint64_t>(t.strides[i]), &span) ||
        __builtin_add_overflow(extent, span, &extent))
      fail("tensor view extent overflows");
  }
  if (extent >= t.storage->numel)
    fail("tensor view reaches element " + std::to_string(extent) + " of a storage with " +
         std::to_string(t.storage->numel) + " elements");
}

std::vector<uint8_t> materialize(const Storage& s) {
  VectorSink sink;
  s.write_to(sink);
  return std::move(sink.data);
}
}  // namespace

std::span<const uint8_t> Tensor::contiguous_bytes() const {
  if (!is_contiguous()) fail("tensor is not contiguous");
  check_view(*this);
  if (element_size(storage->dtype) != element_size(dtype))
    fail("tensor dtype " + std::string(dtype_name(dtype)) + " does not match storage dtype " +
         std::string(dtype_name(storage->dtype)));
  const auto all = storage->bytes();
  const uint64_t es = element_size(dtype);
  const uint64_t off = static_cast<uint64_t>(storage_offset) * es;
  const uint64_t n = nbytes();
  if (n == 0) return {};
  if (off > all.size() || n > all.size() - off) fail("tensor bytes lie outside the storage");
  return all.subspan(static_cast<size_t>(off), static_cast<size_t>(n));
}

void Tensor::copy_to(std::span<uint8_t> out) const {
  check_view(*this);
  const uint64_t total = nbytes();
  if (out.size() != total) fail("copy_to: " + expected_found(std::to_string(total) + " bytes", std::to_string(out.size()) + " bytes"));
  if (total == 0) return;
  std::vector<uint8_t> held;
  std::span<const uint8_t> src;
  if (storage->has_bytes()) {
    src = storage->bytes();
  } else {
    held = materialize(*storage);
    src = held;
  }
  const size_t es = element_size(dtype);
  if (element_size(storage->dtype) != es) fail("tensor dtype does not match its storage dtype");
  if (is_contiguous()) {
    std::memcpy(out.data(), src.data() + static_cast<size_t>(storage_offset) * es, static_cast<size_t>(total));
    return;
  }
  const size_t nd = shape.size();
  std::vector<int64_t> idx(nd, 0);
  // Innermost run: contiguous when its stride is 1.
  const int64_t inner = nd ? shape[nd - 1] : 1;
  const int64_t inner_stride = nd ? strides[nd - 1] : 1;
  size_t pos = 0;
  while (true) {
    int64_t base = storage_offset;
    for (size_t i = 0; i + 1 < nd; ++i) base += idx[i] * strides[i];
    if (inner_stride == 1) {
      std::memcpy(out.data() + pos, src.data() + static_cast<size_t>(base) * es, static_cast<size_t>(inner) * es);
      pos += static_cast<size_t>(inner) * es;
    } else {
      for (int64_t j = 0; j < inner; ++j) {
        std::memcpy(out.data() + pos, src.data() + static_cast<size_t>(base + j * inner_stride) * es, es);
        pos += es;
      }
    }
    if (nd <= 1) break;
    size_t d = nd - 1;
    bool done = true;
    while (d-- > 0) {
      if (++idx[d] < shape[d]) {
        done = false;
        break;
      }
      idx[d] = 0;
    }
    if (done) break;
  }
}

std::vector<uint8_t> Tensor::to_bytes() const {
  std::vector<uint8_t> out(static_cast<size_t>(nbytes()));
  copy_to(out);
  return out;
}

std::vector<float> Tensor::to_float() const {
  const auto b = to_bytes();
  const size_t n = static_cast<size_t>(numel());
  std::vector<float> out(n);
  auto load = [&](auto tag, size_t i) {
    decltype(tag) v;
    std::memcpy(&v, b.data() + i * sizeof(v), sizeof(v));
    return v;
  };
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::F32: out[i] = load(float{}, i); break;
      case DType::F16: out[i] = half_to_float(load(uint16_t{}, i)); break;
      case DType::BF16: out[i] = bf16_to_float(load(uint16_t{}, i)); break;
      case DType::F64: out[i] = static_cast<float>(load(double{}, i)); break;
      case DType::I64: out[i] = static_cast<float>(load(int64_t{}, i)); break;
      case DType::I32: out[i] = static_cast<float>(load(int32_t{}, i)); break;
      case DType::I16: out[i] = static_cast<float>(load(int16_t{}, i)); break;
      case DType::I8: out[i] = static_cast<float>(load(int8_t{}, i)); break;
      case DType::U8: out[i] = static_cast<float>(load(uint8_t{}, i)); break;
      case DType::Bool: out[i] = b[i] ? 1.0f : 0.0f; break;
      case DType::C64:
      case DType::C128: fail("to_float: complex tensors have no float32 conversion");
    }
  }
  return out;
}

std::vector<int64_t> Tensor::contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return s;
}

Tensor Tensor::from_bytes(DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.strides = contiguous_strides(t.shape);
  if (bytes.size() != t.nbytes())
    fail("tensor bytes: " + expected_found(std::to_string(t.nbytes()), std::to_string(bytes.size())));
  t.storage = Storage::from_bytes(dtype, std::move(bytes));
  return t;
}

Tensor Tensor::produced(DType dtype, std::vector<int64_t> shape, std::function<void(ByteSink&)> producer) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.strides = contiguous_strides(t.shape);
  auto s = std::make_shared<Storage>();
  s->dtype = dtype;
  s->numel = static_cast<uint64_t>(t.numel());
  s->producer = std::move(producer);
  t.storage = std::move(s);
  return t;
}

// ---------------------------------------------------------------------------------------------------------
// Value factories

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::big_integer(std::vector<uint8_t> le) {
  // Normalise: values that fit int64 become Int.
  while (le.size() > 1 && ((le.back() == 0 && !(le[le.size() - 2] & 0x80)) ||
                           (le.back() == 0xff && (le[le.size() - 2] & 0x80))))
    le.pop_back();
  if (le.size() <= 8) {
    uint64_t u = 0;
    for (size_t i = 0; i < le.size(); ++i) u |= static_cast<uint64_t>(le[i]) << (8 * i);
    if (!le.empty() && (le.back() & 0x80) && le.size() < 8) u |= ~uint64_t{0} << (8 * le.size());
    return integer(static_cast<int64_t>(u));
  }
  Value v;
  v.kind_ = Kind::BigInt;
  v.big_ = std::make_shared<std::vector<uint8_t>>(std::move(le));
  return v;
}
Value Value::real(double d) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = d;
  return v;
}
Value Value::str(std::string s) {
  Value v;
  v.kind_ = Kind::Str;
  v.s_ = std::make_shared<std::string>(std::move(s));
  return v;
}
Value Value::bytes(std::string b) {
  Value v;
  v.kind_ = Kind::Bytes;
  v.s_ = std::make_shared<std::string>(std::move(b));
  return v;
}
Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::List;
  v.items_ = std::make_shared<std::vector<Value>>(std::move(items));
  return v;
}
Value Value::tuple(std::vector<Value> items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::Tuple;
  return v;
}
Value Value::set(std::vector<Value> items, bool frozen) {
  Value v = list(std::move(items));
  v.kind_ = frozen ? Kind::FrozenSet : Kind::Set;
  return v;
}
Value Value::dict(bool ordered) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::make_shared<DictData>();
  v.dict_->ordered = ordered;
  return v;
}
Value Value::tensor(Tensor t) {
  Value v;
  v.kind_ = Kind::Tensor;
  v.tensor_ = std::make_shared<Tensor>(std::move(t));
  return v;
}
Value Value::storage(std::shared_ptr<Storage> s) {
  Value v;
  v.kind_ = Kind::Storage;
  v.storage_ = std::move(s);
  return v;
}
Value Value::size(std::vector<int64_t> dims) {
  Value v;
  v.kind_ = Kind::Size;
  v.size_ = std::make_shared<std::vector<int64_t>>(std::move(dims));
  return v;
}
Value Value::dtype(std::string torch_name) {
  if (torch_name.starts_with("torch.")) torch_name.erase(0, 6);
  Value v;
  v.kind_ = Kind::DType;
  v.s_ = std::make_shared<std::string>(std::move(torch_name));
  return v;
}
Value Value::device(std::string spec) {
  Value v;
  v.kind_ = Kind::Device;
  v.s_ = std::make_shared<std::string>(std::move(spec));
  return v;
}
Value Value::global(std::string module, std::string name) {
  Value v;
  v.kind_ = Kind::Global;
  v.global_ = std::make_shared<std::pair<std::string, std::string>>(std::move(module), std::move(name));
  return v;
}
Value Value::object(ObjectData o) {
  Value v;
  v.kind_ = Kind::Object;
  v.object_ = std::make_shared<ObjectData>(std::move(o));
  return v;
}

// ---------------------------------------------------------------------------------------------------------
// Kinds and names

bool Value::is_object(std::string_view module, std::string_view name) const {
  return kind_ == Kind::Object && object_->module == module && object_->name == name;
}

std::string_view Value::kind_name() const {
  switch (kind_) {
    case Kind::None: return "None";
    case Kind::Bool: return "Bool";
    case Kind::Int: return "Int";
    case Kind::BigInt: return "BigInt";
    case Kind::Float: return "Float";
    case Kind::Str: return "Str";
    case Kind::Bytes: return "Bytes";
    case Kind::List: return "List";
    case Kind::Tuple: return "Tuple";
    case Kind::Set: return "Set";
    case Kind::FrozenSet: return "FrozenSet";
    case Kind::Dict: return "Dict";
    case Kind::Tensor: return "Tensor";
    case Kind::Storage: return "Storage";
    case Kind::Size: return "Size";
    case Kind::DType: return "DType";
    case Kind::Device: return "Device";
    case Kind::Global: return "Global";
    case Kind::Object: return "Object";
  }
  return "?";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int:
    case Kind::BigInt: return "int";
    case Kind::Float: return "float";
    case Kind::Str: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Set: return "set";
    case Kind::FrozenSet: return "frozenset";
    case Kind::Dict: return dict_->ordered ? "OrderedDict" : "dict";
    case Kind::Tensor: return tensor_->is_parameter ? "Parameter" : "Tensor";
    case Kind::Storage: return "torch." + std::string(storage_class_name(storage_->dtype));
    case Kind::Size: return "torch.Size";
    case Kind::DType: return "torch.dtype";
    case Kind::Device: return "torch.device";
    case Kind::Global: return "global " + global_->first + "." + global_->second;
    case Kind::Object: return object_->qualified();
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------------------
// Accessors

namespace {
// Members of int enums that Python 3.11+ pickles as getattr(cls, name) rather than cls(value).
std::optional<int64_t> known_enum_member(const std::string& module, const std::string& name, const std::string& member) {
  if (module == "deepspeed.runtime.zero.config" && name == "ZeroStageEnum") {
    if (member == "disabled") return 0;
    if (member == "optimizer_states") return 1;
    if (member == "gradients") return 2;
    if (member == "weights" || member == "max_stage") return 3;
  }
  return std::nullopt;
}
}  // namespace

bool Value::as_bool() const {
  if (kind_ != Kind::Bool) wrong_kind("bool", *this);
  return b_;
}

int64_t Value::as_int() const {
  if (kind_ == Kind::Int) return i_;
  if (kind_ == Kind::Bool) return b_ ? 1 : 0;
  // int-subclass enums (ZeroStageEnum(2)): REDUCE(cls, (int,)) with no further state.
  if (kind_ == Kind::Object && object_->how == ObjectData::How::Reduce && object_->args &&
      object_->args->is(Kind::Tuple) && object_->args->items().size() == 1 &&
      object_->args->items()[0].is(Kind::Int) && !object_->state && object_->list_items.empty() &&
      object_->dict_items.empty())
    return object_->args->items()[0].i_;
  // getattr(IntEnumClass, 'member') for enums whose values ckptdoc knows.
  if (kind_ == Kind::Object && (object_->module == "builtins" || object_->module == "__builtin__") &&
      object_->name == "getattr" && object_->how == ObjectData::How::Reduce && object_->args &&
      object_->args->is(Kind::Tuple) && object_->args->items().size() == 2 &&
      object_->args->items()[0].is(Kind::Global) && object_->args->items()[1].is(Kind::Str)) {
    const auto& cls = *object_->args->items()[0].global_;
    if (auto v = known_enum_member(cls.first, cls.second, object_->args->items()[1].as_str())) return *v;
  }
  wrong_kind("int", *this);
}

double Value::as_float() const {
  if (kind_ == Kind::Float) return f_;
  if (kind_ == Kind::Int) return static_cast<double>(i_);
  if (kind_ == Kind::Bool) return b_ ? 1.0 : 0.0;
  wrong_kind("float", *this);
}

const std::string& Value::as_str() const {
  if (kind_ == Kind::Str || kind_ == Kind::Bytes || kind_ == Kind::DType || kind_ == Kind::Device) return *s_;
  wrong_kind("str", *this);
}

const std::vector<uint8_t>& Value::as_big_int() const {
  if (kind_ != Kind::BigInt) wrong_kind("big int", *this);
  return *big_;
}

const std::vector<Value>& Value::items() const {
  if (!items_ || !(kind_ == Kind::List || kind_ == Kind::Tuple || kind_ == Kind::Set || kind_ == Kind::FrozenSet))
    wrong_kind("list, tuple or set", *this);
  return *items_;
}
std::vector<Value>& Value::items_mut() {
  if (!items_ || !(kind_ == Kind::List || kind_ == Kind::Tuple || kind_ == Kind::Set || kind_ == Kind::FrozenSet))
    wrong_kind("list, tuple or set", *this);
  return *items_;
}
const DictData& Value::as_dict() const {
  if (kind_ != Kind::Dict) wrong_kind("dict", *this);
  return *dict_;
}
DictData& Value::dict_mut() {
  if (kind_ != Kind::Dict) wrong_kind("dict", *this);
  dict_->index_cache.reset();
  return *dict_;
}
const Tensor& Value::as_tensor() const {
  if (kind_ != Kind::Tensor) wrong_kind("Tensor", *this);
  return *tensor_;
}
Tensor& Value::tensor_mut() {
  if (kind_ != Kind::Tensor) wrong_kind("Tensor", *this);
  return *tensor_;
}
const std::shared_ptr<Storage>& Value::as_storage() const {
  if (kind_ != Kind::Storage) wrong_kind("storage", *this);
  return storage_;
}
const std::vector<int64_t>& Value::as_size() const {
  if (kind_ != Kind::Size) wrong_kind("torch.Size", *this);
  return *size_;
}
const std::pair<std::string, std::string>& Value::as_global() const {
  if (kind_ != Kind::Global) wrong_kind("global", *this);
  return *global_;
}
const ObjectData& Value::as_object() const {
  if (kind_ != Kind::Object) wrong_kind("object", *this);
  return *object_;
}
ObjectData& Value::object_mut() {
  if (kind_ != Kind::Object) wrong_kind("object", *this);
  return *object_;
}

// ---------------------------------------------------------------------------------------------------------
// Dict helpers

namespace {
constexpr size_t kIndexThreshold = 16;

bool key_is(const Value& k, std::string_view key) { return k.is(Value::Kind::Str) && k.as_str() == key; }

long find_key(const DictData& d, std::string_view key) {
  const auto& items = d.items;
  if (items.size() < kIndexThreshold) {
    for (size_t i = 0; i < items.size(); ++i)
      if (key_is(items[i].first, key)) return static_cast<long>(i);
    return -1;
  }
  std::shared_ptr<const DictIndexCache::Index> idx;
  {
    std::lock_guard<std::mutex> lock(d.index_cache.mutex);
    idx = d.index_cache.index;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!idx || idx->size != items.size()) {
      auto fresh = std::make_shared<DictIndexCache::Index>();
      fresh->size = items.size();
      fresh->positions.reserve(items.size());
      for (size_t i = 0; i < items.size(); ++i)
        if (items[i].first.is(Value::Kind::Str)) fresh->positions.emplace(items[i].first.as_str(), i);
      idx = fresh;
      std::lock_guard<std::mutex> lock(d.index_cache.mutex);
      d.index_cache.index = idx;
    }
    const auto it = idx->positions.find(std::string(key));
    if (it == idx->positions.end()) return -1;
    if (it->second < items.size() && key_is(items[it->second].first, key)) return static_cast<long>(it->second);
    idx.reset();  // stale: rebuild once
  }
  for (size_t i = 0; i < items.size(); ++i)
    if (key_is(items[i].first, key)) return static_cast<long>(i);
  return -1;
}
}  // namespace

const Value* Value::get(std::string_view key) const {
  if (kind_ != Kind::Dict) return nullptr;
  const long i = find_key(*dict_, key);
  return i < 0 ? nullptr : &dict_->items[static_cast<size_t>(i)].second;
}

Value* Value::get_mut(std::string_view key) {
  if (kind_ != Kind::Dict) return nullptr;
  const long i = find_key(*dict_, key);
  return i < 0 ? nullptr : &dict_->items[static_cast<size_t>(i)].second;
}

const Value& Value::at(std::string_view key) const {
  if (kind_ != Kind::Dict) fail("key '" + std::string(key) + "': " + expected_found("dict", type_name()));
  const Value* v = get(key);
  if (!v) fail("key '" + std::string(key) + "' is missing");
  return *v;
}

void Value::set_item(Value key, Value value) {
  if (kind_ != Kind::Dict) wrong_kind("dict", *this);
  if (key.is(Kind::Str)) {
    if (Value* existing = get_mut(key.as_str())) {
      *existing = std::move(value);
      return;
    }
  } else if (key.is(Kind::Int)) {
    for (auto& kv : dict_->items)
      if (kv.first.is(Kind::Int) && kv.first.i_ == key.i_) {
        kv.second = std::move(value);
        return;
      }
  }
  {
    // Keep a current index current (appends are how unpicklers and builders fill big dicts).
    std::lock_guard<std::mutex> lock(dict_->index_cache.mutex);
    auto& idx = dict_->index_cache.index;
    if (idx && idx.use_count() == 1 && idx->size == dict_->items.size()) {
      auto* m = const_cast<DictIndexCache::Index*>(idx.get());
      if (key.is(Kind::Str)) m->positions.emplace(key.as_str(), dict_->items.size());
      m->size = dict_->items.size() + 1;
    } else {
      idx.reset();
    }
  }
  dict_->items.emplace_back(std::move(key), std::move(value));
}

bool Value::erase(std::string_view key) {
  if (kind_ != Kind::Dict) return false;
  const long i = find_key(*dict_, key);
  if (i < 0) return false;
  dict_->index_cache.reset();
  dict_->items.erase(dict_->items.begin() + i);
  return true;
}

const Value* Value::attr(std::string_view name) const {
  if (kind_ == Kind::Object) {
    const auto& st = object_->state;
    if (!st) return nullptr;
    if (st->is_dict()) return st->get(name);
    // (dict, slots) state
    if (st->is(Kind::Tuple) && st->items().size() == 2) {
      if (const Value* v = st->items()[0].get(name)) return v;
      return st->items()[1].get(name);
    }
    return nullptr;
  }
  if (kind_ == Kind::Dict && dict_->state) return dict_->state->get(name);
  return nullptr;
}

// ---------------------------------------------------------------------------------------------------------
// repr

namespace {
std::string quote(const std::string& s, bool is_bytes) {
  std::string out = is_bytes ? "b'" : "'";
  for (unsigned char c : s) {
    switch (c) {
      case '\'': out += "\\'"; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
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
    case K::None: out += "None"; break;
    case K::Bool: out += v.as_bool() ? "True" : "False"; break;
    case K::Int: out += std::to_string(v.as_int()); break;
    case K::BigInt: out += big_to_decimal(v.as_big_int()); break;
    case K::Float: out += format_double(v.as_float()); break;
    case K::Str: out += quote(v.as_str(), false); break;
    case K::Bytes: out += quote(v.as_str(), true); break;
    case K::List: seq(v.items(), "[", "]", false); break;
    case K::Tuple: seq(v.items(), "(", ")", true); break;
    case K::Set:
      if (v.items().empty()) out += "set()";
      else seq(v.items(), "{", "}", false);
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
      out += "storage(" + std::string(dtype_name(s.dtype)) + ", numel=" + std::to_string(s.numel) + ", key='" +
             s.key + "', " + s.location + ")";
      break;
    }
    case K::Size:
      out += "torch.Size(";
      dims(v.as_size());
      out += ")";
      break;
    case K::DType: out += "torch." + v.as_str(); break;
    case K::Device: out += "device(type='" + v.as_str() + "')"; break;
    case K::Global: out += "<global " + v.as_global().first + "." + v.as_global().second + ">"; break;
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

// ---------------------------------------------------------------------------------------------------------
// Identity, children, dismantling

const void* Value::identity() const {
  switch (kind_) {
    case Kind::List:
    case Kind::Tuple:
    case Kind::Set:
    case Kind::FrozenSet: return items_.get();
    case Kind::Dict: return dict_.get();
    case Kind::Object: return object_.get();
    case Kind::Tensor: return tensor_.get();
    case Kind::Storage: return storage_.get();
    default: return nullptr;
  }
}

void Value::for_each_child(const std::function<void(const Value&)>& f) const {
  switch (kind_) {
    case Kind::List:
    case Kind::Tuple:
    case Kind::Set:
    case Kind::FrozenSet:
      for (const auto& v : *items_) f(v);
      break;
    case Kind::Dict:
      for (const auto& [k, v] : dict_->items) {
        f(k);
        f(v);
      }
      if (dict_->state) f(*dict_->state);
      break;
    case Kind::Object:
      if (object_->callable) f(*object_->callable);
      if (object_->args) f(*object_->args);
      if (object_->kwargs) f(*object_->kwargs);
      if (object_->state) f(*object_->state);
      for (const auto& v : object_->list_items) f(v);
      for (const auto& [k, v] : object_->dict_items) {
        f(k);
        f(v);
      }
      break;
    default: break;
  }
}

void Value::dismantle_all(std::vector<Value> work, const std::unordered_set<const void*>* keep) {
  while (!work.empty()) {
    Value v = std::move(work.back());
    work.pop_back();
    if (keep && keep->count(v.identity())) continue;
    switch (v.kind_) {
      case Kind::List:
      case Kind::Tuple:
      case Kind::Set:
      case Kind::FrozenSet:
        for (auto& c : *v.items_) work.push_back(std::move(c));
        v.items_->clear();
        break;
      case Kind::Dict:
        for (auto& [k, c] : v.dict_->items) {
          work.push_back(std::move(k));
          work.push_back(std::move(c));
        }
        v.dict_->items.clear();
        v.dict_->index_cache.reset();
        if (v.dict_->state) {
          work.push_back(std::move(*v.dict_->state));
          v.dict_->state.reset();
        }
        break;
      case Kind::Object: {
        auto& o = *v.object_;
        for (auto* p : {&o.callable, &o.args, &o.kwargs, &o.state})
          if (*p) {
            work.push_back(std::move(**p));
            p->reset();
          }
        for (auto& c : o.list_items) work.push_back(std::move(c));
        o.list_items.clear();
        for (auto& [k, c] : o.dict_items) {
          work.push_back(std::move(k));
          work.push_back(std::move(c));
        }
        o.dict_items.clear();
        break;
      }
      default: break;
    }
    // v now holds no children and is destroyed here without recursion.
  }
}

void Value::dismantle() {
  Value self = std::move(*this);
  *this = Value();
  dismantle_all({std::move(self)});
}

// ---------------------------------------------------------------------------------------------------------
// equals, clone

bool Value::equals(const Value& other) const {
  std::vector<std::pair<const Value*, const Value*>> work{{this, &other}};
  std::set<std::pair<const void*, const void*>> seen;  // container pairs already compared or in progress
  while (!work.empty()) {
    auto [a, b] = work.back();
    work.pop_back();
    if (a->kind_ != b->kind_) return false;
    const void* ia = a->identity();
    const void* ib = b->identity();
    if (ia && ia == ib) continue;
    if (ia && !seen.insert({ia, ib}).second) continue;
    switch (a->kind_) {
      case Kind::None: break;
      case Kind::Bool:
        if (a->b_ != b->b_) return false;
        break;
      case Kind::Int:
        if (a->i_ != b->i_) return false;
        break;
      case Kind::BigInt:
        if (*a->big_ != *b->big_) return false;
        break;
      case Kind::Float:
        if (!(a->f_ == b->f_ || (std::isnan(a->f_) && std::isnan(b->f_)))) return false;
        break;
      case Kind::Str:
      case Kind::Bytes:
      case Kind::DType:
      case Kind::Device:
        if (*a->s_ != *b->s_) return false;
        break;
      case Kind::List:
      case Kind::Tuple:
      case Kind::Set:
      case Kind::FrozenSet:
        if (a->items_->size() != b->items_->size()) return false;
        for (size_t i = 0; i < a->items_->size(); ++i) work.emplace_back(&(*a->items_)[i], &(*b->items_)[i]);
        break;
      case Kind::Dict: {
        const auto& da = *a->dict_;
        const auto& db = *b->dict_;
        if (da.ordered != db.ordered || da.items.size() != db.items.size()) return false;
        if (static_cast<bool>(da.state) != static_cast<bool>(db.state)) return false;
        if (da.state) work.emplace_back(da.state.get(), db.state.get());
        for (size_t i = 0; i < da.items.size(); ++i) {
          work.emplace_back(&da.items[i].first, &db.items[i].first);
          work.emplace_back(&da.items[i].second, &db.items[i].second);
        }
        break;
      }
      case Kind::Tensor: {
        const auto& ta = *a->tensor_;
        const auto& tb = *b->tensor_;
        if (ta.dtype != tb.dtype || ta.shape != tb.shape || ta.requires_grad != tb.requires_grad ||
            ta.is_parameter != tb.is_parameter)
          return false;
        if (ta.storage == tb.storage && ta.strides == tb.strides && ta.storage_offset == tb.storage_offset) break;
        if (ta.to_bytes() != tb.to_bytes()) return false;
        break;
      }
      case Kind::Storage: {
        const auto& sa = *a->storage_;
        const auto& sb = *b->storage_;
        if (sa.dtype != sb.dtype || sa.numel != sb.numel) return false;
        if (sa.has_bytes() && sb.has_bytes() && !std::equal(sa.bytes().begin(), sa.bytes().end(), sb.bytes().begin()))
          return false;
        break;
      }
      case Kind::Size:
        if (*a->size_ != *b->size_) return false;
        break;
      case Kind::Global:
        if (*a->global_ != *b->global_) return false;
        break;
      case Kind::Object: {
        const auto& oa = *a->object_;
        const auto& ob = *b->object_;
        if (oa.module != ob.module || oa.name != ob.name || oa.how != ob.how ||
            oa.list_items.size() != ob.list_items.size() || oa.dict_items.size() != ob.dict_items.size())
          return false;
        for (auto p : {std::make_pair(&oa.callable, &ob.callable), std::make_pair(&oa.args, &ob.args),
                       std::make_pair(&oa.kwargs, &ob.kwargs),
                       std::make_pair(&oa.state, &ob.state)}) {
          if (static_cast<bool>(*p.first) != static_cast<bool>(*p.second)) return false;
          if (*p.first) work.emplace_back(p.first->get(), p.second->get());
        }
        for (size_t i = 0; i < oa.list_items.size(); ++i) work.emplace_back(&oa.list_items[i], &ob.list_items[i]);
        for (size_t i = 0; i < oa.dict_items.size(); ++i) {
          work.emplace_back(&oa.dict_items[i].first, &ob.dict_items[i].first);
          work.emplace_back(&oa.dict_items[i].second, &ob.dict_items[i].second);
        }
        break;
      }
    }
  }
  return true;
}

namespace {
Value clone_rec(const Value& v, std::map<const void*, Value>& done) {
  using K = Value::Kind;
  const void* id = v.identity();
  if (!id || v.is(K::Tensor) || v.is(K::Storage)) return v;
  if (auto it = done.find(id); it != done.end()) return it->second;
  switch (v.kind()) {
    case K::List:
    case K::Tuple:
    case K::Set:
    case K::FrozenSet: {
      Value c = v.is(K::List) ? Value::list() : v.is(K::Tuple) ? Value::tuple() : Value::set({}, v.is(K::FrozenSet));
      done.emplace(id, c);
      std::vector<Value> items;
      items.reserve(v.items().size());
      for (const auto& x : v.items()) items.push_back(clone_rec(x, done));
      c.items_mut() = std::move(items);
      return c;
    }
    case K::Dict: {
      Value c = Value::dict(v.as_dict().ordered);
      done.emplace(id, c);
      auto& d = c.dict_mut();
      for (const auto& [k, x] : v.as_dict().items) d.items.emplace_back(clone_rec(k, done), clone_rec(x, done));
      if (v.as_dict().state) d.state = std::make_shared<Value>(clone_rec(*v.as_dict().state, done));
      return c;
    }
    case K::Object: {
      const auto& o = v.as_object();
      ObjectData n;
      n.module = o.module;
      n.name = o.name;
      n.how = o.how;
      Value c = Value::object(std::move(n));
      done.emplace(id, c);
      auto& no = c.object_mut();
      if (o.callable) no.callable = std::make_shared<Value>(clone_rec(*o.callable, done));
      if (o.args) no.args = std::make_shared<Value>(clone_rec(*o.args, done));
      if (o.kwargs) no.kwargs = std::make_shared<Value>(clone_rec(*o.kwargs, done));
      if (o.state) no.state = std::make_shared<Value>(clone_rec(*o.state, done));
      for (const auto& x : o.list_items) no.list_items.push_back(clone_rec(x, done));
      for (const auto& [k, x] : o.dict_items) no.dict_items.emplace_back(clone_rec(k, done), clone_rec(x, done));
      return c;
    }
    default: return v;
  }
}
}  // namespace

Value Value::clone() const {
  std::map<const void*, Value> done;
  Value c = clone_rec(*this, done);
  return c;
}

}  // namespace ckptdoc
