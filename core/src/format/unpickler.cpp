// An inert pickle VM. It follows CPython's _Unpickler semantics (pickle.py) for the stack, MARKs and memo,
// but GLOBAL only names things and REDUCE/NEWOBJ/BUILD only describe them, except for the closed set of
// reconstructors that torch checkpoints need (tensors, OrderedDict, set, bytes, torch.Size/device/dtype).
#include "ckptdoc/format/unpickler.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ckptdoc/error.h"

namespace ckptdoc {
namespace {

const char* opcode_name(uint8_t op) {
  switch (op) {
    case 0x80:
      return "PROTO";
    case '.':
      return "STOP";
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 'b':
      return "BUILD";
    case 'Q':
      return "BINPERSID";
    case 'P':
      return "PERSID";
    case '(':
      return "MARK";
    case '1':
      return "POP_MARK";
    case '0':
      return "POP";
    case '2':
      return "DUP";
    case 'q':
      return "BINPUT";
    case 'r':
      return "LONG_BINPUT";
    case 'p':
      return "PUT";
    case 0x94:
      return "MEMOIZE";
    case 'h':
      return "BINGET";
    case 'j':
      return "LONG_BINGET";
    case 'g':
      return "GET";
    case 'N':
      return "NONE";
    case 0x88:
      return "NEWTRUE";
    case 0x89:
      return "NEWFALSE";
    case 'K':
      return "BININT1";
    case 'M':
      return "BININT2";
    case 'J':
      return "BININT";
    case 0x8a:
      return "LONG1";
    case 0x8b:
      return "LONG4";
    case 'I':
      return "INT";
    case 'L':
      return "LONG";
    case 'G':
      return "BINFLOAT";
    case 'F':
      return "FLOAT";
    case 'X':
      return "BINUNICODE";
    case 0x8c:
      return "SHORT_BINUNICODE";
    case 0x8d:
      return "BINUNICODE8";
    case 'V':
      return "UNICODE";
    case 'U':
      return "SHORT_BINSTRING";
    case 'T':
      return "BINSTRING";
    case 'S':
      return "STRING";
    case 'C':
      return "SHORT_BINBYTES";
    case 'B':
      return "BINBYTES";
    case 0x8e:
      return "BINBYTES8";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    case ']':
      return "EMPTY_LIST";
    case 'a':
      return "APPEND";
    case 'e':
      return "APPENDS";
    case 'l':
      return "LIST";
    case ')':
      return "EMPTY_TUPLE";
    case 't':
      return "TUPLE";
    case 0x85:
      return "TUPLE1";
    case 0x86:
      return "TUPLE2";
    case 0x87:
      return "TUPLE3";
    case '}':
      return "EMPTY_DICT";
    case 'd':
      return "DICT";
    case 's':
      return "SETITEM";
    case 'u':
      return "SETITEMS";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 0x95:
      return "FRAME";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    default:
      return nullptr;
  }
}

// The pickle memo. Picklers number entries 0, 1, 2, ..., so indices near the count so far live in a vector;
// any other (a hostile or odd stream) in a hash map. The vector grows only to twice the entries plus a
// little, so its memory stays within a small factor of the entries', like the map's.
class Memo {
 public:
  size_t size() const { return count_; }
  Value* find(uint64_t i) {
    if (i < dense_.size()) return stored_[i] ? &dense_[i] : nullptr;
    if (i > std::numeric_limits<uint32_t>::max()) return nullptr;
    auto it = sparse_.find(static_cast<uint32_t>(i));
    return it == sparse_.end() ? nullptr : &it->second;
  }
  // Adds an entry at an index find() did not find.
  void add(uint32_t i, Value v) {
    if (i < dense_.size() || i <= 2 * count_ + kSlack) {
      if (i >= dense_.size()) {
        dense_.resize(static_cast<size_t>(i) + 1);
        stored_.resize(static_cast<size_t>(i) + 1, 0);
      }
      dense_[i] = std::move(v);
      stored_[i] = 1;
    } else {
      sparse_.emplace(i, std::move(v));
    }
    ++count_;
  }
  // Moves every entry out to f, then empties the memo.
  template <class F>
  void drain(F&& f) {
    for (size_t i = 0; i < dense_.size(); ++i)
      if (stored_[i]) f(dense_[i]);
    for (auto& [k, v] : sparse_) f(v);
    dense_.clear();
    stored_.clear();
    sparse_.clear();
    count_ = 0;
  }

 private:
  static constexpr size_t kSlack = 1024;
  std::vector<Value> dense_;
  std::vector<uint8_t> stored_;  // stored_[i]: dense_[i] is an entry (a stored None is one too)
  std::unordered_map<uint32_t, Value> sparse_;
  size_t count_ = 0;
};

// Container address -> height, for validate() and the final cleanup: open addressing over one array, since
// a 20k-param checkpoint's result has ~10^5 containers and every tensor's persistent id is validated too
// (a node-based map cost an allocation per container).
class Heights {
 public:
  const size_t* find(const void* key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = slot_of(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == key) return &slots_[i].height;
      if (!slots_[i].key) return nullptr;
    }
  }
  bool contains(const void* key) const { return find(key) != nullptr; }
  // The height of `key`, added with `height` when absent.
  size_t& get_or_add(const void* key, size_t height) {
    if (2 * (used_ + 1) > slots_.size()) grow(std::max<size_t>(16, 2 * slots_.size()));
    size_t i = slot_of(key);
    for (; slots_[i].key; i = (i + 1) & (slots_.size() - 1))
      if (slots_[i].key == key) return slots_[i].height;
    slots_[i] = {key, height};
    ++used_;
    return slots_[i].height;
  }
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    if (cap > slots_.size()) grow(cap);
  }
  // Empties the map; a small one keeps its array for the next use.
  void clear() {
    if (slots_.size() > 256) {
      slots_.clear();
      slots_.shrink_to_fit();
    } else {
      std::fill(slots_.begin(), slots_.end(), Slot{});
    }
    used_ = 0;
  }

