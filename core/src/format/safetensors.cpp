#include "ckptdoc/format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <unordered_set>

#include "ckptdoc/error.h"
#include "ckptdoc/io/mapped_file.h"
#include "format/tensor_stream.h"

namespace ckptdoc {
namespace {

constexpr uint64_t kMaxHeaderSize = 100'000'000;  // safetensors MAX_HEADER_SIZE
constexpr size_t kHeaderAlignment = 8;

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Returns the offset of the first byte that is not well-formed UTF-8 (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF), or npos when all of `s` is valid.
size_t first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if ((p[i + k] & 0xc0) != 0x80) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string in_quotes(std::string_view s) {
  std::string out = "'";
  out.append(s);
  out += "'";
  return out;
}

std::string json_type(const nlohmann::json& j) {
  if (j.is_number_unsigned()) return "unsigned integer " + j.dump();
  if (j.is_number_integer()) return "integer " + j.dump();
  if (j.is_number_float()) return "number " + j.dump();
  std::string dumped = j.dump();
  if (dumped.size() > 60) dumped = dumped.substr(0, 57) + "...";
  return std::string(j.type_name()) + " " + dumped;
}

// Parses the header, rejecting a key given twice in any object (nlohmann would silently keep the last one,
// and the safetensors README disallows duplicates).
nlohmann::json parse_header(const std::string& path, std::string_view text) {
  struct Level {
    std::set<std::string> keys;
    std::string last;  // the key being parsed at this level
  };
  std::vector<Level> levels;  // open objects, innermost last
  std::string duplicate;
  auto callback = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    switch (event) {
      case nlohmann::json::parse_event_t::object_start:
        levels.emplace_back();
        break;
      case nlohmann::json::parse_event_t::object_end:
        if (!levels.empty()) levels.pop_back();
        break;
      case nlohmann::json::parse_event_t::key:
        if (!levels.empty()) {
          auto& level = levels.back();
          level.last = parsed.get<std::string>();
          if (!level.keys.insert(level.last).second && duplicate.empty()) {
            for (size_t i = 0; i + 1 < levels.size(); ++i) duplicate += in_quotes(levels[i].last) + " > ";
            duplicate += in_quotes(level.last);
          }
        }
        break;
      default:
        break;
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Corrupt, path, "header", std::string("not valid JSON: ") + e.what());
  }
  if (!duplicate.empty())
    throw Error(ErrorKind::Corrupt, path, "header key " + duplicate,
                "key appears more than once (duplicates are not allowed)");
  return header;
}

// A non-negative JSON integer that fits int64 (shapes) or uint64 (offsets).
uint64_t non_negative_int(const std::string& path, const std::string& where, const nlohmann::json& j,
                          const char* what, uint64_t max) {
  if (!j.is_number_integer())
    throw Error(ErrorKind::Corrupt, path, where,
                std::string(what) + ": " + expected_found("a non-negative integer", json_type(j)));
  if (!j.is_number_unsigned() && j.get<int64_t>() < 0)
    throw Error(ErrorKind::Corrupt, path, where,
                std::string(what) + ": " + expected_found("a non-negative integer", json_type(j)));
  const uint64_t v = j.get<uint64_t>();
  if (v > max)
    throw Error(ErrorKind::Corrupt, path, where,
                std::string(what) + ": " + expected_found("at most " + std::to_string(max), j.dump()));
  return v;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

struct Parsed {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t nbytes;
  uint64_t begin, end;
};

Parsed parse_entry(const std::string& path, const std::string& name, const nlohmann::json& j) {
  const std::string where = "tensor " + in_quotes(name);
  if (!j.is_object())
    throw Error(ErrorKind::Corrupt, path, where,
                expected_found("an object with dtype, shape and data_offsets", json_type(j)));
  for (const auto& [key, _] : j.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      throw Error(ErrorKind::Corrupt, path, where,
                  "unknown field " + in_quotes(key) + " (expected only dtype, shape, data_offsets)");
  }
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!j.contains(field))
      throw Error(ErrorKind::Corrupt, path, where, std::string("missing field '") + field + "'");

  Parsed p;
  p.name = name;
  const auto& dt = j.at("dtype");
  if (!dt.is_string())
    throw Error(ErrorKind::Corrupt, path, where, "dtype: " + expected_found("a string", json_type(dt)));
  const auto& dts = dt.get_ref<const std::string&>();
  const auto dtype = dtype_from_safetensors(dts);
  // C128 is in ckptdoc's table but not in the safetensors format.
  if (!dtype || *dtype == DType::C128)
    throw Error(ErrorKind::Unsupported, path, where,
                "dtype: " + expected_found("one of BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, F64, C64",
                                           in_quotes(dts) + " (unknown or unsupported)"));
  p.dtype = *dtype;

  const auto& shape = j.at("shape");
  if (!shape.is_array())
    throw Error(ErrorKind::Corrupt, path, where,
                "shape: " + expected_found("an array of integers", json_type(shape)));
  // Checked product of the dimensions; an overflow is an error even when a later dimension is 0, as in
  // the reference's checked multiplication.
  uint64_t numel = 1;
  bool overflow = false;
  for (const auto& d : shape) {
    const uint64_t v = non_negative_int(path, where, d, "shape", static_cast<uint64_t>(INT64_MAX));
    p.shape.push_back(static_cast<int64_t>(v));
    if (overflow) continue;
    if (v != 0 && numel > static_cast<uint64_t>(INT64_MAX) / v) overflow = true;
    numel *= v;
  }
  const uint64_t esize = element_size(p.dtype);
  if (overflow || numel > std::numeric_limits<uint64_t>::max() / esize)
    throw Error(ErrorKind::Corrupt, path, where,
                "shape " + shape.dump() + ": the number of bytes overflows 64 bits");
  p.nbytes = numel * esize;

  const auto& off = j.at("data_offsets");
  if (!off.is_array() || off.size() != 2)
    throw Error(ErrorKind::Corrupt, path, where,
                "data_offsets: " + expected_found("[begin, end]", json_type(off)));
  p.begin = non_negative_int(path, where, off[0], "data_offsets begin", std::numeric_limits<uint64_t>::max());
  p.end = non_negative_int(path, where, off[1], "data_offsets end", std::numeric_limits<uint64_t>::max());
  if (p.end < p.begin)
    throw Error(
        ErrorKind::Corrupt, path, where,
        "data_offsets [" + std::to_string(p.begin) + ", " + std::to_string(p.end) + "]: end is before begin");
  if (p.end - p.begin != p.nbytes)
    throw Error(ErrorKind::Corrupt, path, where,
                "data_offsets [" + std::to_string(p.begin) + ", " + std::to_string(p.end) + "] hold " +
                    std::to_string(p.end - p.begin) + " bytes, but dtype " + dts + " and shape " +
                    shape.dump() + " need " + std::to_string(p.nbytes));
  return p;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  return open(MappedFile::open(path));
}

SafetensorsFile SafetensorsFile::open(const std::shared_ptr<const MappedFile>& file) {
  const std::string& path = file->path();
  const auto bytes = file->bytes();
  const uint64_t size = file->size();
  if (size < 8)
    throw Error(ErrorKind::Truncated, path, "offset 0",
                expected_found("at least 8 bytes (the header length)", std::to_string(size) + " bytes"));
  const uint64_t n = read_le64(bytes.data());
  if (n > kMaxHeaderSize)
    throw Error(ErrorKind::Corrupt, path, "header length",
                expected_found("at most " + std::to_string(kMaxHeaderSize) + " bytes", std::to_string(n)));
  if (n > size - 8)
    throw Error(ErrorKind::Truncated, path, "header length",
                expected_found("a header within the file (at most " + std::to_string(size - 8) + " bytes)",
                               std::to_string(n) + " bytes"));

  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<size_t>(n));
  if (const size_t bad = first_invalid_utf8(text); bad != std::string_view::npos)
    throw Error(ErrorKind::Corrupt, path, at_offset(8 + bad), "header is not valid UTF-8");
  const nlohmann::json header = parse_header(path, text);
  if (!header.is_object())
    throw Error(ErrorKind::Corrupt, path, "header", expected_found("a JSON object", json_type(header)));

