// Value: factories, kinds and names, typed accessors and dict helpers of the inert pickle tree.
#include "ckptdoc/format/value.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "format/value_fail.h"

namespace ckptdoc {

using value_detail::fail;
using value_detail::wrong_kind;

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
  v.big_() = std::make_shared<std::vector<uint8_t>>(std::move(le));
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
  v.s_() = std::make_shared<std::string>(std::move(s));
  return v;
}
Value Value::bytes(std::string b) {
  Value v;
  v.kind_ = Kind::Bytes;
  v.s_() = std::make_shared<std::string>(std::move(b));
  return v;
}
Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::List;
  v.items_() = std::make_shared<std::vector<Value>>(std::move(items));
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
  v.dict_() = std::make_shared<DictData>();
  v.dict_()->ordered = ordered;
  return v;
}
Value Value::tensor(Tensor t) {
  Value v;
  v.kind_ = Kind::Tensor;
  v.tensor_() = std::make_shared<Tensor>(std::move(t));
  return v;
}
Value Value::storage(std::shared_ptr<Storage> s) {
  Value v;
  v.kind_ = Kind::Storage;
  v.storage_() = std::move(s);
  return v;
}
Value Value::size(std::vector<int64_t> dims) {
  Value v;
  v.kind_ = Kind::Size;
  v.size_() = std::make_shared<std::vector<int64_t>>(std::move(dims));
  return v;
}
Value Value::dtype(std::string torch_name) {
  if (torch_name.starts_with("torch.")) torch_name.erase(0, 6);
  Value v;
  v.kind_ = Kind::DType;
  v.s_() = std::make_shared<std::string>(std::move(torch_name));
  return v;
}
Value Value::device(std::string spec) {
  Value v;
  v.kind_ = Kind::Device;
  v.s_() = std::make_shared<std::string>(std::move(spec));
  return v;
}
Value Value::global(std::string module, std::string name) {
  Value v;
  v.kind_ = Kind::Global;
  v.global_() = std::make_shared<std::pair<std::string, std::string>>(std::move(module), std::move(name));
  return v;
}
Value Value::object(ObjectData o) {
  Value v;
  v.kind_ = Kind::Object;
  v.object_() = std::make_shared<ObjectData>(std::move(o));
  return v;
}

// ---------------------------------------------------------------------------------------------------------
// Kinds and names

bool Value::is_object(std::string_view module, std::string_view name) const {
  return kind_ == Kind::Object && object_()->module == module && object_()->name == name;
}

std::string_view Value::kind_name() const {
  switch (kind_) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "Bool";
    case Kind::Int:
      return "Int";
    case Kind::BigInt:
      return "BigInt";
    case Kind::Float:
      return "Float";
    case Kind::Str:
      return "Str";
    case Kind::Bytes:
      return "Bytes";
    case Kind::List:
      return "List";
    case Kind::Tuple:
      return "Tuple";
    case Kind::Set:
      return "Set";
    case Kind::FrozenSet:
      return "FrozenSet";
    case Kind::Dict:
      return "Dict";
    case Kind::Tensor:
      return "Tensor";
    case Kind::Storage:
      return "Storage";
    case Kind::Size:
      return "Size";
    case Kind::DType:
      return "DType";
    case Kind::Device:
      return "Device";
    case Kind::Global:
      return "Global";
    case Kind::Object:
      return "Object";
  }
  return "?";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
    case Kind::BigInt:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::Str:
      return "str";
    case Kind::Bytes:
      return "bytes";
    case Kind::List:
      return "list";
    case Kind::Tuple:
      return "tuple";
    case Kind::Set:
      return "set";
    case Kind::FrozenSet:
      return "frozenset";
    case Kind::Dict:
      return dict_()->ordered ? "OrderedDict" : "dict";
    case Kind::Tensor:
      return tensor_()->is_parameter ? "Parameter" : "Tensor";
    case Kind::Storage:
      return "torch." + std::string(storage_class_name(storage_()->dtype));
    case Kind::Size:
      return "torch.Size";
    case Kind::DType:
      return "torch.dtype";
    case Kind::Device:
      return "torch.device";
    case Kind::Global:
      return "global " + global_()->first + "." + global_()->second;
    case Kind::Object:
      return object_()->qualified();
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------------------
// Accessors

