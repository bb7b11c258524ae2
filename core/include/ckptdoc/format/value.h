#pragma once
// The inert result of unpickling: a tree of plain values, tensors and described-but-never-instantiated
// objects. Nothing in it can run code. The same tree is what the pickler writes back.
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "ckptdoc/dtype.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/io/mapped_file.h"

namespace ckptdoc {

// The bytes behind one or more tensors, as torch saves them: one record per storage.
struct Storage {
  std::string key;               // record key in the file ("0", "1", or a pointer-like number in old files)
  DType dtype = DType::U8;       // element type of the storage class
  uint64_t numel = 0;            // elements of dtype
  std::string location = "cpu";  // device tag at save time
  // Exactly one source of bytes is set:
  std::shared_ptr<const MappedFile> file;  // mapped from a file at file_offset (zero-copy)
  uint64_t file_offset = 0;
  std::shared_ptr<const std::vector<uint8_t>> owned;  // held in memory
  std::function<void(ByteSink&)> producer;            // written on demand (streaming writers); nbytes() bytes

  uint64_t nbytes() const { return numel * element_size(dtype); }
  bool has_bytes() const { return file != nullptr || owned != nullptr; }
  // Mapped or owned bytes; throws ckptdoc::Error for producer-only storages.
  std::span<const uint8_t> bytes() const;
  // Writes all bytes to the sink, whatever the source.
  void write_to(ByteSink& sink) const;

  // Sets the bytes to `nbytes()` at `offset` of `f`: mapped when they start on the element size, copied into
  // `owned` otherwise. Throws ckptdoc::Error when the range leaves the file.
  void map_from(std::shared_ptr<const MappedFile> f, uint64_t offset);

  static std::shared_ptr<Storage> from_bytes(DType dtype, std::vector<uint8_t> bytes, std::string key = {});
};

// A strided view on a storage, like torch.Tensor. Sizes, strides and offsets count elements.
struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;
  std::shared_ptr<Storage> storage;
  bool requires_grad = false;
  bool is_parameter = false;  // rebuilt through torch._utils._rebuild_parameter

  int64_t numel() const;
  uint64_t nbytes() const { return static_cast<uint64_t>(numel()) * element_size(dtype); }
  bool is_contiguous() const;
  // Zero-copy bytes of a contiguous tensor (throws if not contiguous or bytes are not available).
  std::span<const uint8_t> contiguous_bytes() const;
  // Copies the elements in row-major order into `out` (nbytes() long), for any strides.
  void copy_to(std::span<uint8_t> out) const;
  std::vector<uint8_t> to_bytes() const;
  // Elements converted to float32 (floating and integer dtypes).
  std::vector<float> to_float() const;
  // Throws ckptdoc::Error "changed while being read" when the file it maps shrank under the map (its reads
  // gave zeros); call before trusting what was read. Readers of files opened one at a time (not kept by a
  // Checkpoint, whose check_unchanged() covers its own) call it before dropping the tensor.
  void check_unchanged() const;

  static std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
  // A new contiguous tensor owning `bytes`.
  static Tensor from_bytes(DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  // A contiguous tensor whose bytes come from `producer` when written.
  static Tensor produced(DType dtype, std::vector<int64_t> shape, std::function<void(ByteSink&)> producer);
};

class Value;

// A lazily built string-key index for Value::get() on large dicts. Copies start empty; Value::dict_mut(),
// set_item() and erase() drop it, and lookups verify hits, so a stale index is never trusted.
struct DictIndexCache {
  struct Index {
    size_t size = 0;                                    // items.size() when built
    std::unordered_map<std::string, size_t> positions;  // first position of each string key
  };
  DictIndexCache() = default;
  DictIndexCache(const DictIndexCache&) {}
  DictIndexCache& operator=(const DictIndexCache&) {
    reset();
    return *this;
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mutex);
    index.reset();
  }
  mutable std::mutex mutex;
  mutable std::shared_ptr<const Index> index;
};

struct DictData {
  bool ordered = false;  // collections.OrderedDict rather than dict
  std::vector<std::pair<Value, Value>> items;
  std::shared_ptr<Value> state;  // OrderedDict's BUILD state (e.g. {'_metadata': ...}); null when absent
  DictIndexCache index_cache;    // internal to Value::get()
};