  SafetensorsFile out;
  out.path = path;
  out.header_size = n;
  out.file = file;

  std::vector<Parsed> parsed;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        throw Error(ErrorKind::Corrupt, path, "__metadata__",
                    expected_found("an object of string values", json_type(value)));
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          throw Error(ErrorKind::Corrupt, path, "__metadata__ key " + in_quotes(mk),
                      expected_found("a string value", json_type(mv)));
        out.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    parsed.push_back(parse_entry(path, key, value));
  }

  std::stable_sort(parsed.begin(), parsed.end(), [](const Parsed& a, const Parsed& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const uint64_t buffer_size = size - 8 - n;
  uint64_t start = 0;
  for (const auto& p : parsed) {
    const std::string where = "tensor " + in_quotes(p.name);
    const std::string range = "data_offsets [" + std::to_string(p.begin) + ", " + std::to_string(p.end) + "]";
    if (p.begin < start)
      throw Error(ErrorKind::Corrupt, path, where,
                  range + " overlap the previous tensor, which ends at " + std::to_string(start));
    if (p.begin > start)
      throw Error(ErrorKind::Corrupt, path, where,
                  range + " leave a gap: " +
                      expected_found("begin " + std::to_string(start), std::to_string(p.begin)));
    if (p.end > buffer_size)
      throw Error(ErrorKind::Truncated, path, where,
                  range + " run past the end of the data (" + std::to_string(buffer_size) +
                      " bytes after the header)");
    start = p.end;
  }
  if (start != buffer_size)
    throw Error(ErrorKind::Corrupt, path, "data",
                expected_found("the tensors to cover all " + std::to_string(buffer_size) + " data bytes",
                               std::to_string(buffer_size - start) + " bytes after the last tensor"));

  out.entries.reserve(parsed.size());
  for (auto& p : parsed) {
    auto storage = std::make_shared<Storage>();
    storage->key = p.name;
    storage->dtype = p.dtype;
    storage->numel = p.nbytes / element_size(p.dtype);
    storage->map_from(file, 8 + n + p.begin);
    SafetensorsEntry e;
    e.name = std::move(p.name);
    e.begin = p.begin;
    e.end = p.end;
    e.tensor.dtype = p.dtype;
    e.tensor.strides = row_major_strides(p.shape);
    e.tensor.shape = std::move(p.shape);
    e.tensor.storage = std::move(storage);
    out.entries.push_back(std::move(e));
  }
  return out;
}

bool SafetensorsFile::looks_like_safetensors(std::span<const uint8_t> head, uint64_t file_size) {
  if (head.size() < 9 || file_size < 9) return false;
  const uint64_t n = read_le64(head.data());
  if (n < 2 || n > kMaxHeaderSize || n > file_size - 8) return false;
  // The header starts with '{' after optional JSON whitespace, and the next significant byte opens a key or
  // closes the object.
  size_t i = 8;
  const size_t limit = std::min<size_t>(head.size(), 8 + static_cast<size_t>(n));
  auto skip_ws = [&] {
    while (i < limit && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) ++i;
  };
  skip_ws();
  if (i >= limit || head[i] != '{') return false;
  ++i;
  skip_ws();
  return i >= limit || head[i] == '"' || head[i] == '}';
}

void sort_as_safetensors_saves(std::vector<NamedTensor>& tensors) {
  // ckptdoc's dtypes in the order of the safetensors crate's Dtype enum, which its serializer sorts by (C128,
  // which safetensors cannot store, last).
  static constexpr DType kOrder[] = {DType::Bool, DType::U8,   DType::I8,  DType::I16,
                                     DType::F16,  DType::BF16, DType::I32, DType::F32,
                                     DType::C64,  DType::F64,  DType::I64, DType::C128};
  const auto rank = [](DType d) {
    return std::find(std::begin(kOrder), std::end(kOrder), d) - std::begin(kOrder);
  };
  // Names in byte order: std::string compares chars as unsigned, as Rust's String does.
  std::stable_sort(tensors.begin(), tensors.end(), [&](const NamedTensor& x, const NamedTensor& y) {
    const auto rx = rank(x.tensor.dtype), ry = rank(y.tensor.dtype);
    return rx != ry ? rx > ry : x.name < y.name;
  });
}

void write_safetensors_file(const std::string& path, const std::vector<NamedTensor>& tensors,
                            const std::map<std::string, std::string>& metadata, FileIo& io) {
  std::unordered_set<std::string> names;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = header["__metadata__"];
    m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
  }
  uint64_t offset = 0;
  for (const auto& nt : tensors) {
    const std::string where = "tensor " + in_quotes(nt.name);
    if (nt.name == "__metadata__")
      throw Error(ErrorKind::InvalidRequest, path, where, "the name is reserved for the metadata");
    if (!names.insert(nt.name).second)
      throw Error(ErrorKind::InvalidRequest, path, where, "the name is given more than once");
    if (nt.tensor.dtype == DType::C128)
      throw Error(ErrorKind::Unsupported, path, where,
                  "dtype complex128 cannot be stored in safetensors (it has no C128)");
    const uint64_t nbytes = detail::checked_numel(path, nt.name, nt.tensor) * element_size(nt.tensor.dtype);
    auto& entry = header[nt.name];
    entry["dtype"] = std::string(safetensors_name(nt.tensor.dtype));
    entry["shape"] = nt.tensor.shape;
    entry["data_offsets"] = {offset, offset + nbytes};
    offset += nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::InvalidRequest, path, "header",
                std::string("a tensor name or metadata string is not valid UTF-8: ") + e.what());
  }
  text.append((kHeaderAlignment - text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  if (text.size() > kMaxHeaderSize)
    throw Error(ErrorKind::Unsupported, path, "header",
                "the header would be " + std::to_string(text.size()) + " bytes, over the limit of " +
                    std::to_string(kMaxHeaderSize));

  AtomicFile out(path, io);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write(len);
  out.write(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  for (const auto& nt : tensors) detail::stream_row_major(path, nt.name, nt.tensor, out);
  out.commit();
}

}  // namespace ckptdoc
