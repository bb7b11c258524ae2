#pragma once
// Plain C++ interface of the CUDA backend (no CUDA, spdlog or fmt headers): what backend_select.cpp calls.
// Failures are reported as std::runtime_error; the caller turns them into ckptdoc::Error.
#include <memory>
#include <string>

#include "ckptdoc/compute/backend.h"

namespace ckptdoc::cuda {

// True when at least one device is usable; otherwise `reason` gets the CUDA error's name and text.
bool probe(std::string* reason);
int device_count();  // 0 when the runtime reports an error
// A backend on `device` (index among the visible devices). Throws std::runtime_error when unusable.
std::unique_ptr<Backend> make_backend(int device = 0);

}  // namespace ckptdoc::cuda
