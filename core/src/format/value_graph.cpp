// Value as a graph: identity, children, dismantling without recursion, structural equality and deep copy.
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "ckptdoc/format/value.h"

namespace ckptdoc {

// ---------------------------------------------------------------------------------------------------------
// Identity, children, dismantling

const void* Value::identity() const {
  switch (kind_) {
    case Kind::List:
    case Kind::Tuple:
    case Kind::Set:
    case Kind::FrozenSet:
      return items_().get();
    case Kind::Dict:
      return dict_().get();
    case Kind::Object:
      return object_().get();
    case Kind::Tensor:
      return tensor_().get();
    case Kind::Storage:
      return storage_().get();
    default:
      return nullptr;
  }
}

void Value::for_each_child(const std::function<void(const Value&)>& f) const {
  switch (kind_) {
    case Kind::List:
    case Kind::Tuple:
    case Kind::Set:
    case Kind::FrozenSet:
      for (const auto& v : *items_()) f(v);
      break;
    case Kind::Dict:
      for (const auto& [k, v] : dict_()->items) {
        f(k);
        f(v);
      }
      if (dict_()->state) f(*dict_()->state);
      break;
    case Kind::Object:
      if (object_()->callable) f(*object_()->callable);
      if (object_()->args) f(*object_()->args);
      if (object_()->kwargs) f(*object_()->kwargs);
      if (object_()->state) f(*object_()->state);
      for (const auto& v : object_()->list_items) f(v);
      for (const auto& [k, v] : object_()->dict_items) {
        f(k);
        f(v);
      }
      break;
    default:
      break;
  }
}

void Value::dismantle_all(std::vector<Value> work, const std::unordered_set<const void*>* keep) {
  if (!keep) {
    dismantle_all(std::move(work), std::function<bool(const void*)>());
    return;
  }
  dismantle_all(std::move(work), [keep](const void* id) { return keep->count(id) != 0; });
}

void Value::dismantle_all(std::vector<Value> work, const std::function<bool(const void*)>& keep) {
  while (!work.empty()) {
    Value v = std::move(work.back());
    work.pop_back();
    const void* id = v.identity();
    if (!id) continue;  // a scalar: nothing to break
    if (keep && keep(id)) continue;
    switch (v.kind_) {
      case Kind::List:
      case Kind::Tuple:
      case Kind::Set:
      case Kind::FrozenSet:
        for (auto& c : *v.items_()) work.push_back(std::move(c));
        v.items_()->clear();
        break;
      case Kind::Dict:
        for (auto& [k, c] : v.dict_()->items) {
          work.push_back(std::move(k));
          work.push_back(std::move(c));
        }
        v.dict_()->items.clear();
        v.dict_()->index_cache.reset();
        if (v.dict_()->state) {
          work.push_back(std::move(*v.dict_()->state));
          v.dict_()->state.reset();
        }
        break;
      case Kind::Object: {
        auto& o = *v.object_();
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
      default:
        break;
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
      case Kind::None:
        break;
      case Kind::Bool:
        if (a->b_ != b->b_) return false;
        break;
      case Kind::Int:
        if (a->i_ != b->i_) return false;
        break;
      case Kind::BigInt:
        if (*a->big_() != *b->big_()) return false;
        break;
      case Kind::Float:
        if (!(a->f_ == b->f_ || (std::isnan(a->f_) && std::isnan(b->f_)))) return false;
        break;
      case Kind::Str:
      case Kind::Bytes:
      case Kind::DType:
      case Kind::Device:
        if (*a->s_() != *b->s_()) return false;
        break;
      case Kind::List:
      case Kind::Tuple:
      case Kind::Set:
      case Kind::FrozenSet:
        if (a->items_()->size() != b->items_()->size()) return false;
        for (size_t i = 0; i < a->items_()->size(); ++i)
          work.emplace_back(&(*a->items_())[i], &(*b->items_())[i]);
        break;
      case Kind::Dict: {
        const auto& da = *a->dict_();
        const auto& db = *b->dict_();
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
        const auto& ta = *a->tensor_();
        const auto& tb = *b->tensor_();
        if (ta.dtype != tb.dtype || ta.shape != tb.shape || ta.requires_grad != tb.requires_grad ||
            ta.is_parameter != tb.is_parameter)
          return false;
        if (ta.storage == tb.storage && ta.strides == tb.strides && ta.storage_offset == tb.storage_offset)
          break;
        if (ta.to_bytes() != tb.to_bytes()) return false;
        break;
      }
      case Kind::Storage: {
        const auto& sa = *a->storage_();
        const auto& sb = *b->storage_();
        if (sa.dtype != sb.dtype || sa.numel != sb.numel) return false;
        if (sa.has_bytes() && sb.has_bytes() &&
            !std::equal(sa.bytes().begin(), sa.bytes().end(), sb.bytes().begin()))
          return false;
        break;
      }
      case Kind::Size:
        if (*a->size_() != *b->size_()) return false;
        break;
      case Kind::Global:
        if (*a->global_() != *b->global_()) return false;
        break;
      case Kind::Object: {
        const auto& oa = *a->object_();
        const auto& ob = *b->object_();
        if (oa.module != ob.module || oa.name != ob.name || oa.how != ob.how ||
            oa.list_items.size() != ob.list_items.size() || oa.dict_items.size() != ob.dict_items.size())
          return false;
        for (auto p : {std::make_pair(&oa.callable, &ob.callable), std::make_pair(&oa.args, &ob.args),
                       std::make_pair(&oa.kwargs, &ob.kwargs), std::make_pair(&oa.state, &ob.state)}) {
          if (static_cast<bool>(*p.first) != static_cast<bool>(*p.second)) return false;
          if (*p.first) work.emplace_back(p.first->get(), p.second->get());
        }
        for (size_t i = 0; i < oa.list_items.size(); ++i)
          work.emplace_back(&oa.list_items[i], &ob.list_items[i]);
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
      Value c = v.is(K::List)    ? Value::list()
                : v.is(K::Tuple) ? Value::tuple()
                                 : Value::set({}, v.is(K::FrozenSet));
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
      for (const auto& [k, x] : v.as_dict().items)
        d.items.emplace_back(clone_rec(k, done), clone_rec(x, done));
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
      for (const auto& [k, x] : o.dict_items)
        no.dict_items.emplace_back(clone_rec(k, done), clone_rec(x, done));
      return c;
    }
    default:
      return v;
  }
}
}  // namespace

Value Value::clone() const {
  std::map<const void*, Value> done;
  Value c = clone_rec(*this, done);
  return c;
}

}  // namespace ckptdoc
