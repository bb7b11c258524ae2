// Reads a snapshot rank file's layout through the HDF5 C library (under the process-wide HDF5 lock), once;
// tensor bytes are then read straight from the memory map at each dataset's file offset.
#include "sources/deepspeed/snapshot_rank_file.h"

#include <hdf5.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "ckptdoc/error.h"
#include "format/hdf5_handle.h"
#include "format/hdf5_lock.h"

namespace ckptdoc::snapshot {
namespace {

constexpr uint64_t kMaxPickleBytes = 1ull << 30;     // the unpickler's own allocation limit
constexpr uint64_t kMaxUnmappedBytes = 16ull << 30;  // a filtered dataset read into memory
constexpr uint64_t kMaxLiveInfoBytes = 64ull << 20;

using hdf5::Handle;
using hdf5::QuietErrors;

const char* stored_name(Stored s) {
  switch (s) {
    case Stored::F32:
      return "float32";
    case Stored::F64:
      return "float64";
    case Stored::F16:
      return "float16";
    case Stored::I64:
      return "int64";
    case Stored::I32:
      return "int32";
    case Stored::I16:
      return "int16";
    case Stored::I8:
      return "int8";
    case Stored::U8:
      return "uint8";
    case Stored::U16:
      return "uint16";
    default:
      return "other";
  }
}

}  // namespace

uint64_t stored_size(Stored s) {
  switch (s) {
    case Stored::F64:
    case Stored::I64:
      return 8;
    case Stored::F32:
    case Stored::I32:
      return 4;
    case Stored::F16:
    case Stored::I16:
    case Stored::U16:
      return 2;
    case Stored::I8:
    case Stored::U8:
      return 1;
    default:
      return 0;
  }
}

namespace {

Stored classify_type(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (size > 1 && H5Tget_order(type) != H5T_ORDER_LE) return Stored::Other;
  if (cls == H5T_FLOAT) {
    if (size == 4 && H5Tequal(type, H5T_IEEE_F32LE) > 0) return Stored::F32;
    if (size == 8 && H5Tequal(type, H5T_IEEE_F64LE) > 0) return Stored::F64;
    if (size == 2) {  // IEEE binary16: sign bit 15, exponent bits 10-14 (bias 15), mantissa bits 0-9
      size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) >= 0 && spos == 15 && epos == 10 &&
          esize == 5 && mpos == 0 && msize == 10 && H5Tget_ebias(type) == 15)
        return Stored::F16;
    }
    return Stored::Other;
  }
  if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    switch (size) {
      case 8:
        return is_signed ? Stored::I64 : Stored::Other;
      case 4:
        return is_signed ? Stored::I32 : Stored::Other;
      case 2:
        return is_signed ? Stored::I16 : Stored::U16;
      case 1:
        return is_signed ? Stored::I8 : Stored::U8;
      default:
        return Stored::Other;
    }
  }
  return Stored::Other;
}

struct Reader {
  std::string file;  // for messages
  hid_t h5 = H5I_INVALID_HID;
  uint64_t file_size = 0;

  DatasetInfo dataset(const std::string& path) const {
    Handle ds(H5Dopen2(h5, path.c_str(), H5P_DEFAULT), H5Dclose);
    if (!ds) throw Error(ErrorKind::Corrupt, file, "dataset " + path, "missing or not a dataset");
    DatasetInfo d;
    d.path = path;
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    Handle type(H5Dget_type(ds.get()), H5Tclose);
    if (!space || !type)
      throw Error(ErrorKind::Corrupt, file, "dataset " + path, "its dataspace or type cannot be read");
    const int ndims = H5Sget_simple_extent_ndims(space.get());
    if (ndims != 1)
      throw Error(ErrorKind::Corrupt, file, "dataset " + path,
                  expected_found("a 1-D dataset", std::to_string(ndims) + " dimensions"));
    hsize_t dim = 0;
    H5Sget_simple_extent_dims(space.get(), &dim, nullptr);
    d.numel = dim;
    d.stored = classify_type(type.get());
    d.type_text = stored_name(d.stored);
    if (d.stored == Stored::Other) return d;  // the caller says what it expected
    const uint64_t nbytes = d.numel * stored_size(d.stored);
    if (d.numel > (uint64_t{1} << 56))
      throw Error(ErrorKind::Corrupt, file, "dataset " + path,
                  "claims " + std::to_string(d.numel) + " elements, which is absurd");
    Handle plist(H5Dget_create_plist(ds.get()), H5Pclose);
    const bool plain = plist && H5Pget_layout(plist.get()) == H5D_CONTIGUOUS &&
                       H5Pget_nfilters(plist.get()) == 0 && H5Pget_external_count(plist.get()) == 0;
    if (plain && nbytes > 0) {
      const haddr_t off = H5Dget_offset(ds.get());
      if (off != HADDR_UNDEF) {
        if (off > file_size || nbytes > file_size - off)
          throw Error(ErrorKind::Truncated, file, "dataset " + path,
                      "its " + std::to_string(nbytes) + " bytes at offset " + std::to_string(off) +
                          " run past the end of the file (" + std::to_string(file_size) +
                          " bytes): the file is cut short");
        d.offset = off;
      }
    }
    if (!d.offset && nbytes > kMaxUnmappedBytes)
      throw Error(
          ErrorKind::Unsupported, file, "dataset " + path,
          "is chunked or compressed and " + std::to_string(nbytes) +
              " bytes long; ckptdoc maps contiguous datasets and reads others into memory up to 16 GiB");
    return d;
  }

