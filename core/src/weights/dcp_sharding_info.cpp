// DCP_SHARDING_INFO is a JSON string: {"<name>": {"saved_offsets": [int, ...]}, ...}.
#include "weights/dcp_sharding_info.h"

#include <nlohmann/json.hpp>

#include "ckptdoc/error.h"

namespace ckptdoc::weights {

std::optional<DcpPiece> dcp_piece_in(const std::map<std::string, std::string>& metadata,
                                     const std::string& path) {
  const auto it = metadata.find("DCP_SHARDING_INFO");
  if (it == metadata.end()) return std::nullopt;
  const auto info = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& what) {
    return Error(ErrorKind::Corrupt, path, "__metadata__ DCP_SHARDING_INFO", what);
  };
  if (!info.is_object()) throw bad("not a JSON object");
  std::optional<DcpPiece> first;
  for (const auto& [name, entry] : info.items()) {
    const auto offsets = entry.is_object() ? entry.find("saved_offsets") : entry.end();
    if (!entry.is_object() || offsets == entry.end() || !offsets->is_array())
      throw bad("'" + name + "' has no saved_offsets list");
    std::string text;
    bool piece = false;
    for (const auto& o : *offsets) {
      if (!o.is_number_integer()) throw bad("'" + name + "' has a saved offset that is not an integer");
      piece = piece || o.get<int64_t>() != 0;
      text += (text.empty() ? "" : ", ") + std::to_string(o.get<int64_t>());
    }
    std::string out = "'" + name;
    out += "' at [";
    out += text;
    out += "]";
    if (piece) return DcpPiece{out, true};
    if (!first) first = DcpPiece{out, false};
  }
  return first;
}

}  // namespace ckptdoc::weights
