#include "ckptdoc/format/hdf5_writer.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/io/file_io.h"
#include "format/hdf5_handle.h"
#include "format/hdf5_lock.h"
#include "format/tensor_stream.h"
#include "io/writer_lock.h"

namespace ckptdoc {
namespace {

using hdf5::Handle;
using hdf5::QuietErrors;

herr_t collect_error(unsigned /*n*/, const H5E_error2_t* err, void* data) {
  auto* text = static_cast<std::string*>(data);
  if (err && err->desc && *err->desc) {
    if (!text->empty()) *text += "; ";
    *text += err->desc;
  }
  return 0;
}

// The descriptions on HDF5's error stack, outermost first, then clears it.
std::string hdf5_error_text() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? std::string("unknown HDF5 error") : text;
}

struct Writer {
  std::string path;  // the final path, for messages

  [[noreturn]] void fail(const std::string& where, const std::string& call) const {
    const std::string text = hdf5_error_text();
    // An I/O failure (disk full, file too large) comes as a stack of library messages with the errno inside
    // one of them: said as the other writers say it, one line with the system's words.
    static const std::regex errno_field(R"(errno = (\d+))");
    if (std::smatch m; std::regex_search(text, m, errno_field) && std::stoi(m[1]) > 0)
      throw Error(ErrorKind::Io, path, where, call + ": " + std::strerror(std::stoi(m[1])));
    throw Error(ErrorKind::Io, path, where, call + " failed: " + text);
  }
  hid_t check(hid_t id, const std::string& where, const std::string& call) const {
    if (id < 0) fail(where, call);
    return id;
  }
  void check_status(herr_t rc, const std::string& where, const std::string& call) const {
    if (rc < 0) fail(where, call);
  }

  // A variable-length UTF-8 string attribute, which h5py reads back as str.
  void string_attribute(hid_t object, const std::string& name, const std::string& value,
                        const std::string& where) const {
    if (value.find('\0') != std::string::npos || name.find('\0') != std::string::npos)
      throw Error(ErrorKind::Unsupported, path, where,
                  "attribute " + name + " contains a NUL byte, which HDF5 strings cannot hold");
    Handle type(check(H5Tcopy(H5T_C_S1), where, "H5Tcopy"), H5Tclose);
    check_status(H5Tset_size(type.get(), H5T_VARIABLE), where, "H5Tset_size");
    check_status(H5Tset_cset(type.get(), H5T_CSET_UTF8), where, "H5Tset_cset");
    Handle space(check(H5Screate(H5S_SCALAR), where, "H5Screate"), H5Sclose);
    Handle acpl(check(H5Pcreate(H5P_ATTRIBUTE_CREATE), where, "H5Pcreate"), H5Pclose);
    check_status(H5Pset_char_encoding(acpl.get(), H5T_CSET_UTF8), where, "H5Pset_char_encoding");
    Handle attr(check(H5Acreate2(object, name.c_str(), type.get(), space.get(), acpl.get(), H5P_DEFAULT),
                      where, "H5Acreate2 of attribute '" + name + "'"),
                H5Aclose);
    const char* data = value.c_str();
    check_status(H5Awrite(attr.get(), type.get(), &data), where, "H5Awrite");
  }

