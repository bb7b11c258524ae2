// Checkpoint::universal_tensor: a universal checkpoint's per-param state files as the flat 1-D tensors the
// rest of ckptdoc reads (group k = param k, rank 0), views on the mapped files.
#include <algorithm>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "sources/deepspeed/universal_folder.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

std::optional<Tensor> Checkpoint::universal_tensor(int group, const std::string& state) const {
  const auto& u = *catalog_.universal;
  if (group < 0 || static_cast<size_t>(group) >= u.params.size() ||
      static_cast<size_t>(group) >= catalog_.groups.size())
    return std::nullopt;
  const auto& pf = u.params[static_cast<size_t>(group)];
  const auto at = std::find(pf.states.begin(), pf.states.end(), state);
  if (at == pf.states.end()) return std::nullopt;
  const UniversalStateFileId& id = pf.ids[static_cast<size_t>(at - pf.states.begin())];
  if (id.inode == 0 && id.bytes == 0) return std::nullopt;  // unreadable: reported by the catalog
  const int64_t numel = catalog_.groups[static_cast<size_t>(group)].numel;
  const std::string path = state_file(u.zero_dir, pf.name, state);
  std::shared_ptr<const TorchFile> f;
  try {
    // Opened for each read and unmapped with the last tensor viewing it: a folder can hold more files than
    // the process could keep mapped.
    f = open_transient(path);
  } catch (const Error& e) {
    throw Error(ErrorKind::Io, path, "",
                std::string("changed while being read: it could be read when the checkpoint was opened, "
                            "not now (") +
                    e.what() + ")");
  }
  if (f->file->size() != id.bytes || f->file->inode() != id.inode || f->file->device() != id.device)
    throw Error(ErrorKind::Io, path, "",
                "changed while being read: it was replaced or rewritten after the checkpoint was opened (" +
                    std::to_string(id.bytes) + " bytes then, " + std::to_string(f->file->size()) + " now)");
  try {
    const Value* v = f->root.is_tensor() ? &f->root : detail::dict_get(&f->root, "param");
    if (!v || !v->is_tensor()) return std::nullopt;
    const Tensor& t = v->as_tensor();
    if (t.numel() != numel) return std::nullopt;  // reported by the catalog (shape-mismatch)
    if (t.is_contiguous()) {
      Tensor flat = t;
      flat.shape = {numel};
      flat.strides = {1};
      return flat;
    }
    return Tensor::from_bytes(t.dtype, {numel}, t.to_bytes());  // rare: one param's worth, in memory
  } catch (const Error&) {
    return std::nullopt;  // unreadable: reported by the catalog
  }
}

}  // namespace ckptdoc::deepspeed
