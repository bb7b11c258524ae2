// run_repair: writes the repaired checkpoint into "<output>.ckptdoc-partial-<pid>" (io::PartialFolder; every
// file through AtomicFile on the injectable FileIo), renames it into place, then re-opens and re-diagnoses
// it.
#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/io/deferred_sync.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "io/partial_folder.h"
#include "repair/publish.h"
#include "sources/checkpoint/run_distributed.h"
#include "sources/checkpoint/runner.h"
#include "sources/checkpoint/verify_output.h"
#include "sources/deepspeed/output_folder_check.h"

namespace ckptdoc::repair {

RepairResult run_repair(const deepspeed::Checkpoint& ckpt, const std::string& output,
                        const RepairRequest& request, Progress* progress, FileIo& io) {
  using namespace detail;
  const RepairRequest rq = with_default_lp_source(ckpt, request);
  if (rq.across_processes && mpi_size() > 1)
    return run_repair_across_processes(ckpt, output, rq, progress, io);
  RepairResult result;
  result.plan = make_plan(ckpt, output, rq);
  const std::string out = result.plan.output;
  deepspeed::detail::remove_dead_leftovers(out);  // an earlier run killed part way
  bool renamed = false;
  {
    io::PartialFolder partial(out, io);  // removed on failure: nothing half-done stays behind
    // A tensor/pipeline-parallel job: every model-parallel rank writes its own files; mp rank 0 last
    // (`latest`).
    {
      // Nothing in the partial folder needs to be durable before all of it is: the fsyncs are made together
      // before the rename (a tag folder of many small files was copied at ~135 files/s, one fsync each).
      ckptdoc::io::DeferredSyncIo deferred(io);
      for (int m = ckpt.slice_count() - 1; m >= 0; --m) {
        const auto slice = ckpt.slice(m);
        Runner runner(*slice, rq, result.plan, progress, deferred);
        runner.run(partial.path());
      }
      deferred.flush();
    }
    if (progress) progress->check();  // a Cancel after the last write's own check: nothing is published
    publish_folder(partial.path(), out, io, renamed,
                   result.plan.output_existed);  // on failure, `out` is as it was
    partial.keep();
  }
  // From here on the output is in place: whatever happens to the verification, this returns and says so.
  result.output = out;
  verify_output(result, rq, progress, /*only_present_files=*/false);
  return result;
}

}  // namespace ckptdoc::repair