  // The file type for a dtype (also used as the memory type: tensor bytes are little-endian).
  hid_t file_type(DType dtype, const std::string& where) const {
    auto copy = [&](hid_t base) { return check(H5Tcopy(base), where, "H5Tcopy"); };
    switch (dtype) {
      case DType::F32:
      case DType::BF16:  // upcast
        return copy(H5T_IEEE_F32LE);
      case DType::F64:
        return copy(H5T_IEEE_F64LE);
      case DType::F16: {  // IEEE binary16: sign bit 15, exponent bits 10-14 (bias 15), mantissa bits 0-9
        Handle t(copy(H5T_IEEE_F32LE), H5Tclose);
        check_status(H5Tset_fields(t.get(), 15, 10, 5, 0, 10), where, "H5Tset_fields");
        check_status(H5Tset_size(t.get(), 2), where, "H5Tset_size");
        check_status(H5Tset_ebias(t.get(), 15), where, "H5Tset_ebias");
        return t.release();
      }
      case DType::I64:
        return copy(H5T_STD_I64LE);
      case DType::I32:
        return copy(H5T_STD_I32LE);
      case DType::I16:
        return copy(H5T_STD_I16LE);
      case DType::I8:
        return copy(H5T_STD_I8LE);
      case DType::U8:
      case DType::Bool:
        return copy(H5T_STD_U8LE);
      case DType::C64:
      case DType::C128: {
        const bool single = dtype == DType::C64;
        const size_t part = single ? 4 : 8;
        Handle t(check(H5Tcreate(H5T_COMPOUND, 2 * part), where, "H5Tcreate"), H5Tclose);
        const hid_t real = single ? H5T_IEEE_F32LE : H5T_IEEE_F64LE;
        check_status(H5Tinsert(t.get(), "r", 0, real), where, "H5Tinsert");
        check_status(H5Tinsert(t.get(), "i", part, real), where, "H5Tinsert");
        return t.release();
      }
    }
    throw Error(ErrorKind::Unsupported, path, where, "unsupported dtype " + std::string(dtype_name(dtype)));
  }
};

std::vector<std::string> split_name(const std::string& file, const std::string& name) {
  const std::string where = "tensor '" + name + "'";
  if (name.empty())
    throw Error(ErrorKind::Unsupported, file, where, "an empty name cannot be an HDF5 dataset");
  if (name.find('/') != std::string::npos)
    throw Error(ErrorKind::Unsupported, file, where,
                "names containing '/' are not exported (HDF5 uses '/' between groups)");
  if (name.find('\0') != std::string::npos)
    throw Error(ErrorKind::Unsupported, file, where, "the name contains a NUL byte");
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (parts.back().empty())
      throw Error(ErrorKind::Unsupported, file, where,
                  "the name has an empty part between dots, so it has no HDF5 group path");
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

// Maps every tensor name to its dataset path, rejecting names that collide as dataset and group.
std::vector<std::string> dataset_paths(const std::string& file, const std::vector<NamedTensor>& tensors) {
  std::map<std::string, std::string> datasets;  // path -> tensor name
  std::map<std::string, std::string> groups;    // path -> first tensor name that needs it
  std::vector<std::string> out;
  for (const auto& nt : tensors) {
    const auto parts = split_name(file, nt.name);
    const std::string where = "tensor '" + nt.name + "'";
    std::string p;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      p += "/" + parts[i];
      if (const auto it = datasets.find(p); it != datasets.end())
        throw Error(ErrorKind::Unsupported, file, where,
                    "needs " + p + " to be a group, but tensor '" + it->second + "' is stored there");
      groups.emplace(p, nt.name);
    }
    p += "/" + parts.back();
    if (const auto it = groups.find(p); it != groups.end())
      throw Error(ErrorKind::Unsupported, file, where,
                  "would be stored at " + p + ", which is the group of tensor '" + it->second + "'");
    if (const auto [it, inserted] = datasets.emplace(p, nt.name); !inserted)
      throw Error(ErrorKind::Unsupported, file, where, "the name is given more than once");
    out.push_back(p);
  }
  return out;
}

// The tensor's row-major bytes: a view when possible, else gathered into `buffer`.
std::span<const uint8_t> tensor_bytes(const std::string& file, const NamedTensor& nt, VectorSink& buffer) {
  if (const auto view = detail::row_major_view(file, nt.name, nt.tensor)) return *view;
  detail::stream_row_major(file, nt.name, nt.tensor, buffer);
  return buffer.data;
}

void write_contents(const Writer& w, hid_t h5file, const std::vector<NamedTensor>& tensors,
                    const std::vector<std::string>& paths,
                    const std::map<std::string, std::string>& attributes) {
  Handle lcpl(w.check(H5Pcreate(H5P_LINK_CREATE), "", "H5Pcreate"), H5Pclose);
  w.check_status(H5Pset_create_intermediate_group(lcpl.get(), 1), "", "H5Pset_create_intermediate_group");
  w.check_status(H5Pset_char_encoding(lcpl.get(), H5T_CSET_UTF8), "", "H5Pset_char_encoding");

  for (size_t k = 0; k < tensors.size(); ++k) {
    const auto& nt = tensors[k];
    const std::string where = "tensor '" + nt.name + "'";
    const uint64_t numel = detail::checked_numel(w.path, nt.name, nt.tensor);
    Handle type(w.file_type(nt.tensor.dtype, where), H5Tclose);
    std::vector<hsize_t> dims(nt.tensor.shape.begin(), nt.tensor.shape.end());
    Handle space(w.check(dims.empty() ? H5Screate(H5S_SCALAR)
                                      : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                         where, "H5Screate"),
                 H5Sclose);
    Handle ds(w.check(H5Dcreate2(h5file, paths[k].c_str(), type.get(), space.get(), lcpl.get(), H5P_DEFAULT,
                                 H5P_DEFAULT),
                      where, "H5Dcreate2"),
              H5Dclose);
    if (numel > 0) {
      VectorSink buffer;
      const auto bytes = tensor_bytes(w.path, nt, buffer);
      if (nt.tensor.dtype == DType::BF16) {
        std::vector<float> wide(static_cast<size_t>(numel));
        for (size_t i = 0; i < wide.size(); ++i) {
          uint16_t b;
          std::memcpy(&b, bytes.data() + 2 * i, 2);
          wide[i] = bf16_to_float(b);
        }
        w.check_status(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, wide.data()), where,
                       "H5Dwrite");
      } else {
        w.check_status(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), where,
                       "H5Dwrite");
      }
    }
    if (nt.tensor.dtype == DType::BF16)
      w.string_attribute(ds.get(), "ckptdoc_source_dtype", "bfloat16", where);
    if (nt.tensor.dtype == DType::Bool) w.string_attribute(ds.get(), "ckptdoc_source_dtype", "bool", where);
  }
  for (const auto& [name, value] : attributes)
    w.string_attribute(h5file, name, value, "attribute '" + name + "'");
}