 private:
  struct Slot {
    const void* key = nullptr;  // never null for a container
    size_t height = 0;
  };
  size_t slot_of(const void* key) const {
    const auto a = reinterpret_cast<uintptr_t>(key);
    return static_cast<size_t>((a >> 4) * 0x9E3779B97F4A7C15ull >> 17) & (slots_.size() - 1);
  }
  void grow(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    for (const Slot& s : old) {
      if (!s.key) continue;
      size_t i = slot_of(s.key);
      while (slots_[i].key) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

// A failure inside the VM; the driver adds file, record, offset and opcode.
struct VmError {
  std::string what;
  ErrorKind kind;
};
[[noreturn]] void vm_fail(std::string what, ErrorKind kind = ErrorKind::Corrupt) {
  throw VmError{std::move(what), kind};
}

std::string hex_byte(uint8_t b) {
  static const char* hex = "0123456789abcdef";
  return std::string("0x") + hex[b >> 4] + hex[b & 15];
}

// Python 2 names (fix_imports) mapped to Python 3 for interpretation; the tree keeps what the file says.
std::string_view py3_module(std::string_view m) {
  if (m == "__builtin__") return "builtins";
  if (m == "copy_reg") return "copyreg";
  return m;
}

bool is_torch_dtype_name(std::string_view n) {
  static const std::unordered_set<std::string_view> names{"float32",
                                                          "float",
                                                          "float64",
                                                          "double",
                                                          "float16",
                                                          "half",
                                                          "bfloat16",
                                                          "int64",
                                                          "long",
                                                          "int32",
                                                          "int",
                                                          "int16",
                                                          "short",
                                                          "int8",
                                                          "uint8",
                                                          "bool",
                                                          "complex32",
                                                          "chalf",
                                                          "complex64",
                                                          "cfloat",
                                                          "complex128",
                                                          "cdouble",
                                                          "qint8",
                                                          "qint32",
                                                          "quint8",
                                                          "quint4x2",
                                                          "quint2x4",
                                                          "float8_e5m2",
                                                          "float8_e4m3fn",
                                                          "float8_e5m2fnuz",
                                                          "float8_e4m3fnuz",
                                                          "float8_e8m0fnu",
                                                          "float4_e2m1fn_x2",
                                                          "bits8",
                                                          "bits1x8",
                                                          "bits2x4",
                                                          "bits4x2",
                                                          "bits16",
                                                          "uint16",
                                                          "uint32",
                                                          "uint64",
                                                          "uint1",
                                                          "uint2",
                                                          "uint3",
                                                          "uint4",
                                                          "uint5",
                                                          "uint6",
                                                          "uint7",
                                                          "int1",
                                                          "int2",
                                                          "int3",
                                                          "int4",
                                                          "int5",
                                                          "int6",
                                                          "int7"};
  return names.count(n) != 0;
}

// UTF-8 validation that, like Python's 'surrogatepass', accepts encoded surrogates.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
      return false;
    i += len;
  }
  return true;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// Decimal text -> little-endian two's complement bytes (Python's LONG text form, optional trailing 'L').
Value parse_decimal_int(std::string_view s) {
  if (!s.empty() && s.back() == 'L') s.remove_suffix(1);
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) vm_fail("invalid integer literal");
  if (s.size() > 10000) vm_fail("integer literal of " + std::to_string(s.size()) + " digits is too long");
  std::vector<uint8_t> mag{0};
  for (char ch : s) {
    if (ch < '0' || ch > '9') vm_fail("invalid integer literal");
    unsigned carry = static_cast<unsigned>(ch - '0');
    for (auto& b : mag) {
      const unsigned x = b * 10u + carry;
      b = static_cast<uint8_t>(x);
      carry = x >> 8;
    }
    if (carry) mag.push_back(static_cast<uint8_t>(carry));
  }
  mag.push_back(0);  // sign byte
  if (neg) {
    unsigned carry = 1;
    for (auto& b : mag) {
      const unsigned x = static_cast<uint8_t>(~b) + carry;
      b = static_cast<uint8_t>(x);
      carry = x >> 8;
    }
  }
  return Value::big_integer(std::move(mag));
}

class Vm {
 public:
  Vm(std::span<const uint8_t> data, const UnpickleOptions& opt) : data_(data), opt_(opt), lim_(opt.limits) {}
  // A VM over pickled bytes that a call of `loader` would unpickle: it only records what they reach.
  void nest(std::string loader, int depth) {
    nested_in_ = std::move(loader);
    nesting_ = depth;
  }

  UnpickleResult run();