// Any class instance or call result ckptdoc does not interpret, kept as a description.
struct ObjectData {
  enum class How : uint8_t { Reduce, NewObj, NewObjEx };
  std::string module, name;  // the GLOBAL, e.g. "argparse", "Namespace"
  How how = How::Reduce;
  std::shared_ptr<Value> args;                      // a Tuple (REDUCE/NEWOBJ arguments)
  std::shared_ptr<Value> kwargs;                    // NEWOBJ_EX only
  std::shared_ptr<Value> state;                     // BUILD state, null when none
  std::vector<Value> list_items;                    // APPEND(S) applied to the object
  std::vector<std::pair<Value, Value>> dict_items;  // SETITEM(S) applied to the object
  // When the callable was not a GLOBAL (e.g. the result of another call, such as builtins.getattr(...)):
  // that value, with module "" and name "<call>". Null for ordinary objects.
  std::shared_ptr<Value> callable;
  std::string qualified() const { return module + "." + name; }
};

class Value {
 public:
  enum class Kind : uint8_t {
    None,
    Bool,
    Int,
    BigInt,
    Float,
    Str,
    Bytes,
    List,
    Tuple,
    Set,
    FrozenSet,
    Dict,
    Tensor,
    Storage,
    Size,
    DType,
    Device,
    Global,
    Object
  };

  Value() = default;  // None
  static Value none() { return {}; }
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value big_integer(std::vector<uint8_t> le_twos_complement);  // ints that do not fit int64
  static Value real(double d);
  static Value str(std::string s);
  static Value bytes(std::string b);
  static Value list(std::vector<Value> items = {});
  static Value tuple(std::vector<Value> items = {});
  static Value set(std::vector<Value> items = {}, bool frozen = false);
  static Value dict(bool ordered = false);
  static Value tensor(Tensor t);
  static Value storage(std::shared_ptr<Storage> s);
  static Value size(std::vector<int64_t> dims);  // torch.Size
  static Value dtype(std::string torch_name);    // torch.float16 -> "float16" (any dtype name, known or not)
  static Value device(std::string spec);         // torch.device("cuda:0") -> "cuda:0"
  static Value global(std::string module, std::string name);  // a bare class/function reference
  static Value object(ObjectData o);

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_sequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  bool is_object(std::string_view module, std::string_view name) const;
  std::string_view kind_name() const;
  // Python-ish type name for display: "dict", "OrderedDict", "torch.Size", "argparse.Namespace", ...
  std::string type_name() const;

  // Accessors throw ckptdoc::Error when the kind does not match.
  bool as_bool() const;
  int64_t as_int() const;             // Int, Bool, and int-valued objects such as ZeroStageEnum(2)
  double as_float() const;            // Float or Int
  const std::string& as_str() const;  // Str, Bytes, DType, Device
  const std::vector<uint8_t>& as_big_int() const;
  const std::vector<Value>& items() const;  // List, Tuple, Set, FrozenSet
  std::vector<Value>& items_mut();
  const DictData& as_dict() const;
  DictData& dict_mut();
  const Tensor& as_tensor() const;
  Tensor& tensor_mut();
  const std::shared_ptr<Storage>& as_storage() const;
  const std::vector<int64_t>& as_size() const;
  const std::pair<std::string, std::string>& as_global() const;
  const ObjectData& as_object() const;
  ObjectData& object_mut();

  // Dict helpers (string keys). get() returns nullptr when absent or not a dict.
  const Value* get(std::string_view key) const;
  Value* get_mut(std::string_view key);
  const Value& at(std::string_view key) const;  // throws naming the key
  void set_item(Value key, Value value);        // replaces an equal string/int key or appends
  void set(std::string_view key, Value value) { set_item(Value::str(std::string(key)), std::move(value)); }
  bool erase(std::string_view key);
  // Object state helper: for objects whose BUILD state is a dict (Namespace, LossScaler, fragment_address).
  const Value* attr(std::string_view name) const;

  // Python repr-like one-line rendering, truncated at max_chars.
  std::string repr(size_t max_chars = 200) const;
  // Structural equality (tensors compare by dtype, shape and element bytes).
  bool equals(const Value& other) const;
  // Deep copy of containers (tensors and storages stay shared).
  Value clone() const;

