#pragma once
// Numbers in messages, spelled one way everywhere (beside human_bytes.h, which spells byte counts).
#include <string>

namespace ckptdoc {

// Three significant digits, as printf's "%.3g": 0.000123456 -> "0.000123", 1234.5 -> "1.23e+03", 2 -> "2".
std::string three_significant_digits(double v);
// At least two digits, zero-padded, as DeepSpeed's file names write ranks and layers: 7 -> "07", 123 ->
// "123".
std::string two_digits(int v);
// An optimizer step as reports write it: a whole value without decimals (2.0 -> "2"), else its digits with no
// trailing zeros (2.5 -> "2.5").
std::string step_text(double v);

}  // namespace ckptdoc