namespace {
// Members of int enums that Python 3.11+ pickles as getattr(cls, name) rather than cls(value).
std::optional<int64_t> known_enum_member(const std::string& module, const std::string& name,
                                         const std::string& member) {
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
  if (kind_ == Kind::Object && object_()->how == ObjectData::How::Reduce && object_()->args &&
      object_()->args->is(Kind::Tuple) && object_()->args->items().size() == 1 &&
      object_()->args->items()[0].is(Kind::Int) && !object_()->state && object_()->list_items.empty() &&
      object_()->dict_items.empty())
    return object_()->args->items()[0].i_;
  // getattr(IntEnumClass, 'member') for enums whose values ckptdoc knows.
  if (kind_ == Kind::Object && (object_()->module == "builtins" || object_()->module == "__builtin__") &&
      object_()->name == "getattr" && object_()->how == ObjectData::How::Reduce && object_()->args &&
      object_()->args->is(Kind::Tuple) && object_()->args->items().size() == 2 &&
      object_()->args->items()[0].is(Kind::Global) && object_()->args->items()[1].is(Kind::Str)) {
    const auto& cls = *object_()->args->items()[0].global_();
    if (auto v = known_enum_member(cls.first, cls.second, object_()->args->items()[1].as_str())) return *v;
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
  if (kind_ == Kind::Str || kind_ == Kind::Bytes || kind_ == Kind::DType || kind_ == Kind::Device)
    return *s_();
  wrong_kind("str", *this);
}

const std::vector<uint8_t>& Value::as_big_int() const {
  if (kind_ != Kind::BigInt) wrong_kind("big int", *this);
  return *big_();
}

const std::vector<Value>& Value::items() const {
  if (!items_() ||
      !(kind_ == Kind::List || kind_ == Kind::Tuple || kind_ == Kind::Set || kind_ == Kind::FrozenSet))
    wrong_kind("list, tuple or set", *this);
  return *items_();
}
std::vector<Value>& Value::items_mut() {
  if (!items_() ||
      !(kind_ == Kind::List || kind_ == Kind::Tuple || kind_ == Kind::Set || kind_ == Kind::FrozenSet))
    wrong_kind("list, tuple or set", *this);
  return *items_();
}
const DictData& Value::as_dict() const {
  if (kind_ != Kind::Dict) wrong_kind("dict", *this);
  return *dict_();
}
DictData& Value::dict_mut() {
  if (kind_ != Kind::Dict) wrong_kind("dict", *this);
  dict_()->index_cache.reset();
  return *dict_();
}
const Tensor& Value::as_tensor() const {
  if (kind_ != Kind::Tensor) wrong_kind("Tensor", *this);
  return *tensor_();
}
Tensor& Value::tensor_mut() {
  if (kind_ != Kind::Tensor) wrong_kind("Tensor", *this);
  return *tensor_();
}
const std::shared_ptr<Storage>& Value::as_storage() const {
  if (kind_ != Kind::Storage) wrong_kind("storage", *this);
  return storage_();
}
const std::vector<int64_t>& Value::as_size() const {
  if (kind_ != Kind::Size) wrong_kind("torch.Size", *this);
  return *size_();
}
const std::pair<std::string, std::string>& Value::as_global() const {
  if (kind_ != Kind::Global) wrong_kind("global", *this);
  return *global_();
}
const ObjectData& Value::as_object() const {
  if (kind_ != Kind::Object) wrong_kind("object", *this);
  return *object_();
}
ObjectData& Value::object_mut() {
  if (kind_ != Kind::Object) wrong_kind("object", *this);
  return *object_();
}

// ---------------------------------------------------------------------------------------------------------
// Dict helpers

namespace {
// The key index: open addressing over (hash, position) slots. A probe compares the key with the item's own
// key string, so the index holds no copies of the keys (a 20k-entry state_dict cost a string allocation per
// key to index and another per lookup) and a hit is always verified against the items. Every
// DictIndexCache::Index is one of these (only this file makes them); the base's string map stays empty.
struct KeyIndex : DictIndexCache::Index {
  struct Slot {
    uint32_t hash = 0;
    uint32_t position = 0;  // position + 1; 0: empty
  };
  size_t used = 0;
  std::vector<Slot> slots;  // a power of two, at most half full

  static uint32_t hash_of(std::string_view key) {
    const uint64_t h = std::hash<std::string_view>{}(key);
    return static_cast<uint32_t>(h ^ (h >> 32));
  }
  // The position of `key` in `items`, or -1.
  long find(const std::vector<std::pair<Value, Value>>& items, std::string_view key, uint32_t h) const {
    const size_t mask = slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots[i];
      if (s.position == 0) return -1;
      if (s.hash == h && s.position - 1 < items.size()) {
        const Value& k = items[s.position - 1].first;
        if (k.is(Value::Kind::Str) && k.as_str() == key) return static_cast<long>(s.position - 1);
      }
    }
  }
  // Adds a key not in the index at `position`.
  void add(uint32_t h, size_t position) {
    if (2 * (used + 1) > slots.size()) grow();
    const size_t mask = slots.size() - 1;
    size_t i = h & mask;
    while (slots[i].position != 0) i = (i + 1) & mask;
    slots[i] = {h, static_cast<uint32_t>(position + 1)};
    ++used;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots);
    slots.assign(std::max<size_t>(64, 2 * old.size()), Slot{});
    const size_t mask = slots.size() - 1;
    for (const Slot& s : old) {
      if (s.position == 0) continue;
      size_t i = s.hash & mask;
      while (slots[i].position != 0) i = (i + 1) & mask;
      slots[i] = s;
    }
  }
  static std::shared_ptr<KeyIndex> build(const std::vector<std::pair<Value, Value>>& items) {
    auto idx = std::make_shared<KeyIndex>();
    size_t cap = 64;
    while (cap < 2 * items.size() + 2) cap *= 2;
    idx->slots.assign(cap, Slot{});
    for (size_t i = 0; i < items.size(); ++i) {
      const Value& k = items[i].first;
      if (!k.is(Value::Kind::Str)) continue;
      const uint32_t h = hash_of(k.as_str());
      if (idx->find(items, k.as_str(), h) < 0) idx->add(h, i);  // the first of repeated keys
    }
    idx->size = items.size();
    return idx;
  }
};
const KeyIndex& key_index(const DictIndexCache::Index& i) {
  return static_cast<const KeyIndex&>(i);
}
KeyIndex& key_index_mut(const DictIndexCache::Index& i) {
  return const_cast<KeyIndex&>(static_cast<const KeyIndex&>(i));
}
}  // namespace