 private:
  // --- input ---
  const uint8_t* take(uint64_t n) {
    if (n > data_.size() - pos_)
      vm_fail("needs " + std::to_string(n) + " bytes but only " + std::to_string(data_.size() - pos_) +
                  " remain (truncated or corrupt stream)",
              ErrorKind::Truncated);
    const uint8_t* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  uint8_t u8() { return *take(1); }
  uint64_t le(size_t n) {
    const uint8_t* p = take(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
  }
  std::string_view line() {
    const uint8_t* begin = data_.data() + pos_;
    const void* nl = std::memchr(begin, '\n', data_.size() - pos_);
    if (!nl) vm_fail("line is not terminated by a newline (truncated stream)", ErrorKind::Truncated);
    const size_t len = static_cast<size_t>(static_cast<const uint8_t*>(nl) - begin);
    pos_ += len + 1;
    std::string_view s(reinterpret_cast<const char*>(begin), len);
    if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    return s;
  }
  // Reads a length-prefixed payload, checking the length against what remains before allocating.
  std::string_view payload(uint64_t n, const char* what) {
    if (n > data_.size() - pos_)
      vm_fail(std::string(what) + " claims " + std::to_string(n) + " bytes but only " +
                  std::to_string(data_.size() - pos_) + " remain",
              ErrorKind::Truncated);
    charge(n);
    return {reinterpret_cast<const char*>(take(n)), static_cast<size_t>(n)};
  }
  void charge(uint64_t n) {
    if (n > lim_.max_alloc_bytes - allocated_)
      vm_fail("the stream creates more than " + std::to_string(lim_.max_alloc_bytes) +
              " bytes of strings, bytes and integers (limit)");
    allocated_ += n;
  }
  void count_items(uint64_t n) {
    if (n > lim_.max_container_items - items_)
      vm_fail("containers hold more than " + std::to_string(lim_.max_container_items) + " items (limit)");
    items_ += n;
  }

  // --- stack ---
  size_t frame() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Value v) {
    if (stack_.size() >= lim_.max_stack)
      vm_fail("stack holds more than " + std::to_string(lim_.max_stack) + " values (limit)");
    stack_.push_back(std::move(v));
  }
  Value& top(size_t k = 0) {
    if (stack_.size() < frame() + k + 1) vm_fail("stack underflow");
    return stack_[stack_.size() - 1 - k];
  }
  Value pop() {
    Value& t = top();
    Value v = std::move(t);
    stack_.pop_back();
    return v;
  }
  void drop(size_t n) {  // removes n values already checked to exist
    for (size_t i = 0; i < n; ++i) {
      bury(std::move(stack_.back()));
      stack_.pop_back();
    }
  }
  // A value the stream no longer holds on the stack: freed now when it is small and acyclic (a scalar, or a
  // few containers over scalars, like a tensor's REDUCE arguments), so dropping it cannot recurse deeply or
  // leak a cycle; anything else waits for the final dismantling. Keeping every dropped value until the end
  // cost a 20k-param checkpoint's reader ~1 M values held and walked again.
  void bury(Value v) {
    if (!v.identity()) return;
    small_.clear();
    small_.emplace_back(&v, 0);
    for (size_t i = 0; i < small_.size(); ++i) {
      const Value* x = small_[i].first;
      const size_t depth = small_[i].second;
      bool ok = true;
      x->for_each_child([&](const Value& c) {
        if (!ok || !c.identity()) return;
        if (depth + 1 >= kSmallDepth || small_.size() >= kSmallContainers) {
          ok = false;
          return;
        }
        small_.emplace_back(&c, depth + 1);
      });
      if (!ok) {
        graveyard_.push_back(std::move(v));
        return;
      }
    }
    // Every path ends within kSmallDepth levels, so there is no cycle; freeing recurses at most that deep.
  }
  size_t mark_pos() const {
    if (marks_.empty()) vm_fail("no MARK to pop to");
    return marks_.back();
  }
  std::vector<Value> pop_mark() {
    const size_t m = mark_pos();
    std::vector<Value> items(std::make_move_iterator(stack_.begin() + static_cast<long>(m)),
                             std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    marks_.pop_back();
    return items;
  }

  // --- memo ---
  void memo_put(uint64_t index) {
    if (index > std::numeric_limits<uint32_t>::max())
      vm_fail("memo index " + std::to_string(index) + " is too large");
    const Value& v = top();
    if (Value* old = memo_.find(index)) {
      graveyard_.push_back(std::move(*old));
      *old = v;
      return;
    }
    if (memo_.size() >= lim_.max_memo)
      vm_fail("memo holds more than " + std::to_string(lim_.max_memo) + " entries (limit)");
    memo_.add(static_cast<uint32_t>(index), v);
  }
  void memo_get(uint64_t index) {
    const Value* v = memo_.find(index);
    if (!v) vm_fail("memo index " + std::to_string(index) + " was never stored");
    push(*v);
  }

  void note_global(std::string_view module, std::string_view name) {
    std::string q = std::string(module) + "." + std::string(name);
    record_use(q, false, PickleUseKind::Global, {}, {}, {}, std::string(module), std::string(name));
    if (globals_seen_.insert(q).second) globals_.push_back(std::move(q));
  }
  // --- what the stream reaches (UnpickleOptions::uses) ---
  PickleUse make_use(std::string callable, bool computed, PickleUseKind how, std::string via = {},
                     std::string attribute_of = {}, std::string attribute = {}, std::string module = {},
                     std::string name = {}) const {
    PickleUse u;
    u.record = opt_.record_name;
    u.callable = std::move(callable);
    u.module = std::move(module);
    u.name = std::move(name);
    u.computed = computed;
    u.how = how;
    u.via = std::move(via);
    u.nested_in = nested_in_;
    u.attribute_of = std::move(attribute_of);
    u.attribute = std::move(attribute);
    u.offset = op_start_;
    u.count = 1;
    return u;
  }
  void record_use(std::string callable, bool computed, PickleUseKind how, std::string via = {},
                  std::string attribute_of = {}, std::string attribute = {}, std::string module = {},
                  std::string name = {}) {
    if (!opt_.uses) return;
    opt_.uses->add(make_use(std::move(callable), computed, how, std::move(via), std::move(attribute_of),
                            std::move(attribute), std::move(module), std::move(name)));
  }
  // Repeats of a GLOBAL, and plain calls of the same GLOBAL value (a checkpoint names _rebuild_tensor_v2
  // once per tensor; writers that do not memoize globals spell it out each time): the first is recorded in
  // full, the rest only counted here and added to the log as the stream ends (flush_repeats(), on every
  // path). That keeps ~10 string allocations per tensor out of the VM. Bounded: kMaxRepeats distinct
  // entries of short names; anything else takes the full path each time.
  struct Repeat {
    Value value;    // the GLOBAL's value, kept alive so that its address names it in call_repeats_
    PickleUse use;  // what the first one recorded; count: the repeats since
  };
  static constexpr size_t kMaxRepeats = 4096, kMaxRepeatName = 256;
  std::unordered_map<std::string, Repeat> global_repeats_;                // size-prefixed module, then name
  std::string repeat_key_;                                                // make_global()'s key, reused
  std::map<std::pair<const void*, PickleUseKind>, Repeat> call_repeats_;  // the GLOBAL's payload, how
  void flush_repeats() noexcept {
    try {
      if (opt_.uses) {
        for (auto& [k, r] : global_repeats_)
          if (r.use.count) opt_.uses->add(std::move(r.use));
        for (auto& [k, r] : call_repeats_)
          if (r.use.count) opt_.uses->add(std::move(r.use));
        for (auto& [k, r] : build_repeats_)
          if (r.use.count) opt_.uses->add(std::move(r.use));
      }
    } catch (...) {
      // Out of memory while merging counts: the first use of each is recorded already.
    }
    global_repeats_.clear();
    call_repeats_.clear();
    build_repeats_.clear();
  }
  // BUILD on an instance of a GLOBAL class (a checkpoint has one per fragment_address): recorded in full the
  // first time, then only counted, like global_repeats_.
  std::unordered_map<std::string, Repeat> build_repeats_;  // size-prefixed module, then name
  void record_build_use(const ObjectData& o) {
    if (!opt_.uses) return;
    const bool cacheable = o.module.size() + o.name.size() <= kMaxRepeatName;
    std::string& key = repeat_key_;
    if (cacheable) {
      key.clear();
      key += std::to_string(o.module.size());
      key += ':';
      key += o.module;
      key += o.name;
      if (auto it = build_repeats_.find(key); it != build_repeats_.end()) {
        ++it->second.use.count;
        return;
      }
    }
    record_use(o.qualified(), false, PickleUseKind::Build, {}, {}, {}, o.module, o.name);
    if (cacheable && build_repeats_.size() < kMaxRepeats) {
      Repeat r{Value(), make_use(o.qualified(), false, PickleUseKind::Build, {}, {}, {}, o.module, o.name)};
      r.use.count = 0;
      build_repeats_.emplace(key, std::move(r));
    }
  }
  // A use of a GLOBAL, its module and name kept apart (a dotted name is an attribute walk).
  void record_global_use(const Value& g, PickleUseKind how, std::string via = {},
                         std::string attribute_of = {}, std::string attribute = {});
  void record_call(const Value& callable, const Value& args, PickleUseKind how);
  void record_globals_in(const Value& v, PickleUseKind how);
  void scan_nested_pickle(const std::string& loader, const std::string& bytes);
  Value make_global(std::string_view module, std::string_view name) {
    if (module.empty() || name.empty()) vm_fail("GLOBAL with an empty module or name");
    const bool cacheable = module.size() + name.size() <= kMaxRepeatName;
    std::string& key = repeat_key_;  // reused: a repeat costs no allocation
    if (cacheable) {
      key.clear();
      key += std::to_string(module.size());
      key += ':';
      key += module;
      key += name;
      if (auto it = global_repeats_.find(key); it != global_repeats_.end()) {
        charge(module.size() + name.size());
        ++it->second.use.count;
        return it->second.value;
      }
    }
    if (!valid_utf8(module) || !valid_utf8(name)) vm_fail("GLOBAL name is not valid UTF-8");
    charge(module.size() + name.size());
    note_global(module, name);
    Value v = module == "torch" && is_torch_dtype_name(name)
                  ? Value::dtype(std::string(name))
                  : Value::global(std::string(module), std::string(name));
    if (cacheable && global_repeats_.size() < kMaxRepeats) {
      Repeat r{v, opt_.uses
                      ? make_use(std::string(module) + "." + std::string(name), false, PickleUseKind::Global,
                                 {}, {}, {}, std::string(module), std::string(name))
                      : PickleUse{}};
      r.use.count = 0;
      global_repeats_.emplace(key, std::move(r));
    }
    return v;
  }

  Value text_string(std::string_view quoted);
  Value py2_string(std::string_view raw);
  Value call(const Value& callable, const Value& args, ObjectData::How how, const Value* kwargs,
             PickleUseKind kind);
  Value rebuild_tensor(const std::string& fn, const Value& args);
  void build(Value& inst, const Value& state);
  void add_list_items(Value& target, size_t from);
  void add_dict_items(Value& target, size_t from);
  void step(uint8_t op);
  void validate(const Value& root, Heights& height_of, const char* what = "the result");

  std::span<const uint8_t> data_;
  const UnpickleOptions& opt_;
  const UnpickleLimits& lim_;
  size_t pos_ = 0;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  Memo memo_;
  std::vector<Value> graveyard_;
  static constexpr size_t kSmallDepth = 4, kSmallContainers = 64;
  std::vector<std::pair<const Value*, size_t>> small_;  // bury()'s walk
  Heights pid_heights_;                                 // validate()'s map for persistent ids, reused
  uint64_t allocated_ = 0;
  uint64_t items_ = 0;
  int protocol_ = 0;
  bool stopped_ = false;
  Value result_;
  std::vector<std::string> globals_;
  std::unordered_set<std::string> globals_seen_;
  size_t op_start_ = 0;
  std::string nested_in_;  // set on VMs over nested pickled bytes
  int nesting_ = 0;
};

// Pickle loaders a stream may hand bytes to: those bytes are a pickle torch.load would then run too.
bool is_pickle_loader(const std::string& q) {
  static const std::unordered_set<std::string> names{"pickle.loads",
                                                     "pickle._loads",
                                                     "_pickle.loads",
                                                     "cPickle.loads",
                                                     "dill.loads",
                                                     "dill._dill.loads",
                                                     "torch.storage._load_from_bytes",
                                                     "torch.serialization._load_from_bytes",
                                                     "joblib.numpy_pickle.loads"};
  return names.count(q) != 0;
}

// "module.name" of a GLOBAL; "<result of module.name>" for what a call returned (calls of calls are followed
// a few levels, iteratively: a hostile stream may nest them deeply).
std::string describe_callable(const Value& c) {
  if (c.is(Value::Kind::Global)) return c.as_global().first + "." + c.as_global().second;
  if (!c.is(Value::Kind::Object)) return "<" + c.type_name() + ">";
  const Value* v = &c;
  int levels = 0;
  while (v->is(Value::Kind::Object) && v->as_object().callable && levels < 8) {
    v = v->as_object().callable.get();
    ++levels;
  }
  std::string inner = v->is(Value::Kind::Object)   ? v->as_object().qualified()
                      : v->is(Value::Kind::Global) ? v->as_global().first + "." + v->as_global().second
                                                   : "<" + v->type_name() + ">";
  std::string out = "<result of " + inner + ">";
  for (int i = 1; i < levels; ++i) {
    out.insert(0, "<result of ");
    out += '>';
  }
  return out;
}

void Vm::record_global_use(const Value& g, PickleUseKind how, std::string via, std::string attribute_of,
                           std::string attribute) {
  record_use(describe_callable(g), false, how, std::move(via), std::move(attribute_of), std::move(attribute),
             g.as_global().first, g.as_global().second);
}

void Vm::record_call(const Value& callable, const Value& args, PickleUseKind how) {
  using K = Value::Kind;
  if (!opt_.uses) return;
  if (!callable.is(K::Global)) {
    record_use(describe_callable(callable), true, how);
    return;
  }
  const auto repeat_key = std::make_pair(static_cast<const void*>(&callable.as_global()), how);
  if (auto it = call_repeats_.find(repeat_key); it != call_repeats_.end()) {
    ++it->second.use.count;
    return;
  }
  const std::string q = describe_callable(callable);
  const std::string q3 =
      std::string(py3_module(callable.as_global().first)) + "." + callable.as_global().second;
  // A call whose record does not depend on its arguments: repeats are only counted (Repeat).
  const bool plain = q3 != "builtins.getattr" && q3 != "copyreg._reconstructor" &&
                     q3 != "copyreg.__newobj__" && q3 != "copyreg.__newobj_ex__" && !is_pickle_loader(q3);
  if (plain && call_repeats_.size() < kMaxRepeats) {
    Repeat r{callable,
             make_use(q, false, how, {}, {}, {}, callable.as_global().first, callable.as_global().second)};
    r.use.count = 0;
    call_repeats_.emplace(repeat_key, std::move(r));
  }
  const auto& a = args.is(K::Tuple) ? args.items() : std::vector<Value>{};
  if (q3 == "builtins.getattr" && a.size() == 2 && a[0].is(K::Global) && a[1].is(K::Str)) {
    record_global_use(callable, how, {}, describe_callable(a[0]), a[1].as_str());
    return;
  }
  record_global_use(callable, how);
  // copyreg's helpers construct the class they are given.
  if ((q3 == "copyreg._reconstructor" || q3 == "copyreg.__newobj__" || q3 == "copyreg.__newobj_ex__") &&
      !a.empty() && a[0].is(K::Global))
    record_global_use(a[0], PickleUseKind::NewObj, q);
  if (is_pickle_loader(q3) && !a.empty() && a[0].is(K::Bytes)) scan_nested_pickle(q, a[0].as_str());
}

// GLOBALs inside a value (a persistent id): torch.load's persistent_load imports them.
void Vm::record_globals_in(const Value& v, PickleUseKind how) {
  if (!opt_.uses) return;
  std::vector<const Value*> work{&v};
  std::unordered_set<const void*> seen;
  while (!work.empty()) {
    const Value* x = work.back();
    work.pop_back();
    if (x->is(Value::Kind::Global)) {
      record_global_use(*x, how);
      continue;
    }
    const void* id = x->identity();
    if (!id || !seen.insert(id).second) continue;
    x->for_each_child([&](const Value& c) { work.push_back(&c); });
  }
}

// Records what pickled bytes passed to a loader would reach, without keeping anything they build.
void Vm::scan_nested_pickle(const std::string& loader, const std::string& bytes) {
  if (nesting_ >= 4) {
    record_use("<pickle nested more than 4 levels deep>", true, PickleUseKind::Reduce);
    return;
  }
  UnpickleOptions o;
  o.limits = lim_;
  o.file_name = opt_.file_name;
  o.record_name = opt_.record_name;
  o.uses = opt_.uses;
  o.persistent_load = [](const Value&) { return Value::none(); };
  Vm inner(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), o);
  inner.nest(nested_in_.empty() ? loader : nested_in_ + " > " + loader, nesting_ + 1);
  try {
    (void)inner.run();
  } catch (const Error&) {
    // What it reached before failing is recorded; the bytes themselves stay inert.
  }
}

Value Vm::py2_string(std::string_view raw) {
  // torch.load decodes Python 2 str with encoding='utf-8'; undecodable ones stay bytes.
  if (valid_utf8(raw)) return Value::str(std::string(raw));
  return Value::bytes(std::string(raw));
}

// STRING: a Python repr of a byte string, quoted with ' or ".
Value Vm::text_string(std::string_view q) {
  if (q.size() < 2 || q.front() != q.back() || (q.front() != '\'' && q.front() != '"'))
    vm_fail("STRING argument is not a quoted string");
  q = q.substr(1, q.size() - 2);
  std::string out;
  out.reserve(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    char c = q[i];
    if (c != '\\' || i + 1 == q.size()) {
      out += c;
      continue;
    }
    const char e = q[++i];
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case '\n':
        break;
      case 'x': {
        if (i + 2 >= q.size()) vm_fail("bad \\x escape in STRING");
        unsigned v = 0;
        auto r = std::from_chars(q.data() + i + 1, q.data() + i + 3, v, 16);
        if (r.ptr != q.data() + i + 3) vm_fail("bad \\x escape in STRING");
        out += static_cast<char>(v);
        i += 2;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          unsigned v = static_cast<unsigned>(e - '0');
          for (int k = 0; k < 2 && i + 1 < q.size() && q[i + 1] >= '0' && q[i + 1] <= '7'; ++k)
            v = v * 8 + static_cast<unsigned>(q[++i] - '0');
          out += static_cast<char>(v & 0xff);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return py2_string(out);
}

// ---------------------------------------------------------------------------------------------------------
// Reconstructors

int64_t want_int(const Value& v, const char* what) {
  if (!v.is(Value::Kind::Int)) vm_fail(std::string(what) + ": " + expected_found("int", v.type_name()));
  return v.as_int();
}

std::vector<int64_t> want_int_tuple(const Value& v, const char* what) {
  if (!(v.is(Value::Kind::Tuple) || v.is(Value::Kind::List) || v.is(Value::Kind::Size)))
    vm_fail(std::string(what) + ": " + expected_found("tuple of ints", v.type_name()));
  if (v.is(Value::Kind::Size)) return v.as_size();
  std::vector<int64_t> out;
  for (const auto& x : v.items()) out.push_back(want_int(x, what));
  return out;
}

Value Vm::rebuild_tensor(const std::string& fn, const Value& args) {
  const auto& a = args.items();
  const bool v3 = fn == "_rebuild_tensor_v3";
  const bool v1 = fn == "_rebuild_tensor";
  if ((v1 && a.size() != 4) || (!v1 && !v3 && a.size() != 6 && a.size() != 7) ||
      (v3 && a.size() != 7 && a.size() != 8))
    vm_fail("torch._utils." + fn + " with " + std::to_string(a.size()) + " arguments");
  if (!a[0].is(Value::Kind::Storage))
    vm_fail("torch._utils." + fn + ": " +
            expected_found("a storage (persistent id) as argument 1", a[0].type_name()));
  Tensor t;
  t.storage = a[0].as_storage();
  if (!t.storage) vm_fail("torch._utils." + fn + ": null storage");
  t.storage_offset = want_int(a[1], "tensor storage offset");
  t.shape = want_int_tuple(a[2], "tensor size");
  t.strides = want_int_tuple(a[3], "tensor stride");
  if (!v1) {
    if (!a[4].is(Value::Kind::Bool))
      vm_fail("tensor requires_grad: " + expected_found("bool", a[4].type_name()));
    t.requires_grad = a[4].as_bool();
  }
  t.dtype = t.storage->dtype;
  if (v3) {
    if (!a[6].is(Value::Kind::DType))
      vm_fail("tensor dtype: " + expected_found("a torch dtype", a[6].type_name()));
    const auto d = dtype_from_name(a[6].as_str());
    if (!d) vm_fail("tensor dtype torch." + a[6].as_str() + " is not supported", ErrorKind::Unsupported);
    t.dtype = *d;
  }
  const size_t meta_index = v3 ? 7 : 6;
  if (!v1 && a.size() > meta_index && a[meta_index].is_dict()) {
    for (const auto& [k, v] : a[meta_index].as_dict().items)
      if (v.is(Value::Kind::Bool) && v.as_bool())
        vm_fail("tensor metadata '" + (k.is(Value::Kind::Str) ? k.as_str() : k.repr()) +
                    "' (conj/neg views) is not supported",
                ErrorKind::Unsupported);
  }
  if (t.dtype != t.storage->dtype)
    vm_fail("tensor dtype " + std::string(dtype_name(t.dtype)) + " does not match its storage's dtype " +
            std::string(dtype_name(t.storage->dtype)));
  if (t.shape.size() != t.strides.size())
    vm_fail("tensor has " + std::to_string(t.shape.size()) + " sizes but " +
            std::to_string(t.strides.size()) + " strides");
  if (t.storage_offset < 0)
    vm_fail("tensor storage offset " + std::to_string(t.storage_offset) + " is negative");
  bool empty = false;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] < 0) vm_fail("tensor size " + std::to_string(t.shape[i]) + " is negative");
    if (t.strides[i] < 0) vm_fail("tensor stride " + std::to_string(t.strides[i]) + " is negative");
    if (t.shape[i] == 0) empty = true;
  }
  uint64_t numel = 1;
  for (int64_t d : t.shape)
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel) ||
        numel > static_cast<uint64_t>(INT64_MAX))
      vm_fail("tensor element count overflows");
  if (!empty) {
    uint64_t last = static_cast<uint64_t>(t.storage_offset);
    for (size_t i = 0; i < t.shape.size(); ++i) {
      uint64_t span = 0;
      if (__builtin_mul_overflow(static_cast<uint64_t>(t.shape[i] - 1), static_cast<uint64_t>(t.strides[i]),
                                 &span) ||
          __builtin_add_overflow(last, span, &last))
        vm_fail("tensor view extent overflows");
    }
    if (last >= t.storage->numel)
      vm_fail("tensor view (offset " + std::to_string(t.storage_offset) + ", size " +
              Value::size(t.shape).repr() + ", stride " + Value::size(t.strides).repr() +
              ") reaches element " + std::to_string(last) + " but storage '" + t.storage->key + "' has " +
              std::to_string(t.storage->numel) + " elements");
  }
  return Value::tensor(std::move(t));
}