  std::vector<std::string> members(const std::string& group) const {
    std::vector<std::string> names;
    Handle g(H5Gopen2(h5, group.c_str(), H5P_DEFAULT), H5Gclose);
    if (!g) return names;
    hsize_t idx = 0;
    auto collect = [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
      static_cast<std::vector<std::string>*>(data)->emplace_back(name);
      return 0;
    };
    if (H5Literate(g.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names) < 0)
      throw Error(ErrorKind::Corrupt, file, "group " + group, "its members cannot be listed");
    return names;
  }

  bool exists(const std::string& path) const {
    // every component must exist for H5Lexists not to fail
    size_t pos = 0;
    while ((pos = path.find('/', pos + 1)) != std::string::npos)
      if (H5Lexists(h5, path.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
    return H5Lexists(h5, path.c_str(), H5P_DEFAULT) > 0;
  }

  std::vector<uint8_t> read_all(const DatasetInfo& d) const {
    std::vector<uint8_t> out(d.numel * stored_size(d.stored));
    if (out.empty()) return out;
    Handle ds(H5Dopen2(h5, d.path.c_str(), H5P_DEFAULT), H5Dclose);
    Handle type(ds ? H5Dget_type(ds.get()) : H5I_INVALID_HID, H5Tclose);
    if (!ds || !type || H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
      throw Error(ErrorKind::Io, file, "dataset " + d.path, "cannot be read (HDF5 read failed)");
    return out;
  }
};

std::string quote(const std::string& s) {
  return "'" + s + "'";
}

GradDataset grad_dataset(const Reader& r, const std::string& path, const nlohmann::json& meta,
                         const std::string& info_where) {
  GradDataset g;
  g.ds = r.dataset(path);
  const auto dt = meta.contains("dtype") && meta["dtype"].is_string()
                      ? dtype_from_name(meta["dtype"].get<std::string>())
                      : std::nullopt;
  if (!dt)
    throw Error(ErrorKind::Corrupt, r.file, info_where, "the gradient " + path + " has no known dtype");
  g.dtype = *dt;
  if (!stored_matches(g.ds.stored, g.dtype))
    throw Error(ErrorKind::Corrupt, r.file, "dataset " + path,
                expected_found("elements stored as " + std::string(dtype_name(g.dtype)), g.ds.type_text));
  if (meta.contains("scale") && meta["scale"].is_number()) g.scale = meta["scale"].get<double>();
  if (meta.contains("shape") && meta["shape"].is_array()) {
    for (const auto& v : meta["shape"])
      if (v.is_number_integer()) g.shape.push_back(v.get<int64_t>());
  } else {
    g.shape = {static_cast<int64_t>(g.ds.numel)};
  }
  int64_t n = 1;
  for (auto s : g.shape) n *= s;
  if (n < 0 || static_cast<uint64_t>(n) != g.ds.numel)
    throw Error(ErrorKind::Corrupt, r.file, "dataset " + path,
                "its length " + std::to_string(g.ds.numel) + " does not match its shape");
  return g;
}

}  // namespace

bool stored_matches(Stored s, DType d) {
  switch (d) {
    case DType::F32:
      return s == Stored::F32;
    case DType::F64:
      return s == Stored::F64;
    case DType::F16:
      return s == Stored::F16;
    case DType::BF16:
      return s == Stored::U16 || s == Stored::I16;
    case DType::I64:
      return s == Stored::I64;
    case DType::I32:
      return s == Stored::I32;
    case DType::I16:
      return s == Stored::I16;
    case DType::I8:
      return s == Stored::I8;
    case DType::U8:
    case DType::Bool:
      return s == Stored::U8;
    default:
      return false;
  }
}

std::shared_ptr<const Snapshot::RankFile> Snapshot::RankFile::open(const std::string& path,
                                                                   const std::string& name, int rank) {
  auto rf = std::make_shared<RankFile>();
  rf->name = name;
  rf->path = path;
  rf->rank = rank;
  rf->map = MappedFile::open(path);
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  QuietErrors quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw Error(ErrorKind::Corrupt, path, "", "not an HDF5 file (a snapshot rank file is one)");
  Handle h5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!h5) throw Error(ErrorKind::Corrupt, path, "", "the HDF5 library cannot open it");
  Reader r{path, h5.get(), rf->map->size()};

  // /live/info: the rank's identity and what gradients it recorded
  if (!r.exists("/live/info"))
    throw Error(ErrorKind::Corrupt, path, "dataset /live/info", "missing: not a snapshot rank file");
  const DatasetInfo info_ds = r.dataset("/live/info");
  if (info_ds.stored != Stored::U8 || info_ds.numel > kMaxLiveInfoBytes)
    throw Error(ErrorKind::Corrupt, path, "dataset /live/info",
                expected_found("JSON text as uint8", info_ds.type_text));
  const auto info_bytes = r.read_all(info_ds);
  nlohmann::json info;
  try {
    info = nlohmann::json::parse(info_bytes.begin(), info_bytes.end());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Corrupt, path, "dataset /live/info", std::string("not valid JSON: ") + e.what());
  }
  if (!info.is_object() || !info.contains("rank") || !info["rank"].is_number_integer())
    throw Error(ErrorKind::Corrupt, path, "dataset /live/info", "has no integer 'rank'");
  if (info["rank"].get<int64_t>() != rank)
    throw Error(ErrorKind::Inconsistent, path, "dataset /live/info",
                "holds rank " + std::to_string(info["rank"].get<int64_t>()) +
                    " but the manifest lists it as rank " + std::to_string(rank));