namespace {
constexpr size_t kIndexThreshold = 16;
// Positions live in 32 bits; bigger dicts are searched linearly.
constexpr size_t kIndexMaxItems = std::numeric_limits<uint32_t>::max() - 1;

bool key_is(const Value& k, std::string_view key) {
  return k.is(Value::Kind::Str) && k.as_str() == key;
}

long find_key(const DictData& d, std::string_view key) {
  const auto& items = d.items;
  if (items.size() < kIndexThreshold || items.size() > kIndexMaxItems) {
    for (size_t i = 0; i < items.size(); ++i)
      if (key_is(items[i].first, key)) return static_cast<long>(i);
    return -1;
  }
  std::shared_ptr<const DictIndexCache::Index> idx;
  {
    std::lock_guard<std::mutex> lock(d.index_cache.mutex);
    idx = d.index_cache.index;
  }
  if (!idx || idx->size != items.size()) {
    idx = KeyIndex::build(items);
    std::lock_guard<std::mutex> lock(d.index_cache.mutex);
    d.index_cache.index = idx;
  }
  return key_index(*idx).find(items, key, KeyIndex::hash_of(key));
}
}  // namespace

const Value* Value::get(std::string_view key) const {
  if (kind_ != Kind::Dict) return nullptr;
  const long i = find_key(*dict_(), key);
  return i < 0 ? nullptr : &dict_()->items[static_cast<size_t>(i)].second;
}

