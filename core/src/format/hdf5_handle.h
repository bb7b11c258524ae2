#pragma once
// RAII for the HDF5 C library, shared by its reader (sources/deepspeed/snapshot_rank_file.cpp) and writer
// (hdf5_writer.cpp): an identifier closed on scope exit, and HDF5's own error printing silenced.
#include <hdf5.h>

namespace ckptdoc::hdf5 {

// An HDF5 identifier closed on scope exit.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }
  hid_t release() {
    const hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// Silences HDF5's printing of its error stack to stderr while in scope; failures become ckptdoc::Error.
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace ckptdoc::hdf5
