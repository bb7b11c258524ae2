// export_weights: writes the export tensor list in the chosen container, atomically.
#include "ckptdoc/deepspeed/export.h"

#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/weights/shards.h"

#if __has_include("ckptdoc/format/hdf5_writer.h")
#include "ckptdoc/format/hdf5_writer.h"
#define CKPTDOC_HAVE_HDF5_WRITER 1
#endif

namespace ckptdoc::deepspeed {

ExportFormat parse_export_format(const std::string& s) {
  if (s == "safetensors") return ExportFormat::Safetensors;
  if (s == "torch" || s == "pt" || s == "bin") return ExportFormat::Torch;
  if (s == "hdf5" || s == "h5") return ExportFormat::Hdf5;
  throw Error("", "--format", expected_found("safetensors, torch or hdf5", "'" + s + "'"));
}

ExportSource parse_export_source(const std::string& s) {
  if (s == "fp32") return ExportSource::Fp32;
  if (s == "lp") return ExportSource::Lp;
  throw Error("", "--source", expected_found("fp32 or lp", "'" + s + "'"));
}

ExportResult export_weights(const Checkpoint& ckpt, const std::string& out_path, const ExportOptions& options,
                            Progress* progress) {
  if (options.dtype && *options.dtype != DType::F32 && *options.dtype != DType::F16 && *options.dtype != DType::BF16) {
    throw Error(out_path, "--dtype", expected_found("float32, float16 or bfloat16", std::string(dtype_name(*options.dtype))));
  }
#ifndef CKPTDOC_HAVE_HDF5_WRITER
  if (options.format == ExportFormat::Hdf5) {
    throw Error(out_path, "--format hdf5", "HDF5 export is not available in this build (no HDF5 writer yet); "
                                           "use safetensors or torch");
  }
#endif
  if (options.max_shard_size && options.format == ExportFormat::Hdf5)
    throw Error(out_path, "--max-shard-size", "HDF5 export is always one file; shard safetensors or torch output");
  const std::vector<NamedTensor> tensors = export_tensors(ckpt, options, progress);
  if (options.max_shard_size) {
    const auto format = options.format == ExportFormat::Torch ? weights::ShardFormat::Torch : weights::ShardFormat::Safetensors;
    const weights::ShardPlan plan = weights::plan_shards(tensors, *options.max_shard_size, format);
    const weights::ShardedOutput w = weights::write_shards(tensors, plan, out_path, format, options.force);
    ExportResult r;
    r.path = w.folder;
    r.tensors = tensors.size();
    r.bytes = w.bytes;
    r.files = w.files;
    return r;
  }
  switch (options.format) {
    case ExportFormat::Safetensors:
      write_safetensors_file(out_path, tensors, {{"format", "pt"}});
      break;
    case ExportFormat::Torch: {
      Value root = Value::dict(true);  // zero_to_fp32 saves an OrderedDict
      for (const auto& t : tensors) root.set(t.name, Value::tensor(t.tensor));
      write_torch_file(out_path, root);
      break;
    }
    case ExportFormat::Hdf5:
#ifdef CKPTDOC_HAVE_HDF5_WRITER
      write_hdf5_file(out_path, tensors, {{"source", "ckptdoc export (DeepSpeed)"}, {"tag", ckpt.catalog().tag}});
#endif
      break;
  }
  ExportResult r;
  r.path = out_path;
  r.tensors = tensors.size();
  std::error_code ec;
  r.bytes = std::filesystem::file_size(out_path, ec);
  return r;
}

}  // namespace ckptdoc::deepspeed
