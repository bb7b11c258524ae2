// export_weights: writes the export tensor list in the chosen container, atomically.
#include "ckptdoc/sources/deepspeed/export.h"

#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/format/safetensors.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/weights/model_companions.h"
#include "ckptdoc/weights/shards.h"
#include "ckptdoc/weights/weights_source.h"
#include "io/path_relation.h"
#include "sources/deepspeed/non_finite_watch.h"
#include "sources/deepspeed/output_folder_check.h"

#if __has_include("ckptdoc/format/hdf5_writer.h")
#include "ckptdoc/format/hdf5_writer.h"
#define CKPTDOC_HAVE_HDF5_WRITER 1
#endif

namespace ckptdoc::deepspeed {

ExportFormat parse_export_format(const std::string& s) {
  if (s == "safetensors") return ExportFormat::Safetensors;
  if (s == "torch" || s == "pt" || s == "bin") return ExportFormat::Torch;
  if (s == "hdf5" || s == "h5") return ExportFormat::Hdf5;
  throw Error(ErrorKind::InvalidRequest, "", "--format",
              expected_found("safetensors, torch or hdf5", "'" + s + "'"));
}

ExportSource parse_export_source(const std::string& s) {
  if (s == "fp32") return ExportSource::Fp32;
  if (s == "lp") return ExportSource::Lp;
  throw Error(ErrorKind::InvalidRequest, "", "--source", expected_found("fp32 or lp", "'" + s + "'"));
}

namespace {

// Every file the export reads: DeepSpeed rank files, or a weights source's files.
std::vector<std::string> input_files(const Checkpoint& ckpt) {
  std::vector<std::string> files;
  for (const auto& f : ckpt.catalog().files) files.push_back(f.abs_path);
  if (ckpt.weights())
    for (const auto& f : ckpt.weights()->files()) files.push_back(f.abs_path);
  return files;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return io::normalised_path(a) == io::normalised_path(b) || std::filesystem::equivalent(a, b, ec);
}

// Where an export may write: never over or into its input (a file it reads, the tag folder), never over an
// existing file without --force, and a folder only when sharding. Throws naming --output.
void check_export_output(const Checkpoint& ckpt, const std::string& out_path, const ExportOptions& options) {
  namespace fs = std::filesystem;
  if (out_path.empty()) throw Error(ErrorKind::InvalidRequest, "", "--output", "an output file is required");
  const std::string out = io::normalised_path(out_path);
  const std::string tag = io::normalised_path(ckpt.catalog().tag_dir);
  const auto files = input_files(ckpt);
  for (const auto& f : files)
    if (same_file(out, f))
      throw Error(ErrorKind::InvalidRequest, out, "--output",
                  "is a file this export reads; choose a new path (the input is never modified)");
  if (!ckpt.weights_only() && io::inside_or_equal(out, tag))
    throw Error(ErrorKind::InvalidRequest, out, "--output",
                "is inside the input's tag folder " + tag + "; choose a path outside it");
  if (options.max_shard_size) {
    // The shard writer writes and replaces weights files directly in the folder: none of them may be an
    // input.
    for (const auto& f : files)
      if (io::normalised_path(fs::path(f).parent_path().string()) == out)
        throw Error(ErrorKind::InvalidRequest, out, "--output",
                    "holds the files this export reads (" + fs::path(f).filename().string() +
                        "); choose another folder (the input is never modified)");
    return;
  }
  detail::check_output_file(out, options.force);
}

// A Trainer checkpoint-N/ folder (or a Hugging Face folder being re-sharded) keeps config.json and the
// tokenizer beside its weights: an export into a folder takes them along, so from_pretrained loads it as is.
void copy_model_companions(const Checkpoint& ckpt, const std::string& folder, ExportResult& r) {
  const std::string from = ckpt.weights_only() ? ckpt.weights()->root() : ckpt.catalog().save_dir;
  if (io::normalised_path(from) == io::normalised_path(folder)) return;
  const auto copy = weights::copy_companions(from, folder, weights::model_companions(from));
  r.companions = copy.copied;
  for (const auto& name : copy.different) {
    std::string note = folder;
    note.append("/").append(name).append(" was already there and differs from ").append(from).append("/");
    note.append(name).append(": kept as it is (not replaced)");
    r.notes.push_back(std::move(note));
  }
}

}  // namespace

ExportResult export_weights(const Checkpoint& ckpt, const std::string& out_path, const ExportOptions& options,
                            Progress* progress) {
  check_export_output(ckpt, out_path, options);
  detail::remove_dead_leftovers(out_path);
  if (options.dtype && *options.dtype != DType::F32 && *options.dtype != DType::F16 &&
      *options.dtype != DType::BF16) {
    throw Error(ErrorKind::InvalidRequest, out_path, "--dtype",
                expected_found("float32, float16 or bfloat16", std::string(dtype_name(*options.dtype))));
  }
#ifndef CKPTDOC_HAVE_HDF5_WRITER
  if (options.format == ExportFormat::Hdf5) {
    throw Error(ErrorKind::Unsupported, out_path, "--format hdf5",
                "HDF5 export is not available in this build (no HDF5 writer yet); "
                "use safetensors or torch");
  }
#endif
  if (options.max_shard_size && options.format == ExportFormat::Hdf5)
    throw Error(ErrorKind::InvalidRequest, out_path, "--max-shard-size",
                "HDF5 export is always one file; shard safetensors or torch output");
  auto tally = std::make_shared<detail::NonFiniteTally>();
  std::vector<std::string> notes;
  const std::vector<NamedTensor> tensors =
      detail::watch_non_finite(export_tensors(ckpt, options, progress, &notes), tally, options.strict);
  const auto with_non_finite = [&tally, &notes](ExportResult r) {
    r.notes.insert(r.notes.begin(), notes.begin(), notes.end());
    for (const auto& t : tally->tensors)
      if (t.nan + t.inf > 0) r.non_finite.push_back(t);
    return r;
  };
  if (options.max_shard_size) {
    const auto format = options.format == ExportFormat::Torch ? weights::ShardFormat::Torch
                                                              : weights::ShardFormat::Safetensors;
    const weights::ShardPlan plan = weights::plan_shards(tensors, *options.max_shard_size, format);
    const weights::ShardedOutput w = weights::write_shards(tensors, plan, out_path, format, options.force);
    ExportResult r;
    r.path = w.folder;
    r.tensors = tensors.size();
    r.bytes = w.bytes;
    r.files = w.files;
    copy_model_companions(ckpt, w.folder, r);
    return with_non_finite(std::move(r));
  }
  switch (options.format) {
    case ExportFormat::Safetensors: {
      // Laid out as zero_to_fp32.py --safe_serialization's save_file lays it out, so the file is byte for
      // byte the reference's; loaders read tensors by name, so the order inside the file carries no meaning.
      std::vector<NamedTensor> ordered = tensors;
      sort_as_safetensors_saves(ordered);
      write_safetensors_file(out_path, ordered, {{"format", "pt"}});
      break;
    }
    case ExportFormat::Torch: {
      Value root = Value::dict(true);  // zero_to_fp32 saves an OrderedDict
      for (const auto& t : tensors) root.set(t.name, Value::tensor(t.tensor));
      write_torch_file(out_path, root);
      break;
    }
    case ExportFormat::Hdf5:
#ifdef CKPTDOC_HAVE_HDF5_WRITER
      write_hdf5_file(out_path, tensors,
                      {{"source", "ckptdoc export (DeepSpeed)"}, {"tag", ckpt.catalog().tag}});
#endif
      break;
  }
  ExportResult r;
  r.path = out_path;
  r.tensors = tensors.size();
  std::error_code ec;
  r.bytes = std::filesystem::file_size(out_path, ec);
  return with_non_finite(std::move(r));
}

}  // namespace ckptdoc::deepspeed
