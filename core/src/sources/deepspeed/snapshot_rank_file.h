#pragma once
// One rank's HDF5 file of a snapshot, read once at open: where every pickle, storage and gradient dataset is
// (offsets, element types, lengths), checked, with no tensor bytes read. Internal to the snapshot module.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ckptdoc/dtype.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"

namespace ckptdoc::snapshot {

// The element type a dataset is stored with (bf16 is stored as its uint16 bits, bool as uint8).
enum class Stored : uint8_t { F32, F64, F16, I64, I32, I16, I8, U8, U16, Other };

struct DatasetInfo {
  std::string path;  // inside the HDF5 file, e.g. "/files/mp_rank_00_model_states.pt/storages/3"
  Stored stored = Stored::Other;
  uint64_t numel = 0;
  // Where the bytes start in the file: set for contiguous, unfiltered datasets whose space is allocated (the
  // hook writes only those); unset ones are read through the HDF5 library instead.
  std::optional<uint64_t> offset;
  std::string type_text;  // for messages: "float32", "uint16", "compound", ...
};

uint64_t stored_size(Stored s);  // bytes per element (0 for Other)
// Can a dataset stored as `s` hold the elements of dtype `d` bit for bit?
bool stored_matches(Stored s, DType d);

struct GradDataset {
  DatasetInfo ds;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  double scale = 1.0;
};

struct Snapshot::RankFile {
  std::string name;  // file name inside the snapshot folder
  std::string path;  // absolute
  int rank = 0;
  std::shared_ptr<const MappedFile> map;
  struct VirtualFile {
    DatasetInfo pickle;
    std::map<std::string, DatasetInfo> storages;  // by storage key
  };
  std::map<std::string, VirtualFile> files;  // by DeepSpeed file name
  std::map<int, GradDataset> partition_grads;
  std::vector<std::pair<std::string, GradDataset>> lp_grads;

  // Reads the metadata of `path` (rank `rank` of the manifest). Throws ckptdoc::Error naming the file and the
  // dataset on anything that does not match the format.
  static std::shared_ptr<const RankFile> open(const std::string& path, const std::string& name, int rank);

  // The dataset's bytes: a view on the map when it has an offset, else read into `owned`.
  std::span<const uint8_t> bytes(const DatasetInfo& d, uint64_t element_bytes,
                                 std::shared_ptr<const std::vector<uint8_t>>* owned) const;
};

}  // namespace ckptdoc::snapshot
