// The Adam state of a legacy Megatron save reset in a copy (legacy_reset.h).
#include "legacy_reset.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/request_field.h"
#include "legacy_copy.h"
#include "legacy_folder.h"
#include "sources/dcp/rewrite_records.h"
#include "sources/megatron/pickle_steps.h"

namespace ckptdoc::megatron_legacy {
namespace fs = std::filesystem;
namespace {

// One file of the copy: the records zeroed, data.pkl when its step floats change, and the tree it must read
// as afterwards.
struct FilePlan {
  std::string file;  // relative to the iteration folder: "mp_rank_00/model_optim_rng.pt"
  std::shared_ptr<const TorchFile> tf;
  std::vector<dcp::StorageRecord> zeroed;
  std::optional<dcp::StorageRecord> pkl_record;
  std::vector<uint8_t> pkl;
  Value expected;
};

Error refuse(const std::string& path, const std::string& why) {
  return Error(ErrorKind::Unsupported, path, request_text("{reset_optimizer}"), why + ": nothing was reset");
}

FilePlan open_plan(const LegacyFolder& folder, const RankFolder& rf, const std::string& name) {
  FilePlan p;
  p.file = rf.name + "/" + name;
  const std::string path = folder.dir + "/" + p.file;
  p.tf = std::make_shared<const TorchFile>(TorchFile::open(path));  // its errors name the file
  if (p.tf->format != TorchFormat::Zip)
    throw refuse(path, "is a legacy (non-zip) torch.save file: its records are not rewritten in place");
  if (!p.tf->root.is_dict()) throw refuse(path, "its root is a " + p.tf->root.type_name() + ", not a dict");
  p.expected = p.tf->root.clone();
  return p;
}

Value zeros_like(const Tensor& t) {
  Tensor z = Tensor::from_bytes(t.dtype, t.shape, std::vector<uint8_t>(t.nbytes(), 0));
  z.requires_grad = t.requires_grad;
  z.is_parameter = t.is_parameter;
  return Value::tensor(std::move(z));
}

// Plans zeroing `t` (field `what` of the file), a float32 tensor that must be a whole storage no other tensor
// of the file uses (`users`: each storage's tensors).
void zero_tensor(const LegacyFolder& folder, FilePlan& p, const Tensor& t, const std::string& what,
                 const std::map<const Storage*, int>& users, LegacyReset& r) {
  const std::string path = folder.dir + "/" + p.file;
  if (t.dtype != DType::F32 || !t.storage || !t.is_contiguous() || t.storage_offset != 0 ||
      t.storage->numel != static_cast<uint64_t>(t.numel()) || users.at(t.storage.get()) != 1)
    throw refuse(path, what + " is not a whole float32 storage of its own, so it is not rewritten in place");
  p.zeroed.push_back(dcp::file_record(folder.dir, p.file, p.tf->archive_name + "/data/" + t.storage->key));
  if (p.zeroed.back().entry.size != t.nbytes())
    throw Error(ErrorKind::Inconsistent, path, what,
                "its record is not the tensor's size: nothing was reset");
  ++r.records;
}

void count_users(const Value& v, std::map<const Storage*, int>& users) {
  if (v.is_tensor()) {
    ++users[v.as_tensor().storage.get()];
  } else if (v.is_dict()) {
    for (const auto& [k, x] : v.as_dict().items) count_users(x, users);
  } else if (v.is_sequence()) {
    for (const auto& x : v.items()) count_users(x, users);
  }
}

// Every tensor of a rank file the reset could touch or must keep: the model's, the optimizer's (the
// rng_state's ByteTensors lie elsewhere in the tree and are never rewritten).
std::map<const Storage*, int> storage_users(const Value& root) {
  std::map<const Storage*, int> users;
  for (const char* key : {"model", "optimizer"})
    if (const Value* v = root.get(key)) count_users(*v, users);
  return users;
}

// model_optim_rng.pt of the non-distributed optimizer: optimizer.optimizer.state[i] = torch Adam's
// {step, exp_avg, exp_avg_sq}, each record zeroed.
FilePlan plan_local(const LegacyFolder& folder, const RankFolder& rf, LegacyReset& r) {
  FilePlan p = open_plan(folder, rf, "model_optim_rng.pt");
  const std::string path = folder.dir + "/" + p.file;
  const Value* opt = p.tf->root.get("optimizer");
  const Value* inner = opt && opt->is_dict() ? opt->get("optimizer") : nullptr;
  if (!inner || !inner->is_dict())
    throw refuse(path, opt ? "its optimizer holds no optimizer.optimizer dict (torch's state_dict)"
                           : "holds no optimizer (saved with --no-save-optim)");
  if (const Value* groups = inner->get("param_groups"); groups && groups->is_sequence())
    for (const auto& g : groups->items())
      if (g.get("step"))
        throw refuse(path,
                     "its param groups carry a step (Apex / Transformer Engine FusedAdam's layout), not "
                     "torch Adam's per-param step tensors");
  const Value* state = inner->get("state");
  if (!state || !state->is_dict() || state->as_dict().items.empty())
    throw refuse(path, "holds no Adam state (saved before a first step): already a fresh optimizer's");
  const auto users = storage_users(p.tf->root);
  Value* expected_state = p.expected.get_mut("optimizer")->get_mut("optimizer")->get_mut("state");
  const auto& items = state->as_dict().items;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& [key, fields] = items[i];
    const std::string where = "optimizer.optimizer.state[" + key.repr(20) + "]";
    if (!fields.is_dict())
      throw refuse(path, where + " is a " + fields.type_name() + ", not torch Adam's state dict");
    std::set<std::string> seen;
    for (const auto& [f, v] : fields.as_dict().items) {
      const std::string field = f.is(Value::Kind::Str) ? f.as_str() : f.repr(20);
      std::string at = where;
      at.append(".").append(field);
      if ((field != "step" && field != "exp_avg" && field != "exp_avg_sq") || !v.is_tensor())
        throw refuse(path, at + " is not torch Adam's (step, exp_avg, exp_avg_sq): zero is not known to be "
                                "that optimizer's fresh state");
      const Tensor& t = v.as_tensor();
      if (field == "step") {
        if (t.numel() != 1) throw refuse(path, where + ".step is not a one-element tensor");
        r.step_before = std::max(r.step_before, static_cast<double>(t.to_float().at(0)));
        ++r.steps;
      } else {
        ++r.moments;
        r.elements += static_cast<uint64_t>(t.numel());
      }
      zero_tensor(folder, p, t, at, users, r);
      expected_state->dict_mut().items[i].second.set(field, zeros_like(t));
      seen.insert(field);
    }
    if (seen.size() != 3) throw refuse(path, where + " lacks one of torch Adam's step, exp_avg, exp_avg_sq");
    ++r.states;
  }
  if (const Value* mains = opt->get("fp32_from_fp16_params"); mains && mains->is_sequence())
    for (const auto& g : mains->items())
      if (g.is_sequence()) r.mains_kept += g.items().size();
  return p;
}

// model_optim_rng.pt of the distributed optimizer: optimizer.optimizer.param_groups[*].step, one float each,
// given 0.0's bytes in data.pkl (megatron/pickle_steps.h finds them after their key).
FilePlan plan_distributed_steps(const LegacyFolder& folder, const RankFolder& rf, LegacyReset& r) {
  FilePlan p = open_plan(folder, rf, "model_optim_rng.pt");
  const std::string path = folder.dir + "/" + p.file;
  const Value* opt = p.tf->root.get("optimizer");
  const Value* inner = opt && opt->is_dict() ? opt->get("optimizer") : nullptr;
  const Value* groups = inner && inner->is_dict() ? inner->get("param_groups") : nullptr;
  if (!groups || !groups->is_sequence() || groups->items().empty())
    throw refuse(path,
                 "holds no optimizer.optimizer.param_groups, where the distributed optimizer keeps its step");
  std::optional<double> step;
  for (const auto& g : groups->items()) {
    const Value* s = g.get("step");
    if (!s || !s->is(Value::Kind::Float))
      throw refuse(path,
                   "a param group has no float step (DistributedOptimizer.state_dict without Apex/TE "
                   "writes one in each)");
    if (step && *step != s->as_float()) throw refuse(path, "its param groups' steps differ");
    step = s->as_float();
  }
  r.step_before = std::max(r.step_before, *step);
  r.steps += groups->items().size();
  for (auto& g : p.expected.get_mut("optimizer")->get_mut("optimizer")->get_mut("param_groups")->items_mut())
    g.set("step", Value::real(0.0));
  if (*step == 0) return p;  // already a fresh optimizer's
  p.pkl_record = dcp::file_record(folder.dir, p.file, p.tf->archive_name + "/data.pkl");
  const auto bytes = p.tf->file->bytes();
  const auto& e = p.pkl_record->entry;
  p.pkl.assign(bytes.begin() + static_cast<std::ptrdiff_t>(e.data_offset),
               bytes.begin() + static_cast<std::ptrdiff_t>(e.data_offset + e.size));
  const auto at = megatron::step_floats(p.pkl, megatron::binfloat(*step));
  if (at.size() != groups->items().size())
    throw refuse(path, "the step " + std::to_string(*step) + " is found after its key " +
                           std::to_string(at.size()) + " times in data.pkl, not once per param group (" +
                           std::to_string(groups->items().size()) + ")");
  const auto zero = megatron::binfloat(0.0);
  for (size_t q : at) std::copy(zero.begin(), zero.end(), p.pkl.begin() + static_cast<std::ptrdiff_t>(q));
  ++r.records;
  return p;
}

// distrib_optim.pt (buckets coalesced): each buffer's exp_avg / exp_avg_sq zeroed, its "param" kept.
FilePlan plan_distrib_optim(const LegacyFolder& folder, const RankFolder& rf, LegacyReset& r) {
  FilePlan p = open_plan(folder, rf, "distrib_optim.pt");
  const std::string path = folder.dir + "/" + p.file;
  const Value* coalesced = p.tf->root.get("buckets_coalesced");
  if (!coalesced || !coalesced->is(Value::Kind::Bool) || !coalesced->as_bool())
    throw refuse(path, "its buckets are not coalesced (an older layout ckptdoc does not rewrite)");
  std::map<const Storage*, int> users;
  count_users(p.tf->root, users);
  auto& expected = p.expected.dict_mut().items;
  const auto& buffers = p.tf->root.as_dict().items;
  for (size_t b = 0; b < buffers.size(); ++b) {
    const auto& [k, dtypes] = buffers[b];
    if (k.is(Value::Kind::Str) && k.as_str() == "buckets_coalesced") continue;
    if (!k.is(Value::Kind::Int) || !dtypes.is_dict())
      throw refuse(path, "holds " + k.repr(40) + ", not a grad buffer's index");
    for (size_t d = 0; d < dtypes.as_dict().items.size(); ++d) {
      const auto& state = dtypes.as_dict().items[d].second;
      const std::string where = std::to_string(k.as_int()) + "." + dtypes.as_dict().items[d].first.repr(60);
      if (!state.is_dict()) throw refuse(path, where + " is not a dict of the buffer's state");
      size_t moments = 0;
      for (const auto& [f, v] : state.as_dict().items) {
        const std::string field = f.is(Value::Kind::Str) ? f.as_str() : f.repr(20);
        if (field == "numel_unpadded") continue;
        if (field == "param") {
          ++r.mains_kept;
          continue;
        }
        std::string at = where;
        at.append(".").append(field);
        if ((field != "exp_avg" && field != "exp_avg_sq") || !v.is_tensor())
          throw refuse(path, at +
                                 " is not torch Adam's state (param, exp_avg, exp_avg_sq): zero is not known "
                                 "to be that optimizer's fresh state");
        zero_tensor(folder, p, v.as_tensor(), at, users, r);
        expected[b].second.dict_mut().items[d].second.set(field, zeros_like(v.as_tensor()));
        ++r.moments;
        ++moments;
        r.elements += static_cast<uint64_t>(v.as_tensor().numel());
      }
      if (moments != 2) throw refuse(path, where + " lacks exp_avg or exp_avg_sq");
    }
  }
  return p;
}

}  // namespace