Value bytes_from_latin1(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if ((c & 0xe0) == 0xc0 && i + 1 < s.size()) {
      const uint32_t cp = ((c & 0x1fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3fu);
      if (cp > 0xff) vm_fail("_codecs.encode(latin1): code point above U+00FF");
      out += static_cast<char>(cp);
      i += 2;
    } else {
      vm_fail("_codecs.encode(latin1): code point above U+00FF");
    }
  }
  return Value::bytes(std::move(out));
}

Value Vm::call(const Value& callable, const Value& args, ObjectData::How how, const Value* kwargs,
               PickleUseKind kind) {
  using K = Value::Kind;
  record_call(callable, args, kind);
  if (!args.is(K::Tuple)) vm_fail("call arguments: " + expected_found("tuple", args.type_name()));
  const auto& a = args.items();
  if (callable.is(K::Global) && how == ObjectData::How::Reduce) {
    const std::string_view module = py3_module(callable.as_global().first);
    const std::string& name = callable.as_global().second;
    if (module == "torch._utils") {
      if (name == "_rebuild_tensor_v2" || name == "_rebuild_tensor" || name == "_rebuild_tensor_v3")
        return rebuild_tensor(name, args);
      if (name == "_rebuild_parameter" || name == "_rebuild_parameter_with_state") {
        if (a.size() < 2 || !a[0].is(K::Tensor) || !a[1].is(K::Bool))
          vm_fail("torch._utils." + name + ": " +
                  expected_found("(tensor, requires_grad, ...)", args.repr(80)));
        Tensor t = a[0].as_tensor();
        t.requires_grad = a[1].as_bool();
        t.is_parameter = true;
        return Value::tensor(std::move(t));
      }
    } else if (module == "torch._tensor" && name == "_rebuild_from_type_v2") {
      // (func, new_type, args, state): how torch 2 pickles a plain tensor or Parameter that carries Python
      // attributes (DeepSpeed 0.19's ZeRO-3 fp32_flat_groups carry `ds_id`). The tensor is func(*args); the
      // attributes are dropped, as for a BUILD on a tensor. Subclasses and other rebuild functions stay
      // objects.
      if (a.size() == 4 && a[0].is(K::Global) && a[1].is(K::Global) && a[2].is(K::Tuple) &&
          py3_module(a[0].as_global().first) == "torch._utils") {
        const std::string& fn = a[0].as_global().second;
        const std::string type =
            std::string(py3_module(a[1].as_global().first)) + "." + a[1].as_global().second;
        const bool plain = type == "torch.Tensor" || type == "torch._tensor.Tensor";
        const bool param = type == "torch.nn.parameter.Parameter";
        if ((plain || param) &&
            (fn == "_rebuild_tensor_v2" || fn == "_rebuild_tensor" || fn == "_rebuild_tensor_v3")) {
          Value v = rebuild_tensor(fn, a[2]);
          if (param) {
            Tensor t = v.as_tensor();
            t.is_parameter = true;
            return Value::tensor(std::move(t));
          }
          return v;
        }
      }
    } else if (module == "collections" && name == "OrderedDict") {
      if (a.empty()) return Value::dict(true);
      if (a.size() == 1 && (a[0].is(K::List) || a[0].is(K::Tuple))) {
        Value d = Value::dict(true);
        bool ok = true;
        for (const auto& p : a[0].items()) ok = ok && p.is(K::Tuple) && p.items().size() == 2;
        if (ok) {
          count_items(a[0].items().size());
          for (const auto& p : a[0].items()) d.set_item(p.items()[0], p.items()[1]);
          return d;
        }
      }
    } else if (module == "builtins" && (name == "set" || name == "frozenset")) {
      if (a.empty()) return Value::set({}, name == "frozenset");
      if (a.size() == 1 &&
          (a[0].is(K::List) || a[0].is(K::Tuple) || a[0].is(K::Set) || a[0].is(K::FrozenSet))) {
        count_items(a[0].items().size());
        return Value::set(a[0].items(), name == "frozenset");
      }
    } else if (module == "_codecs" && name == "encode") {
      if (a.size() == 2 && a[0].is(K::Str) && a[1].is(K::Str)) {
        const std::string& enc = a[1].as_str();
        charge(a[0].as_str().size());
        if (enc == "latin1" || enc == "latin-1" || enc == "iso-8859-1")
          return bytes_from_latin1(a[0].as_str());
        if (enc == "utf-8" || enc == "utf8") return Value::bytes(a[0].as_str());
      }
    } else if (module == "builtins" && (name == "bytes" || name == "bytearray")) {
      if (a.empty()) return Value::bytes("");
      if (a.size() == 1 && a[0].is(K::Bytes)) return a[0];
      if (a.size() == 1 && a[0].is(K::List)) {
        std::string out;
        bool ok = true;
        for (const auto& x : a[0].items()) {
          ok = ok && x.is(K::Int) && x.as_int() >= 0 && x.as_int() <= 255;
          if (ok) out += static_cast<char>(x.as_int());
        }
        if (ok) return Value::bytes(std::move(out));
      }
    } else if (module == "torch" && name == "Size") {
      if (a.size() == 1 && (a[0].is(K::Tuple) || a[0].is(K::List)))
        return Value::size(want_int_tuple(a[0], "torch.Size"));
    } else if (module == "torch" && name == "device") {
      if (a.size() == 1 && a[0].is(K::Str)) return Value::device(a[0].as_str());
      if (a.size() == 2 && a[0].is(K::Str) && a[1].is(K::Int))
        return Value::device(a[0].as_str() + ":" + std::to_string(a[1].as_int()));
    }
  }
  if (callable.is(K::Global) && how == ObjectData::How::NewObj && a.empty() &&
      py3_module(callable.as_global().first) == "collections" && callable.as_global().second == "OrderedDict")
    return Value::dict(true);
  ObjectData o;
  o.how = how;
  if (callable.is(K::Global)) {
    o.module = callable.as_global().first;
    o.name = callable.as_global().second;
  } else {
    o.module = "";
    o.name = "<call>";
    o.callable = std::make_shared<Value>(callable);
  }
  o.args = std::make_shared<Value>(args);
  if (kwargs) o.kwargs = std::make_shared<Value>(*kwargs);
  return Value::object(std::move(o));
}