  for (const auto& fname : r.members("/files")) {
    const std::string base = "/files/" + fname;
    VirtualFile vf;
    vf.pickle = r.dataset(base + "/pickle");
    if (vf.pickle.stored != Stored::U8)
      throw Error(ErrorKind::Corrupt, path, "dataset " + base + "/pickle",
                  expected_found("pickle bytes as uint8", vf.pickle.type_text));
    if (vf.pickle.numel > kMaxPickleBytes)
      throw Error(ErrorKind::Corrupt, path, "dataset " + base + "/pickle",
                  "a pickle of " + std::to_string(vf.pickle.numel) + " bytes is absurd");
    for (const auto& key : r.members(base + "/storages")) {
      std::string dataset = base + "/storages/";
      dataset += key;
      vf.storages[key] = r.dataset(dataset);
    }
    rf->files.emplace(fname, std::move(vf));
  }

  const auto& grads = info.contains("grads") ? info["grads"] : nlohmann::json::object();
  if (grads.is_object() && grads.contains("partition") && grads["partition"].is_object()) {
    for (auto it = grads["partition"].begin(); it != grads["partition"].end(); ++it) {
      int group = -1;
      try {
        group = std::stoi(it.key());
      } catch (...) {
      }
      if (group < 0 || std::to_string(group) != it.key())
        throw Error(ErrorKind::Corrupt, path, "dataset /live/info",
                    "gradient group " + quote(it.key()) + " is not a group number");
      rf->partition_grads[group] =
          grad_dataset(r, "/live/grads/partition/" + it.key(), it.value(), "dataset /live/info");
    }
  }
  if (grads.is_object() && grads.contains("lp") && grads["lp"].is_object()) {
    for (auto it = grads["lp"].begin(); it != grads["lp"].end(); ++it)
      rf->lp_grads.emplace_back(
          it.key(), grad_dataset(r, "/live/grads/lp/" + it.key(), it.value(), "dataset /live/info"));
  }
  return rf;
}

std::span<const uint8_t> Snapshot::RankFile::bytes(const DatasetInfo& d, uint64_t element_bytes,
                                                   std::shared_ptr<const std::vector<uint8_t>>* owned) const {
  const uint64_t n = d.numel * element_bytes;
  if (n == 0) return {};
  if (d.offset) return map->slice(*d.offset, n, d.path.c_str());
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  QuietErrors quiet;
  Handle h5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!h5) throw Error(ErrorKind::Corrupt, path, "", "the HDF5 library cannot open it");
  Reader r{path, h5.get(), map->size()};
  auto data = std::make_shared<const std::vector<uint8_t>>(r.read_all(d));
  *owned = data;
  return {data->data(), data->size()};
}

}  // namespace ckptdoc::snapshot
