#include "integrity.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "ckptdoc/error.h"
#include "ckptdoc/io/sha256.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/parallel.h"
#include "repaired_copy.h"

namespace fs = std::filesystem;

namespace ckptdoc::megatron {
namespace {

constexpr size_t kReadChunk = size_t{1} << 20;  // megatron-core's _READ_CHUNK_SIZE
constexpr uintmax_t kMaxManifest = uintmax_t{64} << 20;

// A name the writer can have written: one entry of the folder (entry.name), nothing that leaves it.
bool plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

dcp::Problem unreadable(const std::string& why) {
  return dcp::problem(model::Code::MegatronIntegrityUnreadable, std::string(kIntegrity) + ": " + why,
                      kIntegrity);
}

struct Listed {
  std::string name;
  std::string sha256;
  uintmax_t size = 0;
  bool present = false;
};

// The manifest's files, or nullopt with a problem saying why it is not one.
std::optional<std::vector<Listed>> read_manifest(const fs::path& path, std::vector<dcp::Problem>& problems) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) {
    problems.push_back(unreadable("cannot be read (" + ec.message() + ")"));
    return std::nullopt;
  }
  if (size > kMaxManifest) {
    problems.push_back(unreadable(std::to_string(size) + " bytes, too large for a list of file hashes"));
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    problems.push_back(unreadable("cannot be read"));
    return std::nullopt;
  }
  const auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    problems.push_back(
        unreadable("not a JSON object; megatron-core writes {\"algorithm\": \"sha256\", "
                   "\"files\": {name: sha256}}, and its load with verify_integrity fails on it"));
    return std::nullopt;
  }
  // megatron-core reads a missing "algorithm" as sha256 and refuses any other
  if (j.contains("algorithm") && j["algorithm"] != "sha256") {
    problems.push_back(unreadable("algorithm " + j["algorithm"].dump() +
                                  ", not \"sha256\": megatron-core's load with verify_integrity refuses it"));
    return std::nullopt;
  }
  if (!j.contains("files") || !j["files"].is_object()) {
    problems.push_back(unreadable("no \"files\" object naming each file's sha256"));
    return std::nullopt;
  }
  std::vector<Listed> listed;
  for (const auto& [name, hash] : j["files"].items()) {
    if (!plain_name(name)) {
      problems.push_back(unreadable("lists '" + name + "', not a file name in the folder: not read"));
      continue;
    }
    if (!hash.is_string()) {
      problems.push_back(unreadable("the sha256 of '" + name + "' is " + hash.dump() + ", not a hex string"));
      continue;
    }
    listed.push_back({name, hash.get<std::string>()});
  }
  return listed;
}

}  // namespace

IntegrityCheck check_integrity(const std::string& iteration_dir, bool verify, Progress* progress) {
  IntegrityCheck out;
  const fs::path dir(iteration_dir);
  std::error_code ec;
  if (fs::symlink_status(dir / kIntegrity, ec).type() == fs::file_type::not_found) return out;
  out.present = true;
  auto manifest = read_manifest(dir / kIntegrity, out.problems);
  if (!manifest) return out;
  out.readable = true;
  out.listed = manifest->size() + out.problems.size();  // a name not read still counts as listed

  std::set<std::string> names;
  uint64_t total = 0;
  for (auto& f : *manifest) {
    names.insert(f.name);
    const fs::path p = dir / f.name;
    f.present = fs::is_regular_file(p, ec);  // follows links, as hashlib's open does
    if (!f.present) {
      out.problems.push_back(dcp::problem(
          model::Code::MegatronIntegrityMissing,
          "'" + f.name +
              "' is listed in integrity.json but is not in the folder (megatron-core's load with "
              "verify_integrity refuses the checkpoint)",
          f.name));
      continue;
    }
    f.size = fs::file_size(p, ec);
    total += ec ? 0 : f.size;
  }
  // megatron-core lists every regular file directly in the folder when it saves: one it lacks came later
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == kIntegrity || names.count(name) || !e.is_regular_file(ec)) continue;
    out.problems.push_back(dcp::problem(
        model::Code::MegatronIntegrityUnlisted,
        "'" + name +
            "' is in the folder but not in integrity.json, which megatron-core wrote listing every "
            "file it saved: it was added or renamed after the save, and no hash vouches for it",
        name));
  }
  if (!verify) return out;

  if (progress) progress->set_stage("verifying integrity.json sha256", total);
  std::mutex m;
  std::vector<dcp::Problem> found;
  size_t matched = 0;
  parallel_for(manifest->size(), 0, [&](size_t i, unsigned) {
    const Listed& f = (*manifest)[i];
    if (!f.present) return;
    if (progress) progress->check();
    std::optional<dcp::Problem> problem;
    try {
      const std::string got = io::sha256_of_file((dir / f.name).string(), kReadChunk, [&](size_t n) {
        if (!progress) return;
        progress->add(n);
        progress->check();
      });
      if (got != f.sha256)
        problem = dcp::problem(model::Code::MegatronIntegrityMismatch,
                               "'" + f.name + "': sha256 " + got + ", integrity.json says " + f.sha256 +
                                   ": its bytes changed after megatron-core saved it (disk, copy or transfer "
                                   "corruption, or an edit); restore this file from another copy",
                               f.name);
    } catch (const Error& e) {
      problem = dcp::problem(model::Code::MegatronIntegrityMissing,
                             "'" + f.name + "' is listed in integrity.json but cannot be read: " + e.what(),
                             f.name);
    }
    const std::lock_guard lock(m);
    if (problem)
      found.push_back(std::move(*problem));
    else
      ++matched;
  });
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.file < b.file; });
  out.problems.insert(out.problems.end(), found.begin(), found.end());
  out.matched = matched;
  out.verified = true;
  return out;
}

}  // namespace ckptdoc::megatron