  // Breaks every container reachable from this value without recursion, so hostile deep or cyclic trees
  // can be freed without exhausting the stack.
  void dismantle();

  // The address of this value's container (list/tuple/set items, dict, object, tensor, storage), or
  // nullptr for scalars: equal for values that alias the same container.
  const void* identity() const;
  // Calls f for every Value directly held by this one: items, dict keys and values, dict state, object
  // args/kwargs/state/list_items/dict_items.
  void for_each_child(const std::function<void(const Value&)>& f) const;
  // Dismantles every container reachable from `roots` except those whose identity() is in `keep` (which are
  // neither cleared nor descended into), then drops the roots. Iterative; safe for cycles and deep nesting.
  static void dismantle_all(std::vector<Value> roots, const std::unordered_set<const void*>* keep = nullptr);
  // The same with `keep` as a predicate on identity() (called for containers only).
  static void dismantle_all(std::vector<Value> roots, const std::function<bool(const void*)>& keep);

 private:
  // One payload slot, not one shared_ptr per kind: a Value is 48 bytes instead of 176, which is what moving,
  // growing and freeing the millions of Values of a checkpoint's metadata costs (~20k params: 2x faster).
  using Payload =
      std::variant<std::monostate, std::shared_ptr<std::string>, std::shared_ptr<std::vector<uint8_t>>,
                   std::shared_ptr<std::vector<Value>>, std::shared_ptr<DictData>, std::shared_ptr<Tensor>,
                   std::shared_ptr<Storage>, std::shared_ptr<std::vector<int64_t>>,
                   std::shared_ptr<std::pair<std::string, std::string>>, std::shared_ptr<ObjectData>>;
  // The payload as a T (null when it holds something else); the mutable one makes it a T first.
  template <class T>
  const std::shared_ptr<T>& payload() const {
    static const std::shared_ptr<T> null;
    const auto* p = std::get_if<std::shared_ptr<T>>(&p_);
    return p ? *p : null;
  }
  template <class T>
  std::shared_ptr<T>& payload() {
    if (!std::holds_alternative<std::shared_ptr<T>>(p_)) p_.template emplace<std::shared_ptr<T>>();
    return std::get<std::shared_ptr<T>>(p_);
  }
  const std::shared_ptr<std::string>& s_() const { return payload<std::string>(); }
  std::shared_ptr<std::string>& s_() { return payload<std::string>(); }
  const std::shared_ptr<std::vector<uint8_t>>& big_() const { return payload<std::vector<uint8_t>>(); }
  std::shared_ptr<std::vector<uint8_t>>& big_() { return payload<std::vector<uint8_t>>(); }
  const std::shared_ptr<std::vector<Value>>& items_() const { return payload<std::vector<Value>>(); }
  std::shared_ptr<std::vector<Value>>& items_() { return payload<std::vector<Value>>(); }
  const std::shared_ptr<DictData>& dict_() const { return payload<DictData>(); }
  std::shared_ptr<DictData>& dict_() { return payload<DictData>(); }
  const std::shared_ptr<Tensor>& tensor_() const { return payload<Tensor>(); }
  std::shared_ptr<Tensor>& tensor_() { return payload<Tensor>(); }
  const std::shared_ptr<Storage>& storage_() const { return payload<Storage>(); }
  std::shared_ptr<Storage>& storage_() { return payload<Storage>(); }
  const std::shared_ptr<std::vector<int64_t>>& size_() const { return payload<std::vector<int64_t>>(); }
  std::shared_ptr<std::vector<int64_t>>& size_() { return payload<std::vector<int64_t>>(); }
  const std::shared_ptr<std::pair<std::string, std::string>>& global_() const {
    return payload<std::pair<std::string, std::string>>();
  }
  std::shared_ptr<std::pair<std::string, std::string>>& global_() {
    return payload<std::pair<std::string, std::string>>();
  }
  const std::shared_ptr<ObjectData>& object_() const { return payload<ObjectData>(); }
  std::shared_ptr<ObjectData>& object_() { return payload<ObjectData>(); }

  Kind kind_ = Kind::None;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  Payload p_;
};

}  // namespace ckptdoc
