#pragma once
// One error type for every failure ckptdoc reports: it names the file, where in it, what was expected and
// what was found, so a user can act on the message without a debugger, and its kind, so a caller (or a test)
// can act on what went wrong without reading the message. The core throws nothing else to its callers
// (Cancelled aside, which is not a failure). Header-only constructors: the CUDA library throws it too.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace ckptdoc {

// What went wrong, coarsely. Pick the kind from the cause, not from the place that noticed it.
enum class ErrorKind : uint8_t {
  Other,           // not classified yet (the three-argument constructor), or an internal invariant broke
  Io,              // the operating system refused: open, read, write, rename, mmap; disk full
  NotFound,        // a file, folder, tag, param or key that the request or the format needs is absent
  Truncated,       // the file is shorter than its header, index or metadata says
  Corrupt,         // bytes that contradict the format: bad magic, impossible sizes, counts or offsets
  UnsafePickle,    // a pickle that would run code on load (torch.load would call what it names)
  Unsupported,     // a valid format, version, layout or dtype that ckptdoc does not read or write
  Inconsistent,    // files (or records) of one checkpoint, each readable, that disagree
  InvalidRequest,  // bad options or arguments to a core request (says which and why)
  PathEscape,      // a path from the data or a request (`latest`, a tag) that would leave its folder
  OutputExists,    // an output that would replace files ckptdoc did not create
  Device,          // a compute backend (CUDA, NCCL, MPI) failed or is not available
};

// A stable lowercase name for logs, JSON and tests: "io", "not-found", "unsafe-pickle", ...
constexpr std::string_view kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::Other:
      return "other";
    case ErrorKind::Io:
      return "io";
    case ErrorKind::NotFound:
      return "not-found";
    case ErrorKind::Truncated:
      return "truncated";
    case ErrorKind::Corrupt:
      return "corrupt";
    case ErrorKind::UnsafePickle:
      return "unsafe-pickle";
    case ErrorKind::Unsupported:
      return "unsupported";
    case ErrorKind::Inconsistent:
      return "inconsistent";
    case ErrorKind::InvalidRequest:
      return "invalid-request";
    case ErrorKind::PathEscape:
      return "path-escape";
    case ErrorKind::OutputExists:
      return "output-exists";
    case ErrorKind::Device:
      return "device";
  }
  return "other";
}

namespace error_detail {
// "file: where: what"; without a file (a request option, bytes in memory) the message starts at `where`.
inline std::string compose(const std::string& file, const std::string& where, const std::string& what) {
  std::string msg = file;
  for (const auto* part : {&where, &what})
    if (!part->empty()) msg += (msg.empty() ? "" : ": ") + *part;
  return msg;
}
}  // namespace error_detail

class Error : public std::runtime_error {
 public:
  // `where` is a human location: "offset 1234", "record 'archive/data/3'", "key 'module'".
  Error(ErrorKind kind, std::string file, std::string where, std::string what)
      : std::runtime_error(error_detail::compose(file, where, what)),
        kind_(kind),
        file_(std::move(file)),
        where_(std::move(where)),
        what_(std::move(what)) {}
  // Unclassified (ErrorKind::Other); new code passes a kind.
  Error(std::string file, std::string where, std::string what)
      : Error(ErrorKind::Other, std::move(file), std::move(where), std::move(what)) {}
  ErrorKind kind() const { return kind_; }
  const std::string& file() const { return file_; }
  const std::string& where() const { return where_; }
  const std::string& detail() const { return what_; }
  // Returns a copy with the file name filled in when the thrower did not know it.
  Error with_file(const std::string& file) const {
    return file_.empty() ? Error(kind_, file, where_, what_) : *this;
  }

 private:
  ErrorKind kind_;
  std::string file_, where_, what_;
};

// Formats "expected X, found Y" consistently.
std::string expected_found(const std::string& expected, const std::string& found);
std::string at_offset(uint64_t offset);

}  // namespace ckptdoc