void Vm::build(Value& inst, const Value& state) {
  using K = Value::Kind;
  if (inst.is_dict()) {
    if (!inst.as_dict().ordered) vm_fail("BUILD on a plain dict");
    if (state.is_none()) return;
    // OrderedDict's __dict__ update; a (dict, slots) pair keeps its dict part.
    Value s = state;
    if (state.is(K::Tuple) && state.items().size() == 2 && state.items()[0].is_dict()) s = state.items()[0];
    if (!s.is_dict()) vm_fail("BUILD state for an OrderedDict: " + expected_found("dict", s.type_name()));
    // Only the dict's state changes, not its items: dict_mut() would drop the key index that filling a big
    // OrderedDict (a state_dict) built, and its reader would build it again.
    auto& d = const_cast<DictData&>(inst.as_dict());
    if (d.state && d.state->is_dict()) {
      count_items(s.as_dict().items.size());
      for (const auto& [k, v] : s.as_dict().items) d.state->set_item(k, v);
    } else {
      d.state = std::make_shared<Value>(s);
    }
    return;
  }
  if (inst.is(K::Object)) {
    auto& o = inst.object_mut();
    // BUILD calls the instance's __setstate__ when its class has one.
    if (o.callable)
      record_use(describe_callable(inst), true, PickleUseKind::Build);
    else
      record_build_use(o);
    // Old tensors: NEWOBJ(torch.Tensor) + BUILD((storage, offset, size, stride)).
    if (o.name == "Tensor" && (py3_module(o.module) == "torch" || o.module == "torch._tensor") &&
        state.is(K::Tuple) && state.items().size() == 4 && state.items()[0].is(K::Storage)) {
      inst = rebuild_tensor("_rebuild_tensor", state);
      return;
    }
    if (o.state && o.state->is_dict() && state.is_dict()) {
      count_items(state.as_dict().items.size());
      for (const auto& [k, v] : state.as_dict().items) o.state->set_item(k, v);
    } else {
      o.state = std::make_shared<Value>(state);
    }
    return;
  }
  if (inst.is(K::Tensor)) {
    if (state.is_none() || (state.is_dict() && state.as_dict().items.empty())) return;
    if (state.is(K::Tuple) && state.items().size() == 2) return;  // (dict, slots) of a plain tensor: dropped
    vm_fail("BUILD on a tensor with state " + state.repr(60));
  }
  vm_fail("BUILD on " + inst.type_name());
}

