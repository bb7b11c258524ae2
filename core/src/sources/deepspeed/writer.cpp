// DeepSpeed checkpoint writing: the pickled objects, partition arithmetic and file naming of
// deepspeed-format.md §1.3, §2.1 and §5, as DeepSpeed 0.12.6 writes them (checked against the real fixtures).
#include "ckptdoc/sources/deepspeed/writer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/number_text.h"

namespace ckptdoc::deepspeed {
namespace {

constexpr int64_t kChunk = int64_t{1} << 20;  // elements produced per step when streaming

Value number(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
    return Value::integer(static_cast<int64_t>(d));
  return Value::real(d);
}

const char* stage_member(int stage) {
  switch (stage) {
    case 0:
      return "disabled";
    case 1:
      return "optimizer_states";
    case 2:
      return "gradients";
    case 3:
      return "weights";
    default:
      return "max_stage";
  }
}

Value new_object(const char* module, const char* name, Value state) {
  ObjectData o;
  o.module = module;
  o.name = name;
  o.how = ObjectData::How::NewObj;
  o.args = std::make_shared<Value>(Value::tuple());
  o.state = std::make_shared<Value>(std::move(state));
  return Value::object(std::move(o));
}

}  // namespace

Value ordered_dict() {
  return Value::dict(true);
}

Value string_set(const std::vector<std::string>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (const auto& s : items) v.push_back(Value::str(s));
  return Value::set(std::move(v));
}

Value loss_scaler_object(const LossScalerState& s) {
  Value st = Value::dict();
  st.set("cur_scale", s.dynamic ? number(s.cur_scale) : Value::real(s.cur_scale));
  st.set("dynamic", Value::boolean(s.dynamic));
  if (!s.dynamic) return new_object("deepspeed.runtime.fp16.loss_scaler", "LossScaler", std::move(st));
  st.set("cur_iter", Value::integer(s.cur_iter));
  st.set("last_overflow_iter", Value::integer(s.last_overflow_iter));
  st.set("scale_factor", Value::real(s.scale_factor));
  st.set("scale_window", Value::integer(s.scale_window));
  st.set("min_scale", number(s.min_scale));
  st.set("delayed_shift", Value::integer(s.delayed_shift));
  st.set("cur_hysteresis", Value::integer(s.cur_hysteresis));
  st.set("consecutive_hysteresis", Value::boolean(s.consecutive_hysteresis));
  st.set("raise_error_at_min_scale", Value::boolean(s.raise_error_at_min_scale));
  st.set("dtype", Value::dtype(std::string(dtype_name(s.dtype))));
  return new_object("deepspeed.runtime.fp16.loss_scaler", "DynamicLossScaler", std::move(st));
}

Value zero_stage_object(int stage) {
  ObjectData o;
  o.module = "__builtin__";
  o.name = "getattr";
  o.how = ObjectData::How::Reduce;
  o.args = std::make_shared<Value>(Value::tuple(
      {Value::global("deepspeed.runtime.zero.config", "ZeroStageEnum"), Value::str(stage_member(stage))}));
  return Value::object(std::move(o));
}

std::optional<int> zero_stage_of(const Value& v) {
  if (v.is(Value::Kind::Int)) return static_cast<int>(v.as_int());
  if (!v.is(Value::Kind::Object)) return std::nullopt;
  const ObjectData& o = v.as_object();
  if (!o.args || !o.args->is(Value::Kind::Tuple)) return std::nullopt;
  const auto& a = o.args->items();
  if ((o.name == "getattr") && a.size() == 2 && a[1].is(Value::Kind::Str)) {
    const std::string& m = a[1].as_str();
    for (int s = 0; s <= 4; ++s)
      if (m == stage_member(s)) return s;
    return std::nullopt;
  }
  if (o.name == "ZeroStageEnum" && a.size() == 1 && a[0].is(Value::Kind::Int))
    return static_cast<int>(a[0].as_int());
  return std::nullopt;
}

Value fragment_address_object(int64_t numel, int64_t start) {
  Value st = Value::dict();
  st.set("numel", Value::integer(numel));
  st.set("start", Value::integer(start));
  return new_object("deepspeed.utils.tensor_fragment", "fragment_address", std::move(st));
}

std::optional<std::pair<int64_t, int64_t>> fragment_address_of(const Value& v) {
  if (!v.is(Value::Kind::Object) || v.as_object().name != "fragment_address") return std::nullopt;
  const Value* n = v.attr("numel");
  const Value* s = v.attr("start");
  if (!n || !s) return std::nullopt;
  return std::make_pair(n->as_int(), s->as_int());
}

Value step_tensor(float step) {
  std::vector<uint8_t> bytes(4);
  std::memcpy(bytes.data(), &step, 4);
  return Value::tensor(Tensor::from_bytes(DType::F32, {}, std::move(bytes)));
}

std::optional<double> step_of(const Value& v) {
  if (v.is(Value::Kind::Int) || v.is(Value::Kind::Float)) return v.as_float();
  if (v.is_tensor() && v.as_tensor().numel() == 1) {
    const auto f = v.as_tensor().to_float();
    return f.empty() ? std::nullopt : std::optional<double>(f[0]);
  }
  return std::nullopt;
}

Tensor produced_f32(int64_t numel, FloatFill fill, int64_t storage_numel, bool requires_grad) {
  if (storage_numel < numel) storage_numel = numel;
  auto st = std::make_shared<Storage>();
  st->dtype = DType::F32;
  st->numel = static_cast<uint64_t>(storage_numel);
  st->producer = [fill = std::move(fill), storage_numel](ByteSink& sink) {
    std::vector<float> buf(static_cast<size_t>(std::min(kChunk, std::max<int64_t>(storage_numel, 1))));
    for (int64_t first = 0; first < storage_numel; first += kChunk) {
      const int64_t n = std::min(kChunk, storage_numel - first);
      fill(first, n, buf.data());
      sink.write({reinterpret_cast<const uint8_t*>(buf.data()), static_cast<size_t>(n) * 4});
    }
  };
  Tensor t;
  t.dtype = DType::F32;
  t.shape = {numel};
  t.strides = {1};
  t.storage = std::move(st);
  t.requires_grad = requires_grad;
  return t;
}

std::shared_ptr<Storage> produced_lp_storage(DType dtype, int64_t numel, FloatFill fill) {
  auto st = std::make_shared<Storage>();
  st->dtype = dtype;
  st->numel = static_cast<uint64_t>(numel);
  st->producer = [fill = std::move(fill), numel, dtype](ByteSink& sink) {
    const size_t cap = static_cast<size_t>(std::min(kChunk, std::max<int64_t>(numel, 1)));
    std::vector<float> buf(cap);
    std::vector<uint16_t> half(cap);
    for (int64_t first = 0; first < numel; first += kChunk) {
      const int64_t n = std::min(kChunk, numel - first);
      fill(first, n, buf.data());
      if (dtype == DType::F32) {
        sink.write({reinterpret_cast<const uint8_t*>(buf.data()), static_cast<size_t>(n) * 4});
        continue;
      }
      if (dtype == DType::F16)
        for (int64_t i = 0; i < n; ++i)
          half[static_cast<size_t>(i)] = float_to_half(buf[static_cast<size_t>(i)]);
      else
        for (int64_t i = 0; i < n; ++i)
          half[static_cast<size_t>(i)] = float_to_bf16(buf[static_cast<size_t>(i)]);
      sink.write({reinterpret_cast<const uint8_t*>(half.data()), static_cast<size_t>(n) * 2});
    }
  };
  return st;
}

Tensor view_of(const std::shared_ptr<Storage>& storage, DType dtype, std::vector<int64_t> shape,
               int64_t offset) {
  Tensor t;
  t.dtype = dtype;
  t.strides = Tensor::contiguous_strides(shape);
  t.shape = std::move(shape);
  t.storage_offset = offset;
  t.storage = storage;
  return t;
}

Value slice_mappings_value(const GroupLayout& group, int rank) {
  Value m = ordered_dict();
  for (const auto& sm : expected_slice_mappings(group, rank))
    m.set(sm.name, fragment_address_object(sm.numel, sm.start));
  return m;
}

std::vector<std::vector<int>> zero3_sub_groups(const std::vector<ParamSpan>& params, int dp,
                                               int64_t sub_group_size) {
  std::vector<std::vector<int>> out;
  int64_t total = 0;
  for (const auto& p : params) total += zero3_partition_numel(p.numel, dp);
  if (params.empty()) return out;
  if (sub_group_size >= total) {
    out.emplace_back();
    for (size_t i = 0; i < params.size(); ++i) out.back().push_back(static_cast<int>(i));
    return out;
  }
  std::vector<int> cur;
  int64_t sum = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    cur.push_back(static_cast<int>(i));
    sum += zero3_partition_numel(params[i].numel, dp);
    if (sum >= sub_group_size || i + 1 == params.size()) {
      out.push_back(std::move(cur));
      cur.clear();
      sum = 0;
    }
  }
  return out;
}

