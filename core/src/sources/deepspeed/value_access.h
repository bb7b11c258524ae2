#pragma once
// Null-safe reads of the pickled trees DeepSpeed writes: a missing key or an unexpected type yields
// nullptr / nullopt, so the catalog can report a problem instead of throwing half-way.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ckptdoc/format/value.h"

namespace ckptdoc::deepspeed::detail {

const Value* dict_get(const Value* d, std::string_view key);  // nullptr when absent, None or not a dict
const Value* int_key(const Value* d, int64_t key);            // dict keyed by ints (optimizer 'state')
const Value* list_at(const Value* v, size_t i);               // List/Tuple item
std::optional<int64_t> opt_int(const Value* v);               // Int, Bool, int-valued objects (ZeroStageEnum)
std::optional<double> opt_float(const Value* v);
std::optional<std::string> opt_str(const Value* v);
std::optional<bool> opt_bool(const Value* v);
std::optional<std::vector<int64_t>> shape_of(const Value* v);  // torch.Size, tuple or list of ints
int64_t shape_numel(const std::vector<int64_t>& shape);
// (string key, value) pairs of a dict; non-string keys are skipped.
std::vector<std::pair<std::string, const Value*>> str_items(const Value* d);
// Attribute of an object's BUILD state, or the key of a dict.
const Value* attr_or_key(const Value* v, std::string_view name);
// Numel of a tensor value; nullopt when not a tensor.
std::optional<int64_t> tensor_numel(const Value* v);
// A scalar read from an int/float value or a one-element tensor (reads that element's bytes).
std::optional<double> scalar_value(const Value* v);

}  // namespace ckptdoc::deepspeed::detail
