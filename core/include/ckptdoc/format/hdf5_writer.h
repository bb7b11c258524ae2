#pragma once
// Export of tensors to an HDF5 file that h5py, MATLAB and HDFView open directly.
//
// Layout: one dataset per tensor. Dotted names become nested groups, the way Keras and most h5py code
// organise weights: "encoder.layers.0.weight" is the dataset /encoder/layers/0/weight, so
// f["encoder"]["layers"]["0"]["weight"] and f["encoder/layers/0/weight"] both work. A name that is empty,
// has an empty part ("a..b", ".a", "a."), contains '/', or is both a tensor and the prefix of another
// ("a" and "a.b") is rejected with an error rather than renamed silently.
//
// Types (little-endian, stored as the file's native types, no conversion on read):
//   float32/float64          -> IEEE f32/f64
//   float16                  -> IEEE half (h5py reads it as numpy float16)
//   bfloat16                 -> float32 (exact upcast), attribute ckptdoc_source_dtype = "bfloat16"
//   int8/16/32/64, uint8     -> the same integer type
//   bool                     -> uint8 0/1, attribute ckptdoc_source_dtype = "bool"
//   complex64/complex128     -> compound {r, i} of f32/f64 (h5py's complex convention)
// 0-d tensors are scalar datasets; tensors with a 0 dimension are empty datasets of that shape.
// `attributes` become UTF-8 string attributes of the root group.
//
// The file is written to "<path>.ckptdoc-tmp-<pid>" and renamed over `path` only when complete, so a
// failed export leaves an existing file untouched. Errors throw ckptdoc::Error naming the path and the
// tensor. Calls into the (not thread-safe) HDF5 library are serialised by a process-wide lock.
#include <map>
#include <string>
#include <vector>

#include "ckptdoc/format/safetensors.h"  // NamedTensor

namespace ckptdoc {

void write_hdf5_file(const std::string& path, const std::vector<NamedTensor>& tensors,
                     const std::map<std::string, std::string>& attributes = {});

}  // namespace ckptdoc
