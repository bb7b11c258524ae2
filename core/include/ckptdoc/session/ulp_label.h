#pragma once
// The ULP-distance chart's axis labels, shared by both views.
#include <string>

namespace ckptdoc::session {

// Bucket b of UlpHistogram labelled by its lower edge in ULPs: "0", "1", "2", "4" … "16k", "≥64k" (UTF-8), so
// no chart labels a bucket by its index (bucket 15 holds distances from 16384 ULPs, not 15).
std::string ulp_axis_label(int bucket);

}  // namespace ckptdoc::session