void fsync_file(const std::string& file, const std::string& temp) {
  const int fd = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::Io, file, "", std::string("open for fsync: ") + std::strerror(errno));
  const int rc = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  if (rc != 0) throw Error(ErrorKind::Io, file, "", std::string("fsync: ") + std::strerror(rc));
}

// The bytes a file of these tensors takes: their data as stored (bf16 upcast to float32) and a margin for
// HDF5's headers, groups and attributes.
uint64_t hdf5_bytes_needed(const std::vector<NamedTensor>& tensors) {
  uint64_t bytes = 1 << 20;
  for (const auto& t : tensors) {
    const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(t.tensor.numel(), 0));
    bytes += n * (t.tensor.dtype == DType::BF16 ? 4 : element_size(t.tensor.dtype)) + (uint64_t{16} << 10);
  }
  return bytes;
}

void reserve_space(const std::string& file, const std::string& temp, uint64_t bytes) {
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(ErrorKind::Io, file, "", std::string("open to reserve space: ") + std::strerror(errno));
  // fallocate, not posix_fallocate: where the file system cannot reserve, glibc's fallback writes every
  // block.
  const int rc = ::fallocate(fd, 0, 0, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  ::close(fd);
  if (rc != 0 && rc != EOPNOTSUPP && rc != ENOSYS)
    throw Error(ErrorKind::Io, file, "",
                "reserving " + std::to_string(bytes) + " bytes: " + std::strerror(rc));
}

std::string parent_dir(const std::string& path) {
  auto p = std::filesystem::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}

}  // namespace

void write_hdf5_file(const std::string& path, const std::vector<NamedTensor>& tensors,
                     const std::map<std::string, std::string>& attributes) {
  const auto paths = dataset_paths(path, tensors);
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  Writer w{path};
  QuietErrors quiet;
  FileIo& io = current_io();
  const std::string temp = path + ".ckptdoc-tmp-" + std::to_string(::getpid());
  std::error_code ec;
  const bool replaces = std::filesystem::exists(std::filesystem::symlink_status(path, ec));  // see AtomicFile
  bool done = false;
  try {
    Handle file(w.check(H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "", "H5Fcreate"),
                H5Fclose);
    // HDF5 1.10 cannot recover from a write the system refuses: the file's close fails and the library
    // crashes at exit closing it again. So the space is claimed before HDF5 writes (disk full or a size limit
    // is then an error of ours, with nothing half-written); file systems that cannot reserve space are
    // written as is.
    const io::WriterLock claim(temp);  // killed, this file is removed by the next run at once
    reserve_space(path, temp, hdf5_bytes_needed(tensors));
    write_contents(w, file.get(), tensors, paths, attributes);
    w.check_status(H5Fclose(file.release()), "", "H5Fclose");
    fsync_file(path, temp);
    if (const int err = replaces ? io.rename(temp, path) : io.rename_noreplace(temp, path); err != 0)
      throw Error(err == EEXIST ? ErrorKind::OutputExists : ErrorKind::Io, path, "",
                  err == EEXIST ? std::string("another process created this file while ckptdoc wrote it; "
                                              "its file is kept and this output was not published")
                                : std::string("rename: ") + std::strerror(err));
    done = true;
    if (const int err = io.fsync_dir(parent_dir(path)); err != 0)
      throw Error(ErrorKind::Io, path, "", std::string("fsync of directory: ") + std::strerror(err));
  } catch (...) {
    if (!done) io.unlink(temp);
    throw;
  }
}

}  // namespace ckptdoc