Value* Value::get_mut(std::string_view key) {
  if (kind_ != Kind::Dict) return nullptr;
  const long i = find_key(*dict_(), key);
  return i < 0 ? nullptr : &dict_()->items[static_cast<size_t>(i)].second;
}

const Value& Value::at(std::string_view key) const {
  if (kind_ != Kind::Dict) fail("key '" + std::string(key) + "': " + expected_found("dict", type_name()));
  const Value* v = get(key);
  if (!v) fail("key '" + std::string(key) + "' is missing");
  return *v;
}

void Value::set_item(Value key, Value value) {
  if (kind_ != Kind::Dict) wrong_kind("dict", *this);
  auto& d = *dict_();
  if (key.is(Kind::Str) && d.items.size() >= kIndexThreshold && d.items.size() < kIndexMaxItems) {
    // A big dict filled key by key (an unpickled state_dict): one probe of a current index both finds a
    // repeated key and adds a new one.
    std::lock_guard<std::mutex> lock(d.index_cache.mutex);
    auto& idx = d.index_cache.index;
    if (idx && idx.use_count() == 1 && idx->size == d.items.size()) {
      KeyIndex* m = &key_index_mut(*idx);
      const uint32_t h = KeyIndex::hash_of(key.as_str());
      const long at = m->find(d.items, key.as_str(), h);
      if (at >= 0) {
        d.items[static_cast<size_t>(at)].second = std::move(value);
        return;
      }
      m->add(h, d.items.size());
      m->size = d.items.size() + 1;
      d.items.emplace_back(std::move(key), std::move(value));
      return;
    }
  }
  if (key.is(Kind::Str)) {
    if (Value* existing = get_mut(key.as_str())) {
      *existing = std::move(value);
      return;
    }
  } else if (key.is(Kind::Int)) {
    for (auto& kv : dict_()->items)
      if (kv.first.is(Kind::Int) && kv.first.i_ == key.i_) {
        kv.second = std::move(value);
        return;
      }
  }
  {
    // Keep a current index current (appends are how unpicklers and builders fill big dicts).
    std::lock_guard<std::mutex> lock(dict_()->index_cache.mutex);
    auto& idx = dict_()->index_cache.index;
    if (idx && idx.use_count() == 1 && idx->size == dict_()->items.size() &&
        dict_()->items.size() < kIndexMaxItems) {
      KeyIndex* m = &key_index_mut(*idx);
      if (key.is(Kind::Str)) m->add(KeyIndex::hash_of(key.as_str()), dict_()->items.size());
      m->size = dict_()->items.size() + 1;
    } else {
      idx.reset();
    }
  }
  dict_()->items.emplace_back(std::move(key), std::move(value));
}

bool Value::erase(std::string_view key) {
  if (kind_ != Kind::Dict) return false;
  const long i = find_key(*dict_(), key);
  if (i < 0) return false;
  dict_()->index_cache.reset();
  dict_()->items.erase(dict_()->items.begin() + i);
  return true;
}

const Value* Value::attr(std::string_view name) const {
  if (kind_ == Kind::Object) {
    const auto& st = object_()->state;
    if (!st) return nullptr;
    if (st->is_dict()) return st->get(name);
    // (dict, slots) state
    if (st->is(Kind::Tuple) && st->items().size() == 2) {
      if (const Value* v = st->items()[0].get(name)) return v;
      return st->items()[1].get(name);
    }
    return nullptr;
  }
  if (kind_ == Kind::Dict && dict_()->state) return dict_()->state->get(name);
  return nullptr;
}

}  // namespace ckptdoc
