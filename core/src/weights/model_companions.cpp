// Copies a model folder's config and tokenizer files beside exported weights (see
// weights/model_companions.h).
#include "ckptdoc/weights/model_companions.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "ckptdoc/error.h"
#include "ckptdoc/io/file_io.h"

namespace fs = std::filesystem;

namespace ckptdoc::weights {
namespace {

// What from_pretrained and AutoTokenizer / AutoProcessor read from a model folder besides the weights; the
// Trainer's own state (trainer_state.json, training_args.bin, rng_state_*.pth, optimizer and scheduler files)
// is not part of a model.
constexpr std::array kCompanions = {"config.json",
                                    "generation_config.json",
                                    "tokenizer.json",
                                    "tokenizer_config.json",
                                    "special_tokens_map.json",
                                    "added_tokens.json",
                                    "tokenizer.model",
                                    "spiece.model",
                                    "vocab.json",
                                    "vocab.txt",
                                    "merges.txt",
                                    "chat_template.jinja",
                                    "chat_template.json",
                                    "preprocessor_config.json",
                                    "processor_config.json"};

// Companion files are a few kB (a tokenizer.json a few MB): read whole.
std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, p.string(), "", "cannot be read");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(ErrorKind::Io, p.string(), "", "read failed");
  return bytes;
}

}  // namespace

std::vector<std::string> model_companions(const std::string& folder) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(folder) / "config.json", ec)) return {};
  std::vector<std::string> names;
  for (const char* name : kCompanions)
    if (fs::is_regular_file(fs::path(folder) / name, ec)) names.emplace_back(name);
  return names;
}

CompanionCopy copy_companions(const std::string& from, const std::string& to,
                              const std::vector<std::string>& names) {
  CompanionCopy result;
  for (const auto& name : names) {
    const std::string bytes = read_all(fs::path(from) / name);
    const fs::path target = fs::path(to) / name;
    std::error_code ec;
    if (fs::exists(target, ec)) {
      (read_all(target) == bytes ? result.same : result.different).push_back(name);
      continue;
    }
    // AtomicFile never replaces a path that was absent when it was opened: a file another process creates
    // meanwhile is kept (commit throws OutputExists), and then it counts as already there.
    AtomicFile out(target.string());
    out.write(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    try {
      out.commit();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::OutputExists) throw;
      result.different.push_back(name);
      continue;
    }
    result.copied.push_back(name);
  }
  return result;
}

}  // namespace ckptdoc::weights