// Moves stack_[from..] into the target (a list or an inert object) after checking it, then drops them.
void Vm::add_list_items(Value& target, size_t from) {
  using K = Value::Kind;
  if (!target.is(K::List) && !target.is(K::Object))
    vm_fail("APPEND to " + target.type_name() + ", expected a list or an object");
  count_items(stack_.size() - from);
  auto& v = target.is(K::List) ? target.items_mut() : target.object_mut().list_items;
  for (size_t i = from; i < stack_.size(); ++i) v.push_back(std::move(stack_[i]));
  stack_.resize(from);
}

void Vm::add_dict_items(Value& target, size_t from) {
  using K = Value::Kind;
  if (!target.is_dict() && !target.is(K::Object))
    vm_fail("SETITEM on " + target.type_name() + ", expected a dict or an object");
  if ((stack_.size() - from) % 2) vm_fail("SETITEMS with an odd number of values");
  count_items(stack_.size() - from);
  if (target.is_dict()) {
    for (size_t i = from; i < stack_.size(); i += 2)
      target.set_item(std::move(stack_[i]), std::move(stack_[i + 1]));
  } else {
    auto& v = target.object_mut().dict_items;
    for (size_t i = from; i < stack_.size(); i += 2)
      v.emplace_back(std::move(stack_[i]), std::move(stack_[i + 1]));
  }
  stack_.resize(from);
}