LegacyReset reset_optimizer(const std::string& path, const std::string& output, Progress* progress) {
  const LegacyFolder folder = resolve(path);
  LegacyReset r;
  r.output = checked_output(folder, path, output);
  // Everything planned, and checked, before anything is written.
  std::vector<FilePlan> plans;
  for (const auto& rf : folder.ranks) {
    if (rf.distrib_optim) {
      plans.push_back(plan_distributed_steps(folder, rf, r));
      plans.push_back(plan_distrib_optim(folder, rf, r));
      r.distrib_optim = true;
    } else {
      plans.push_back(plan_local(folder, rf, r));
    }
    ++r.rank_files;
  }
  if (r.distrib_optim && plans.size() != 2 * folder.ranks.size())
    throw refuse(folder.dir, "some rank folders hold distrib_optim.pt and others not");
  write_legacy_copy(folder, r.output, progress, {}, [&](const std::string& iter) {
    Progress none;
    Progress& prog = progress ? *progress : none;
    prog.set_stage("rewriting " + std::to_string(r.records) + " storage records", r.records);
    for (const auto& p : plans) {
      for (const auto& record : p.zeroed) {
        prog.check();
        dcp::write_record(record, std::vector<uint8_t>(record.entry.size, 0), iter);
        prog.add(1);
      }
      if (p.pkl_record) {
        dcp::write_record(*p.pkl_record, p.pkl, iter);
        prog.add(1);
      }
    }
    // The copy is checked before it is published: each file reads as the input's tree with the moments zero
    // and the step 0, nothing else changed (the mains, weights and args included).
    prog.set_stage("checking the copy", plans.size());
    for (const auto& p : plans) {
      prog.check();
      if (!p.expected.equals(TorchFile::open(iter + "/" + p.file).root))
        throw Error(ErrorKind::Inconsistent, iter + "/" + p.file, request_text("{reset_optimizer}"),
                    "does not read as the input's with the moments zero and the step 0 after the rewrite: "
                    "nothing was published");
      prog.add(1);
    }
  });
  return r;
}

}  // namespace ckptdoc::megatron_legacy