std::string model_file_name(int zero_stage, int dp_rank, int mp_rank) {
  const std::string mp = two_digits(mp_rank);
  if (zero_stage == 3)
    return "zero_pp_rank_" + std::to_string(dp_rank) + "_mp_rank_" + mp + "_model_states.pt";
  return "mp_rank_" + mp + "_model_states.pt";
}

std::string optim_file_name(bool bf16_prefix, int dp_rank, int mp_rank) {
  const std::string mp = two_digits(mp_rank);
  return std::string(bf16_prefix ? "bf16_" : "") + "zero_pp_rank_" + std::to_string(dp_rank) + "_mp_rank_" +
         mp + "_optim_states.pt";
}

std::string archive_name_for(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string();
  return stem.empty() ? std::string("archive") : stem;
}

void write_checkpoint_file(const std::string& path, const Value& root, FileIo& io) {
  TorchWriteOptions o;
  o.archive_name = archive_name_for(path);
  write_torch_file(path, root, o, io);
}

void write_text_file(const std::string& path, const std::string& text, FileIo& io) {
  AtomicFile f(path, io);
  f.write({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  f.commit();
}

void copy_file(const std::string& from, const std::string& to, FileIo& io) {
  auto src = MappedFile::open(from);
  AtomicFile f(to, io);
  const auto bytes = src->bytes();
  constexpr size_t kStep = size_t{64} << 20;
  for (size_t off = 0; off < bytes.size(); off += kStep) {
    const size_t n = std::min(kStep, bytes.size() - off);
    f.write(bytes.subspan(off, n));
    src->dont_need(off, n);
  }
  f.commit();
}

}  // namespace ckptdoc::deepspeed