void Vm::step(uint8_t op) {
  using K = Value::Kind;
  switch (op) {
    case 0x80: {  // PROTO
      const int p = u8();
      if (p > 5) vm_fail("unsupported pickle protocol " + std::to_string(p), ErrorKind::Unsupported);
      protocol_ = std::max(protocol_, p);
      break;
    }
    case 0x95: {  // FRAME
      const uint64_t n = le(8);
      if (n > data_.size() - pos_)
        vm_fail("FRAME of " + std::to_string(n) + " bytes runs past the end of the stream");
      break;
    }
    case '.': {  // STOP
      result_ = pop();
      stopped_ = true;
      break;
    }
    // --- constants and numbers ---
    case 'N':
      push(Value());
      break;
    case 0x88:
      push(Value::boolean(true));
      break;
    case 0x89:
      push(Value::boolean(false));
      break;
    case 'K':
      push(Value::integer(u8()));
      break;
    case 'M':
      push(Value::integer(static_cast<int64_t>(le(2))));
      break;
    case 'J':
      push(Value::integer(static_cast<int32_t>(static_cast<uint32_t>(le(4)))));
      break;
    case 0x8a:
    case 0x8b: {  // LONG1, LONG4
      uint64_t n;
      if (op == 0x8a) {
        n = u8();
      } else {
        const auto s = static_cast<int32_t>(static_cast<uint32_t>(le(4)));
        if (s < 0) vm_fail("LONG4 with negative length");
        n = static_cast<uint64_t>(s);
      }
      const auto p = payload(n, "LONG");
      if (n == 0) {
        push(Value::integer(0));
      } else {
        push(Value::big_integer(std::vector<uint8_t>(p.begin(), p.end())));
      }
      break;
    }
    case 'I': {  // INT
      const auto s = line();
      if (s == "01")
        push(Value::boolean(true));
      else if (s == "00")
        push(Value::boolean(false));
      else
        push(parse_decimal_int(s));
      break;
    }
    case 'L':
      push(parse_decimal_int(line()));
      break;
    case 'G': {  // BINFLOAT, big-endian
      const uint8_t* p = take(8);
      uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];
      double d;
      std::memcpy(&d, &bits, 8);
      push(Value::real(d));
      break;
    }
    case 'F': {  // FLOAT text
      auto s = line();
      double d = 0;
      std::string_view t = s;
      if (!t.empty() && t[0] == '+') t.remove_prefix(1);
      if (t == "inf" || t == "-inf" || t == "nan" || t == "-nan") {
        d = t == "inf"    ? std::numeric_limits<double>::infinity()
            : t == "-inf" ? -std::numeric_limits<double>::infinity()
                          : std::numeric_limits<double>::quiet_NaN();
      } else {
        auto r = std::from_chars(t.data(), t.data() + t.size(), d);
        if (r.ec != std::errc() || r.ptr != t.data() + t.size()) vm_fail("FLOAT argument is not a number");
      }
      push(Value::real(d));
      break;
    }
    // --- strings ---
    case 'X':
    case 0x8c:
    case 0x8d: {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
      const uint64_t n = op == 'X' ? le(4) : op == 0x8c ? u8() : le(8);
      const auto s = payload(n, opcode_name(op));
      if (!valid_utf8(s)) vm_fail("string is not valid UTF-8");
      push(Value::str(std::string(s)));
      break;
    }
    case 'V': {  // UNICODE (raw-unicode-escape)
      const auto s = line();
      charge(s.size() * 2);
      std::string out;
      for (size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<uint8_t>(s[i]);
        if (c == '\\' && i + 1 < s.size() && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
          const size_t digits = s[i + 1] == 'u' ? 4 : 8;
          if (i + 2 + digits > s.size()) vm_fail("truncated \\u escape in UNICODE");
          uint32_t cp = 0;
          auto r = std::from_chars(s.data() + i + 2, s.data() + i + 2 + digits, cp, 16);
          if (r.ptr != s.data() + i + 2 + digits || cp > 0x10ffff) vm_fail("bad \\u escape in UNICODE");
          append_utf8(out, cp);
          i += 1 + digits;
        } else {
          append_utf8(out, c);
        }
      }
      push(Value::str(std::move(out)));
      break;
    }
    case 'U':
    case 'T': {  // SHORT_BINSTRING, BINSTRING
      uint64_t n;
      if (op == 'U') {
        n = u8();
      } else {
        const auto s = static_cast<int32_t>(static_cast<uint32_t>(le(4)));
        if (s < 0) vm_fail("BINSTRING with negative length");
        n = static_cast<uint64_t>(s);
      }
      push(py2_string(payload(n, opcode_name(op))));
      break;
    }
    case 'S': {
      const auto s = line();
      charge(s.size());
      push(text_string(s));
      break;
    }
    case 'C':
    case 'B':
    case 0x8e:
    case 0x96: {  // SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8
      const uint64_t n = op == 'C' ? u8() : op == 'B' ? le(4) : le(8);
      push(Value::bytes(std::string(payload(n, opcode_name(op)))));
      break;
    }
    // --- containers ---
    case ']':
      push(Value::list());
      break;
    case ')':
      push(Value::tuple());
      break;
    case '}':
      push(Value::dict());
      break;
    case 0x8f:
      push(Value::set());
      break;
    case '(':
      if (marks_.size() >= lim_.max_marks)
        vm_fail("more than " + std::to_string(lim_.max_marks) + " open MARKs (limit)");
      marks_.push_back(stack_.size());
      break;
    case 'l':
    case 't':
    case 0x91: {  // LIST, TUPLE, FROZENSET
      count_items(stack_.size() - mark_pos());
      auto items = pop_mark();
      push(op == 'l'   ? Value::list(std::move(items))
           : op == 't' ? Value::tuple(std::move(items))
                       : Value::set(std::move(items), true));
      break;
    }
    case 0x85:
    case 0x86:
    case 0x87: {  // TUPLE1-3
      const size_t n = static_cast<size_t>(op - 0x84);
      top(n - 1);
      count_items(n);
      std::vector<Value> items(std::make_move_iterator(stack_.end() - static_cast<long>(n)),
                               std::make_move_iterator(stack_.end()));
      stack_.resize(stack_.size() - n);
      push(Value::tuple(std::move(items)));
      break;
    }
    case 'd': {  // DICT
      const size_t m = mark_pos();
      if ((stack_.size() - m) % 2) vm_fail("DICT with an odd number of values");
      count_items(stack_.size() - m);
      auto kv = pop_mark();
      Value d = Value::dict();
      for (size_t i = 0; i < kv.size(); i += 2) d.set_item(std::move(kv[i]), std::move(kv[i + 1]));
      push(std::move(d));
      break;
    }
    case 'a': {  // APPEND
      Value& target = top(1);
      add_list_items(target, stack_.size() - 1);
      break;
    }
    case 'e': {  // APPENDS
      const size_t m = mark_pos();
      if (m == 0 || m <= (marks_.size() >= 2 ? marks_[marks_.size() - 2] : 0))
        vm_fail("APPENDS without a target");
      Value& target = stack_[m - 1];
      add_list_items(target, m);
      marks_.pop_back();
      break;
    }
    case 's': {  // SETITEM
      Value& target = top(2);
      add_dict_items(target, stack_.size() - 2);
      break;
    }
    case 'u': {  // SETITEMS
      const size_t m = mark_pos();
      if (m == 0 || m <= (marks_.size() >= 2 ? marks_[marks_.size() - 2] : 0))
        vm_fail("SETITEMS without a target");
      Value& target = stack_[m - 1];
      add_dict_items(target, m);
      marks_.pop_back();
      break;
    }
    case 0x90: {  // ADDITEMS
      const size_t m = mark_pos();
      if (m == 0 || m <= (marks_.size() >= 2 ? marks_[marks_.size() - 2] : 0))
        vm_fail("ADDITEMS without a target");
      Value& target = stack_[m - 1];
      if (!target.is(K::Set)) vm_fail("ADDITEMS on " + target.type_name() + ", expected a set");
      count_items(stack_.size() - m);
      auto& v = target.items_mut();
      for (size_t i = m; i < stack_.size(); ++i) v.push_back(std::move(stack_[i]));
      stack_.resize(m);
      marks_.pop_back();
      break;
    }
    // --- stack manipulation ---
    case '0':  // POP
      if (stack_.size() > frame()) {
        drop(1);
      } else if (!marks_.empty()) {
        marks_.pop_back();
      } else {
        vm_fail("stack underflow");
      }
      break;
    case '1': {  // POP_MARK
      const size_t m = mark_pos();
      drop(stack_.size() - m);
      marks_.pop_back();
      break;
    }
    case '2':
      push(top());
      break;  // DUP
    // --- memo ---
    case 'q':
      memo_put(u8());
      break;
    case 'r':
      memo_put(le(4));
      break;
    case 'p': {
      const auto s = line();
      uint64_t idx = 0;
      auto r = std::from_chars(s.data(), s.data() + s.size(), idx);
      if (r.ec != std::errc() || r.ptr != s.data() + s.size()) vm_fail("PUT argument is not an index");
      memo_put(idx);
      break;
    }
    case 0x94:
      memo_put(memo_.size());
      break;
    case 'h':
      memo_get(u8());
      break;
    case 'j':
      memo_get(le(4));
      break;
    case 'g': {
      const auto s = line();
      uint64_t idx = 0;
      auto r = std::from_chars(s.data(), s.data() + s.size(), idx);
      if (r.ec != std::errc() || r.ptr != s.data() + s.size()) vm_fail("GET argument is not an index");
      memo_get(idx);
      break;
    }
    // --- globals and calls ---
    case 'c': {
      const std::string_view module = line();
      const std::string_view name = line();
      push(make_global(module, name));
      break;
    }
    case 0x93: {  // STACK_GLOBAL
      const Value& name = top();
      const Value& module = top(1);
      if (!name.is(K::Str) || !module.is(K::Str)) vm_fail("STACK_GLOBAL needs two strings");
      Value g = make_global(module.as_str(), name.as_str());
      drop(2);
      push(std::move(g));
      break;
    }
    case 'R': {  // REDUCE
      Value r = call(top(1), top(), ObjectData::How::Reduce, nullptr, PickleUseKind::Reduce);
      drop(2);
      push(std::move(r));
      break;
    }
    case 0x81: {  // NEWOBJ
      if (!top(1).is(K::Global)) {
        record_use(describe_callable(top(1)), true, PickleUseKind::NewObj);
        vm_fail("NEWOBJ on " + top(1).type_name() + ", expected a class");
      }
      Value r = call(top(1), top(), ObjectData::How::NewObj, nullptr, PickleUseKind::NewObj);
      drop(2);
      push(std::move(r));
      break;
    }
    case 0x92: {  // NEWOBJ_EX
      if (!top(2).is(K::Global)) vm_fail("NEWOBJ_EX on " + top(2).type_name() + ", expected a class");
      if (!top().is_dict())
        vm_fail("NEWOBJ_EX keyword arguments: " + expected_found("dict", top().type_name()));
      Value r = call(top(2), top(1), ObjectData::How::NewObjEx, &top(), PickleUseKind::NewObjEx);
      drop(3);
      push(std::move(r));
      break;
    }
    case 'i': {  // INST
      std::string module(line());
      std::string name(line());
      Value cls = make_global(module, name);
      const size_t m = mark_pos();
      count_items(stack_.size() - m);
      Value args = Value::tuple(std::vector<Value>(stack_.begin() + static_cast<long>(m), stack_.end()));
      Value r = call(cls, args, ObjectData::How::Reduce, nullptr, PickleUseKind::Inst);
      drop(stack_.size() - m);
      marks_.pop_back();
      bury(std::move(args));
      push(std::move(r));
      break;
    }
    case 'o': {  // OBJ
      const size_t m = mark_pos();
      if (stack_.size() == m) vm_fail("OBJ without a class");
      count_items(stack_.size() - m - 1);
      Value args = Value::tuple(std::vector<Value>(stack_.begin() + static_cast<long>(m) + 1, stack_.end()));
      Value r = call(stack_[m], args, ObjectData::How::Reduce, nullptr, PickleUseKind::Obj);
      drop(stack_.size() - m);
      marks_.pop_back();
      bury(std::move(args));
      push(std::move(r));
      break;
    }
    case 'b': {  // BUILD
      const Value& state = top();
      Value& inst = top(1);
      build(inst, state);
      drop(1);
      break;
    }
    case 'Q':
    case 'P': {  // BINPERSID, PERSID
      if (!opt_.persistent_load) vm_fail("persistent ids are not allowed in this stream");
      Value pid;
      if (op == 'P') {
        const auto s = line();
        charge(s.size());
        pid = Value::str(std::string(s));
      } else {
        // The callback gets its own copy (VM containers are dismantled at the end). Copying recurses, so the
        // pid is held to the result's depth limit first, and a cyclic one is refused like a cyclic result.
        pid_heights_.clear();
        validate(top(), pid_heights_, "the persistent id");
        pid = top().clone();
      }
      record_globals_in(pid, PickleUseKind::PersistentId);
      Value r;
      try {
        r = opt_.persistent_load(pid);
      } catch (const Error& e) {
        const std::string text = pid.repr(120);
        pid.dismantle();
        vm_fail("persistent id " + text + ": " + e.detail(), e.kind());
      }
      // The copy may be cyclic (a hostile pid list holding itself): break it so it is freed, not leaked.
      // Callbacks read the pid and return a leaf value (a storage); they must not keep containers of it.
      pid.dismantle();
      if (op == 'Q') drop(1);
      push(std::move(r));
      break;
    }
    case 0x82:
    case 0x83:
    case 0x84:
      vm_fail("extension registry codes (EXT1/EXT2/EXT4) are not supported", ErrorKind::Unsupported);
    case 0x97:
    case 0x98:
      vm_fail("out-of-band buffers (NEXT_BUFFER/READONLY_BUFFER) are not supported", ErrorKind::Unsupported);
    default:
      vm_fail("unknown opcode " + hex_byte(op));
  }
}

