// publish_folder and verify_output (see publish.h): shared by the single-process and the MPI repair.
#include "repair/publish.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/deepspeed/checkpoint.h"
#include "ckptdoc/deepspeed/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair::detail {

void check_io(int err, const std::string& path, const char* call) {
  if (err != 0 && !(err == EEXIST && std::string(call) == "mkdir"))
    throw Error(ErrorKind::Io, path, "", std::string(call) + ": " + std::strerror(err));
}

void remove_tree_quietly(const std::string& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

void publish_folder(const std::string& partial, const std::string& out, FileIo& io, bool& renamed,
                    bool replace_existing, std::string* kept_aside) {
  // make_plan allowed an existing output (empty, or a checkpoint under --force). It is moved aside first and
  // removed only once the new one is in place, so a failure here leaves it whole.
  std::error_code ec;
  std::string aside;
  if (replace_existing && fs::exists(out, ec)) {
    aside = out + ".ckptdoc-replaced-" + std::to_string(::getpid());
    remove_tree_quietly(aside);
    check_io(io.rename(out, aside), out, "rename (moving the output being replaced aside)");
  }
  if (const int err = io.rename_noreplace(partial, out); err != 0) {
    if (!aside.empty()) io.rename(aside, out);
    if (err == EEXIST || err == ENOTEMPTY)
      throw Error(
          ErrorKind::OutputExists, out, "",
          "another process published an output here while ckptdoc wrote this one; that output is kept and "
          "this one was not published (run again with another output folder)");
    check_io(err, out, "rename");
  }
  fs::path parent = fs::path(out).parent_path();
  if (const int err = io.fsync_dir(parent.empty() ? std::string(".") : parent.string()); err != 0) {
    // Whether the rename is durable is unknown: no output of unknown durability stays, the old one comes
    // back.
    remove_tree_quietly(out);
    if (!aside.empty()) io.rename(aside, out);
    check_io(err, parent.string(), "fsync of directory");
  }
  renamed = true;
  if (kept_aside)
    *kept_aside = aside;
  else if (!aside.empty())
    remove_tree_quietly(aside);
}

void undo_publish(const std::string& out, const std::string& kept_aside, FileIo& io) {
  remove_tree_quietly(out);
  if (!kept_aside.empty()) io.rename(kept_aside, out);
  const fs::path parent = fs::path(out).parent_path();
  io.fsync_dir(parent.empty() ? std::string(".") : parent.string());
}

void verify_output(RepairResult& result, const RepairRequest& rq, Progress* progress,
                   bool only_present_files) {
  try {
    auto written = deepspeed::Checkpoint::open(result.output);
    analysis::DiagnoseOptions dopt;
    dopt.device = rq.device;
    if (progress) progress->set_stage("verifying", 0);
    result.verification = deepspeed::diagnose(*written, dopt, progress);
    result.invariant_failures = check_loader_invariants(*written, only_present_files);
    result.output_catalog = written->catalog();
  } catch (const Cancelled&) {
    result.state = OutputState::VerificationIncomplete;
    result.verification_cancelled = true;
    result.verification_error = "the verification was cancelled";
    return;
  } catch (const std::exception& e) {
    result.state = OutputState::VerificationIncomplete;
    result.verification_error = e.what();
    return;
  }
  result.state = OutputState::Verified;
  // With --allow-unsafe-pickle the output carries the input's pickles on purpose: still listed, not a
  // failure.
  result.verified_clean = std::none_of(
      result.verification.findings.begin(), result.verification.findings.end(),
      [&](const analysis::Finding& f) {
        return f.severity == analysis::Severity::Error &&
               !(rq.allow_unsafe_pickle && f.code == model::code_name(model::Code::UnsafePickle));
      });
}

}  // namespace ckptdoc::repair::detail
