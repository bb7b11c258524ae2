#include "ckptdoc/request_field.h"

#include <array>
#include <atomic>

namespace ckptdoc {

namespace {
constexpr std::array<std::string_view, kRequestFieldCount> kIds{
    "refresh_fp32", "reset_optimizer", "drop_optimizer",   "repartition",        "restore_model_files",
    "world_size",   "target",          "lp_source",        "allow_shape_change", "allow_unsafe_pickle",
    "force",        "output",          "across_processes",
};
std::atomic<RequestFieldNamer> g_namer{nullptr};
}  // namespace

std::string_view request_field_id(RequestField field) {
  return kIds[static_cast<size_t>(field)];
}

std::optional<RequestField> request_field_from_id(std::string_view id) {
  for (size_t i = 0; i < kIds.size(); ++i)
    if (kIds[i] == id) return static_cast<RequestField>(i);
  return std::nullopt;
}

std::string render_request_fields(std::string_view text,
                                  const std::function<std::string(RequestField)>& name) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t open = text.find('{', i);
    if (open == std::string_view::npos) break;
    const size_t close = text.find('}', open + 1);
    if (close == std::string_view::npos) break;
    out.append(text.substr(i, open - i));
    const auto field = request_field_from_id(text.substr(open + 1, close - open - 1));
    if (!field) {  // not a mark (a path's or a message's own brace): keep it and look on after it
      out += '{';
      i = open + 1;
      continue;
    }
    out += name(*field);
    i = close + 1;
  }
  out.append(text.substr(i));
  return out;
}

void set_request_field_namer(RequestFieldNamer namer) {
  g_namer.store(namer);
}

std::string request_text(std::string_view text) {
  const RequestFieldNamer namer = g_namer.load();
  return render_request_fields(
      text, [namer](RequestField f) { return namer ? namer(f) : std::string(request_field_id(f)); });
}

std::string request_text(std::string_view text, std::initializer_list<std::string_view> literals) {
  const std::string rendered = request_text(text);
  std::string out;
  out.reserve(rendered.size());
  const auto* next = literals.begin();
  size_t i = 0;
  for (size_t at = rendered.find("{}"); at != std::string::npos && next != literals.end();
       at = rendered.find("{}", i)) {
    out.append(rendered, i, at - i);
    out.append(*next++);
    i = at + 2;
  }
  out.append(rendered, i);
  return out;
}

}  // namespace ckptdoc