// Rejects cycles and trees nested deeper than max_depth; maps every container of the result to its height.
// `what` names the tree in the message ("the result", "the persistent id"). One map (a container on the
// current path has height kOnPath) and one shared child list keep it to one hash entry per container and no
// allocation per container: the result of a 20k-param checkpoint has ~10^5 of them.
void Vm::validate(const Value& root, Heights& height_of, const char* what) {
  constexpr size_t kOnPath = std::numeric_limits<size_t>::max();
  struct Frame {
    const Value* v;
    size_t first;  // this frame's children are children[first, end)
    size_t next;   // the next one to visit
    size_t end;    // one past this frame's last child
    size_t height;
  };
  std::vector<const Value*> children;  // the children of every frame on the path, in path order
  std::vector<Frame> path;
  auto enter = [&](const Value* v, const void* id) {
    if (path.size() >= lim_.max_depth)
      vm_fail(std::string(what) + " is nested deeper than " + std::to_string(lim_.max_depth) +
              " levels (limit)");
    height_of.get_or_add(id, kOnPath);
    const size_t first = children.size();
    v->for_each_child([&](const Value& c) {
      if (c.identity()) children.push_back(&c);
    });
    path.push_back(Frame{v, first, first, children.size(), 0});
  };
  if (const void* id = root.identity()) enter(&root, id);
  while (!path.empty()) {
    Frame& f = path.back();
    if (f.next < f.end) {
      const Value* c = children[f.next++];
      const void* cid = c->identity();
      const size_t* known = height_of.find(cid);
      if (!known) {
        enter(c, cid);
      } else if (*known == kOnPath) {
        vm_fail(std::string(what) + " contains a cycle (a container that holds itself)");
      } else {
        f.height = std::max(f.height, *known + 1);
        if (path.size() + *known > lim_.max_depth)
          vm_fail(std::string(what) + " is nested deeper than " + std::to_string(lim_.max_depth) +
                  " levels (limit)");
      }
      continue;
    }
    const size_t h = f.height;
    height_of.get_or_add(f.v->identity(), h) = h;
    children.resize(f.first);
    path.pop_back();
    if (!path.empty()) path.back().height = std::max(path.back().height, h + 1);
  }
}

UnpickleResult Vm::run() {
  size_t op_start = 0;
  uint8_t op = 0;
  bool at_end = false;
  auto where = [&] {
    std::string w;
    if (!opt_.record_name.empty()) w = "record '" + opt_.record_name + "', ";
    w += "offset " + std::to_string(op_start);
    if (const char* n = opcode_name(op))
      w += std::string(" (opcode ") + n + ")";
    else
      w += " (opcode " + hex_byte(op) + ")";
    return w;
  };
  // Breaks what the VM built and the result does not hold (`keep`: the result's containers; null: all).
  auto cleanup = [&](const Heights* keep) {
    flush_repeats();
    std::vector<Value> roots = std::move(stack_);
    stack_.clear();
    roots.reserve(roots.size() + memo_.size() + graveyard_.size() + 1);
    auto add = [&](Value& v) {
      // Scalars and the result's own containers need no breaking; dropping them here keeps the walk short.
      const void* id = v.identity();
      if (id && !(keep && keep->contains(id))) roots.push_back(std::move(v));
    };
    memo_.drain(add);
    for (auto& v : graveyard_) add(v);
    graveyard_.clear();
    if (!keep) roots.push_back(std::move(result_));
    if (keep)
      Value::dismantle_all(std::move(roots), [keep](const void* id) { return keep->contains(id); });
    else
      Value::dismantle_all(std::move(roots));
  };
  try {
    while (!stopped_) {
      op_start = pos_;
      op_start_ = op_start;
      if (pos_ >= data_.size()) {
        at_end = true;
        vm_fail("the stream ends without STOP (truncated)", ErrorKind::Truncated);
      }
      op = data_[pos_++];
      step(op);
    }
    op_start = pos_;
    op = '.';
    Heights reachable;
    reachable.reserve(memo_.size());
    validate(result_, reachable);
    cleanup(&reachable);
  } catch (const VmError& e) {
    cleanup(nullptr);
    if (at_end) {
      std::string w;
      if (!opt_.record_name.empty()) w = "record '" + opt_.record_name + "', ";
      throw Error(e.kind, opt_.file_name, w + "offset " + std::to_string(op_start), e.what);
    }
    throw Error(e.kind, opt_.file_name, where(), e.what);
  } catch (const Error& e) {
    cleanup(nullptr);
    throw Error(e.kind(), opt_.file_name, where(), e.detail());
  } catch (...) {
    cleanup(nullptr);
    throw;
  }
  UnpickleResult r;
  r.value = std::move(result_);
  r.end_offset = pos_;
  r.protocol = protocol_;
  r.globals = std::move(globals_);
  return r;
}

}  // namespace

void PickleUseLog::add(PickleUse u) {
  // The module is part of the key: torch / os.system and torch.os / system read alike but reach different
  // things.
  std::string key;
  key.reserve(u.record.size() + u.module.size() + u.callable.size() + u.via.size() + u.nested_in.size() +
              u.attribute_of.size() + u.attribute.size() + 8);
  for (const std::string* part : {&u.record, &u.module, &u.callable, &u.via, &u.nested_in, &u.attribute_of}) {
    key += *part;
    key += '\0';
  }
  key += u.attribute;
  key += '\0';
  key += static_cast<char>(u.how);
  auto it = index_.find(key);
  if (it != index_.end()) {
    uses_[it->second].count += u.count;
    return;
  }
  if (uses_.size() >= kMaxDistinct) {
    truncated_ = true;
    return;
  }
  index_.emplace(key, uses_.size());
  uses_.push_back(std::move(u));
}

UnpickleResult unpickle(std::span<const uint8_t> bytes, const UnpickleOptions& options) {
  Vm vm(bytes, options);
  return vm.run();
}

}  // namespace ckptdoc
