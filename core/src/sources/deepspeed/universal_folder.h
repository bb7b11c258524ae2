#pragma once
// Names inside a DeepSpeed universal checkpoint folder (deepspeed-format.md §7.1) and how to recognise one.
#include <string>

namespace ckptdoc::deepspeed {

// True when `dir` is a universal checkpoint folder: it holds zero/optimizer_state.pt, or a zero/<param>/
// folder with an fp32.pt (a damaged folder that lost its optimizer_state.pt is still read as universal, to
// say so).
bool is_universal_folder(const std::string& dir);

// zero/<param>/<state>.pt under the tag folder `tag_dir` (param names are dotted, never nested folders).
std::string state_file(const std::string& zero_dir, const std::string& param, const std::string& state);

// The states DeepSpeed's converter writes per param: the fp32 master and Adam's two moments, plus step.pt
// from 0.14.1 on.
inline constexpr const char* kMomentStates[] = {"exp_avg", "exp_avg_sq"};

}  // namespace ckptdoc::deepspeed
