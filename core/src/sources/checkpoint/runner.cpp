// Runner: the shared writing steps of every repair action, and the fills that map per-param readers onto
// flat and ZeRO-3 partitions.
#include "sources/checkpoint/runner.h"

#include <algorithm>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"
#include "sources/deepspeed/trainer_folder.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair::detail {

using deepspeed::FileRole;
using deepspeed::FloatFill;
using deepspeed::GroupLayout;
using deepspeed::OptimizerWrapper;
using deepspeed::ParamEntry;

Value* need(Value* v, const char* key, const std::string& file) {
  Value* c = v ? v->get_mut(key) : nullptr;
  if (!c) throw Error(ErrorKind::Corrupt, file, std::string("key '") + key + "'", "missing");
  return c;
}

void erase_group_steps(Value* param_groups) {
  if (!param_groups || !param_groups->is_sequence()) return;
  for (auto& g : param_groups->items_mut())
    if (g.is_dict()) g.erase("step");
}

void fill_zero12_flat(const GroupLayout& g, int64_t flat_first, int64_t n, float* out,
                      const ParamRead& read) {
  int64_t done = 0;
  size_t k = 0;
  while (k < g.params.size() && g.params[k].offset + g.params[k].numel <= flat_first) ++k;
  while (done < n) {
    const int64_t at = flat_first + done;
    if (k >= g.params.size() || at < g.params[k].offset) {
      const int64_t stop = k < g.params.size() ? std::min(n, g.params[k].offset - flat_first) : n;
      std::fill(out + done, out + stop, 0.0f);
      done = stop;
      continue;
    }
    const auto& p = g.params[k];
    const int64_t in = at - p.offset;
    const int64_t take = std::min(n - done, p.numel - in);
    if (take > 0) read(p.name, in, take, out + done);
    done += std::max<int64_t>(take, 0);
    ++k;
  }
}

void fill_zero3_part(const GroupLayout& g, int rank, int dp, int64_t first, int64_t n, float* out,
                     const ParamRead& read) {
  int64_t done = 0;
  for (const auto& p : g.params) {
    const int64_t part = deepspeed::zero3_partition_numel(p.numel, dp);
    if (p.offset + part <= first + done) continue;
    if (p.offset >= first + n) break;
    const int64_t j = first + done - p.offset;
    const int64_t run = std::min(n - done, part - j);
    const int64_t e = static_cast<int64_t>(rank) * part + j;
    const int64_t real = std::clamp<int64_t>(p.numel - e, 0, run);
    if (real > 0) read(p.name, e, real, out + done);
    std::fill(out + done + real, out + done + run, 0.0f);
    done += run;
    if (done >= n) return;
  }
  std::fill(out + done, out + n, 0.0f);
}

Runner::Runner(const deepspeed::Checkpoint& ckpt, const RepairRequest& rq, Plan& plan, Progress* progress,
               FileIo& io)
    : ckpt_(ckpt), cat_(ckpt.catalog()), rq_(rq), plan_(plan), progress_(progress), io_(io) {
  backend_ = make_backend(rq.device);
}

void Runner::run(const std::string& out_dir) {
  out_ = out_dir;
  tag_out_ = out_ + "/" + plan_.tag;
  check_io(io_.mkdir(out_), out_, "mkdir");
  check_io(io_.mkdir(tag_out_), tag_out_, "mkdir");
  // A job's model-parallel ranks are written one after the other (the last first) under one stage.
  if (progress_ && cat_.mp_rank + 1 >= std::max(cat_.topology.mp_world_size, 1))
    progress_->set_stage("writing repaired checkpoint", plan_.files.size());
  if (rq_.target)
    graft();
  else if (rq_.world_size)
    repartition();
  else
    rewrite_in_layout();
  if (writes_shared_files_ && cat_.mp_rank == 0) {  // a job's other model-parallel ranks are written before
    copy_save_dir_extras();
    deepspeed::write_text_file(out_ + "/latest", plan_.tag, io_);
  }
  check_io(io_.fsync_dir(tag_out_), tag_out_, "fsync of directory");
  check_io(io_.fsync_dir(out_), out_, "fsync of directory");
}

void Runner::tick() {
  if (progress_) {
    progress_->check();
    progress_->add(1);
  }
}
FloatFill Runner::guarded(FloatFill f) const {
  Progress* p = progress_;
  return [f = std::move(f), p](int64_t first, int64_t n, float* out) {
    if (p) p->check();
    f(first, n, out);
  };
}
void Runner::write(const std::string& name, const Value& root) {
  deepspeed::write_checkpoint_file(tag_out_ + "/" + name, root, io_);
  tick();
}
void Runner::copy(const deepspeed::CheckpointFile& f) {
  if (const auto* snap =
          ckpt_.snapshot()) {  // a live-engine snapshot's file: written as the torch file it stands for
    write(f.path, snap->open_file(f.abs_path).root);
    return;
  }
  deepspeed::copy_file(f.abs_path, tag_out_ + "/" + f.path, io_);
  tick();
}
void Runner::copy_save_dir_extras() {
  // The scripts DeepSpeed saves next to the tag folder (zero_to_fp32.py; zero_to_torch.py from 0.19) are
  // copied; other tags are not.
  std::error_code ec;
  for (const char* name : {"zero_to_fp32.py", "zero_to_torch.py"}) {
    const fs::path script = fs::path(cat_.save_dir) / name;
    if (fs::is_regular_file(script, ec)) deepspeed::copy_file(script.string(), out_ + "/" + name, io_);
  }
  // A Trainer checkpoint-N/ folder's own files, so the Trainer resumes from the output. Not after a graft:
  // the weights and config there are the old model's.
  if (!rq_.target)
    for (const auto& name : deepspeed::trainer_folder_files(cat_.save_dir)) {
      deepspeed::copy_file((fs::path(cat_.save_dir) / name).string(), out_ + "/" + name, io_);
      tick();
    }
}
bool Runner::owns(const deepspeed::CheckpointFile& f) const {
  return f.mp_rank >= 0 ? f.mp_rank == cat_.mp_rank : cat_.mp_rank == 0;
}
void Runner::copy_other_files() {
  std::error_code ec;
  for (const auto& f : cat_.files)
    if (f.role != FileRole::Model && f.role != FileRole::Optim && owns(f) &&
        fs::is_regular_file(f.abs_path, ec))
      copy(f);
}

Value Runner::remap_state_entry(
    const Value& tmpl, int64_t old_len, int64_t len,
    const std::function<void(const std::string&, int64_t, int64_t, float*)>& fill) const {
  Value e = tmpl.clone();
  for (auto& [k, v] : e.dict_mut().items) {
    if (!k.is(Value::Kind::Str) || !v.is_tensor()) continue;
    const Tensor& t = v.as_tensor();
    if (t.shape.size() != 1 || t.numel() != old_len) continue;
    const std::string key = k.as_str();
    v = Value::tensor(deepspeed::produced_f32(
        len, guarded([fill, key](int64_t first, int64_t n, float* out) { fill(key, first, n, out); })));
  }
  return e;
}

}  // namespace ckptdoc::repair::detail
