// Resetting torch Adam state in a copy of a torch.save optimizer file (see reset_optimizer_file.h).
#include "reset_optimizer_file.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/weights/optimizer_file.h"
#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::weights_folder {

namespace {

// torch.optim.Adam / AdamW state fields (torch/optim/adam.py _init_group); zero is their fresh value.
bool adam_field(const std::string& name) {
  return name == "step" || name == "exp_avg" || name == "exp_avg_sq" || name == "max_exp_avg_sq";
}

// Every storage a tensor in `v` views (param groups may hold a tensor lr).
void storages_in(const Value& v, std::set<const Storage*>& out) {
  if (v.is_tensor()) {
    out.insert(v.as_tensor().storage.get());
  } else if (v.is_dict()) {
    for (const auto& [k, x] : v.as_dict().items) storages_in(x, out);
  } else if (v.is_sequence() || v.is(Value::Kind::Set) || v.is(Value::Kind::FrozenSet)) {
    for (const auto& x : v.items()) storages_in(x, out);
  }
}

bool all_zero(const Tensor& t) {
  const auto bytes = t.to_bytes();
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

FileReset reset_adam_file(const std::string& in_dir, const std::string& file, const std::string& copy_dir) {
  const std::string path = in_dir + "/" + file;
  const TorchFile torch = TorchFile::open(path);
  if (torch.format != TorchFormat::Zip)
    throw Error(ErrorKind::Unsupported, path, "",
                "a legacy (non-zip) torch.save file is not rewritten in place");
  const Value* state = torch.root.get("state");
  const Value* groups = torch.root.get("param_groups");
  if (!state || !state->is_dict() || !groups)
    throw Error(ErrorKind::Unsupported, path, "",
                "is not an optimizer state dict ({'state', 'param_groups'})");
  FileReset r;
  r.file = file;
  std::vector<std::shared_ptr<Storage>> zeroed;
  std::set<const Storage*> seen;
  for (const auto& [key, entry] : state->as_dict().items) {
    if (!entry.is_dict()) throw Error(ErrorKind::Corrupt, path, "state", "a param's state is not a dict");
    const std::string param = key.is(Value::Kind::Str) ? key.as_str() : std::to_string(key.as_int());
    for (const auto& [name, value] : entry.as_dict().items) {
      const std::string field = name.is(Value::Kind::Str) ? name.as_str() : "?";
      std::string where = "state[" + param + "].";
      where += field;
      if (!adam_field(field))
        throw Error(ErrorKind::Unsupported, path, where,
                    "is not torch Adam/AdamW state (another optimizer: zero is not its fresh state)");
      if (!value.is_tensor())
        throw Error(ErrorKind::Unsupported, path, where, "is not a tensor: not rewritten in place");
      const Tensor& t = value.as_tensor();
      if (field == "step") r.step_before = std::max(r.step_before, double(t.to_float().at(0)));
      if (seen.insert(t.storage.get()).second) zeroed.push_back(t.storage);
      ++r.tensors;
    }
    ++r.params;
  }
  if (r.params == 0)
    throw Error(ErrorKind::Unsupported, path, "",
                "holds no optimizer state (saved before a first step): it is a fresh optimizer's already");
  std::set<const Storage*> in_groups;
  storages_in(*groups, in_groups);
  for (const Storage* s : in_groups)
    if (seen.count(s))
      throw Error(ErrorKind::Unsupported, path, "param_groups",
                  "shares a storage with the optimizer state: zeroing it would change the param groups");
  for (const auto& s : zeroed) {
    const auto record = dcp::file_record(in_dir, file, torch.archive_name + "/data/" + s->key);
    dcp::write_record(record, std::vector<uint8_t>(record.entry.size, 0), copy_dir);
    ++r.records;
  }
  // Read back as the frameworks will: every moment and step zero, the same params.
  const std::string copy_path = copy_dir + "/" + file;
  const auto copy = weights::read_optimizer_file(copy_path, file);
  if (copy.params.size() != r.params)
    throw Error(ErrorKind::Inconsistent, copy_path, "", "the copy does not hold the input's params");
  for (const auto& p : copy.params) {
    if (p.step && *p.step != 0)
      throw Error(ErrorKind::Inconsistent, copy_path, p.label() + ".step", "did not read back as 0");
    for (const auto& [name, t] : p.tensors)
      if (!all_zero(t))
        throw Error(ErrorKind::Inconsistent, copy_path, p.label() + "." + std::string(name),
                    "did not read back as zeros");
  }
  return r;
}

}  // namespace ckptdoc::weights_folder
