// repair --drop-optimizer of a Megatron-core save (see drop_optimizer.h).
#include "drop_optimizer.h"

#include <filesystem>
#include <map>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/sources/dcp/checkpoint.h"
#include "megatron_folder.h"
#include "repaired_copy.h"
#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::megatron {
namespace fs = std::filesystem;
namespace {

// megatron-core 0.19's common state item without the optimizer's entries: its new bytes (torch.save of
// [state], the input's archive name), or none when it holds no such entry.
std::map<std::string, std::vector<uint8_t>> common_item_without_optimizer(const dcp::Checkpoint& in,
                                                                          const CommonState& common,
                                                                          std::vector<std::string>& dropped) {
  if (!common.in_checkpoint || !common.error.empty()) return {};
  const TorchFile tf = in.open_item(*in.metadata().find(common.key)->bytes_item);
  Value kept = tf.root.clone();
  Value& state = kept.items_mut().front();
  for (const char* name : kOptimizerEntries)
    if (state.erase(name)) dropped.emplace_back(name);
  if (dropped.empty()) return {};
  VectorSink sink;
  TorchWriteOptions options;
  options.archive_name = tf.archive_name;
  write_torch(sink, kept, options);
  return {{common.key, std::move(sink.data)}};
}

}  // namespace

DropResult drop_optimizer(const std::string& path, const std::string& output, Progress* progress) {
  const auto folder = resolve(path);
  const std::string out = dcp::checked_new_output(output, {path, folder.dir});
  const auto in = dcp::Checkpoint::open(folder.dir);
  const std::string common_path = folder.dir + "/common.pt";
  const bool has_common = fs::exists(common_path);

  DropResult r;
  r.output = out;
  r.integrity_dropped = has_integrity(folder);
  const CommonState common = read_common(folder.dir, *in);
  r.common_where = common.in_checkpoint ? common.key : "common.pt";
  const auto replaced = common_item_without_optimizer(*in, common, r.common_dropped);
  write_repaired_copy(folder, out, CopyInput::Nothing, progress, [&](const std::string& tmp_iter) {
    // copies common.pt, metadata.json and the rest as they are
    r.dcp = dcp::drop_optimizer(*in, tmp_iter, progress, replaced);
    if (r.integrity_dropped) fs::remove(fs::path(tmp_iter) / kIntegrity);
    if (!has_common) return;  // 0.19: the common state item is checked by dcp::drop_optimizer, byte for byte
    const TorchFile common_pt = TorchFile::open(common_path);
    Value kept = common_pt.root.clone();
    for (const char* name : kOptimizerEntries)
      if (kept.erase(name)) r.common_dropped.emplace_back(name);
    if (r.common_dropped.empty()) return;  // the copy is the input's bytes
    TorchWriteOptions options;
    options.archive_name = common_pt.archive_name;
    write_torch_file(tmp_iter + "/common.pt", kept, options);
    // The copy's common.pt is checked before it is published: the input's tree without the dropped entries.
    if (!kept.equals(TorchFile::open(tmp_iter + "/common.pt").root))
      throw Error(ErrorKind::Inconsistent, tmp_iter + "/common.pt", "drop-optimizer",
                  "does not read back as the input's without its optimizer entries: nothing was published");
  });
  r.iteration_dir = repaired_iteration_dir(folder, out);
  return r;
}

}  // namespace ckptdoc::megatron
