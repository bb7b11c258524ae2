// dcp::export_weights: the model weights of a DCP folder written as safetensors, atomically, never into the
// input.
#include "ckptdoc/sources/dcp/export.h"

#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/format/safetensors.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/format/value.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/weights/shards.h"
#include "format/progress_tensors.h"
#include "io/path_relation.h"
#include "sources/deepspeed/non_finite_watch.h"
#include "sources/deepspeed/output_folder_check.h"

namespace ckptdoc::dcp {
namespace {

// The same rules as the DeepSpeed export's: never into (or over) the checkpoint folder, never over an
// existing file without --force, a folder only when sharding (the shard writer then guards the folder's
// contents).
void check_output(const Checkpoint& ckpt, const std::string& out_path, const ExportOptions& options) {
  if (out_path.empty())
    throw Error(ErrorKind::InvalidRequest, "", request_text("{output}"), "an output file is required");
  const std::string out = io::normalised_path(out_path);
  const std::string input =
      io::normalised_path(options.input_folder.empty() ? ckpt.dir() : options.input_folder);
  if (io::inside_or_equal(out, input))
    throw Error(ErrorKind::InvalidRequest, out, request_text("{output}"),
                "is inside the checkpoint folder " + input +
                    "; choose a path outside it (the input is never modified)");
  if (!options.max_shard_size) deepspeed::detail::check_output_file(out, options.force);
}

}  // namespace

ExportResult export_weights(const Checkpoint& ckpt, const std::string& out_path,
                            const ExportOptions& options) {
  check_output(ckpt, out_path, options);
  deepspeed::detail::remove_dead_leftovers(out_path);
  WeightsSelection s = select_weights(ckpt);
  auto tally = std::make_shared<deepspeed::detail::NonFiniteTally>();
  s.tensors = deepspeed::detail::watch_non_finite(s.tensors, tally, options.strict);
  if (options.progress) {
    auto counted = ckptdoc::detail::with_progress(s.tensors, *options.progress);
    options.progress->set_stage("writing " + std::to_string(s.tensors.size()) + " weights",
                                counted.total_bytes);
    s.tensors = std::move(counted.tensors);
    options.progress->check();
  }
  ExportResult r;
  r.tensors = s.tensors.size();
  r.state_tensors_left_out = s.state_tensors_left_out;
  r.bytes_items_left_out = s.bytes_items_left_out;
  r.stripped_prefix = s.stripped_prefix;
  if (options.max_shard_size) {
    const auto format = options.torch ? weights::ShardFormat::Torch : weights::ShardFormat::Safetensors;
    const weights::ShardPlan plan = weights::plan_shards(s.tensors, *options.max_shard_size, format);
    const weights::ShardedOutput w = weights::write_shards(s.tensors, plan, out_path, format, options.force);
    r.path = w.folder;
    r.bytes = w.bytes;
    r.files = w.files;
  } else if (options.torch) {
    Value root = Value::dict(false);  // a plain dict, as torch.save of a state dict
    for (const auto& t : s.tensors) root.set(t.name, Value::tensor(t.tensor));
    write_torch_file(out_path, root);
    r.path = out_path;
    std::error_code ec;
    r.bytes = std::filesystem::file_size(out_path, ec);
  } else {
    // save_file's layout, as accelerate merge-weights writes it.
    std::vector<NamedTensor> ordered = s.tensors;
    sort_as_safetensors_saves(ordered);
    write_safetensors_file(out_path, ordered, {{"format", "pt"}});
    r.path = out_path;
    std::error_code ec;
    r.bytes = std::filesystem::file_size(out_path, ec);
  }
  for (const auto& t : tally->tensors)
    if (t.nan + t.inf > 0) r.non_finite.push_back(t);
  return r;
}

}  // namespace ckptdoc::dcp
