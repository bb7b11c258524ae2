// A repair run by every process under mpirun (--repartition --world-size only): storage discovery, the
// shared work, and one publish per storage.
#include "sources/checkpoint/run_distributed.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/compute/exchange.h"
#include "ckptdoc/error.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "repair/publish.h"
#include "sources/checkpoint/runner.h"
#include "sources/checkpoint/verify_output.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair::detail {

namespace {

// Storage discovery under MPI: every process drops a marker in the shared partial folder name; the
// markers a process sees tell which processes write to the same storage as it does.
struct StorageView {
  int leader = 0;         // lowest process on this storage: writes the shared files and renames
  bool sees_all = false;  // every process on this storage (shared file system)
};
StorageView discover_storage(const std::string& partial) {
  const int procs = mpi_size(), me = mpi_rank();
  const std::string marker = partial + "/.ckptdoc-process-" + std::to_string(me);
  std::string err;
  try {
    std::error_code ec;
    fs::create_directories(partial, ec);
    if (ec) throw Error(ErrorKind::Io, partial, "", "cannot create the output folder: " + ec.message());
    std::ofstream(marker).put('\n');
    if (std::error_code mec; !fs::exists(marker, mec))
      throw Error(ErrorKind::Io, marker, "", "cannot write in the output folder");
  } catch (const std::exception& e) {
    err = e.what();
  }
  if (const std::string e = mpi_first_error(err); !e.empty()) throw Error("", "distributed repair", e);
  mpi_barrier();
  StorageView v;
  v.leader = me;
  int seen = 0;
  for (int p = 0; p < procs; ++p)
    if (std::error_code ec; fs::exists(partial + "/.ckptdoc-process-" + std::to_string(p), ec)) {
      v.leader = std::min(v.leader, p);
      ++seen;
    }
  v.sees_all = seen == procs;
  mpi_barrier();
  std::error_code ec;
  fs::remove(marker, ec);
  mpi_barrier();
  return v;
}

std::string rank_ranges(const Assignment& a) {
  std::vector<int> mine;
  for (int r = 0; r < static_cast<int>(a.new_owner.size()); ++r)
    if (a.owns(r)) mine.push_back(r);
  if (mine.empty()) return "none";
  return mine.size() == 1 ? std::to_string(mine.front())
                          : std::to_string(mine.front()) + "-" + std::to_string(mine.back());
}

}  // namespace

// Every process runs this (see RepairRequest::across_processes); each failure is agreed so that all
// processes stop together and leave nothing behind.
RepairResult run_repair_across_processes(const deepspeed::Checkpoint& ckpt, const std::string& output,
                                         const RepairRequest& rq, Progress* progress, FileIo& io) {
  bool agreed_failure = false;  // every process throws at the same agree(): they can meet once more
  auto agree = [&agreed_failure](const std::string& mine) {
    if (const std::string e = mpi_first_error(mine); !e.empty()) {
      agreed_failure = true;
      throw Error("", "distributed repair", e);
    }
  };
  RepairResult result;
  std::string err;
  try {
    result.plan = make_plan(ckpt, output, rq);
  } catch (const std::exception& e) {
    err = e.what();
  }
  agree(err);
  const std::string out = result.plan.output;
  int64_t pid0 = ::getpid();
  mpi_broadcast(&pid0, sizeof pid0, 0);
  const std::string partial = out + ".ckptdoc-partial-" + std::to_string(pid0);
  const StorageView storage = discover_storage(partial);
  const bool leader = storage.leader == mpi_rank();
  const int old_dp = ckpt.catalog().groups.empty()
                         ? ckpt.catalog().dp_world_size
                         : static_cast<int>(ckpt.catalog().groups.front().partitions.size());
  bool renamed = false;
  std::string replaced;  // the output --force replaces, kept aside until every storage has published
  try {
    // The old ranks' optimizer files as DeepSpeed names and finds them; the assignment knows no source.
    std::vector<std::string> old_rank_files;
    for (int r = 0; r < old_dp; ++r) {
      const deepspeed::CheckpointFile* f = ckpt.catalog().optim_file(r);
      old_rank_files.push_back(f ? f->abs_path : "");
    }
    const Assignment assignment = assign_ranks(old_rank_files, ckpt.catalog().tag_dir, *rq.world_size);
    std::string note;
    Runner runner(ckpt, rq, result.plan, progress, io);
    const std::vector<int> gpus =
        devices_for_process(mpi_local_rank(), mpi_local_size(), cuda_device_count());
    const auto exchanger = make_exchanger(runner.backend_kind(), gpus.empty() ? 0 : gpus.front(), &note);
    runner.distribute(&assignment, exchanger.get(), leader);
    try {
      runner.run(partial);
    } catch (const std::exception& e) {
      err = e.what();
    }
    agree(err);
    // Totals for the report: bytes that crossed between processes.
    ReductionArrays sums;
    sums.counts.push_back(runner.exchange_bytes());
    mpi_allreduce(sums);
    result.distribution =
        std::to_string(assignment.procs) + " processes, slices exchanged over " + exchanger->name() + " (" +
        std::to_string(sums.counts[0]) + " bytes between processes); this process (" +
        std::to_string(assignment.me) + ") wrote new rank(s) " + rank_ranges(assignment) +
        (storage.sees_all ? " on shared storage" : " on its own storage") + (note.empty() ? "" : "; " + note);
    // Each storage's first process publishes it: the same rename as one process does, once per storage.
    try {
      if (leader) publish_folder(partial, out, io, renamed, result.plan.output_existed, &replaced);
    } catch (const std::exception& e) {
      err = e.what();
    }
    agree(err);
  } catch (...) {
    // Another storage failed after this one published: its earlier output comes back, as it would have had
    // the failure been here.
    if (renamed)
      undo_publish(out, replaced, io);
    else
      remove_tree_quietly(partial);
    // mpirun stops the whole job once one process exits with an error: none exits before every one has
    // cleaned up.
    if (agreed_failure) mpi_barrier();
    throw;
  }
  if (!replaced.empty()) remove_tree_quietly(replaced);
  result.output = out;
  // Verification: a diagnosis across the processes, each reading the new rank files it sees (as diagnose
  // under mpirun does), and the loader invariants of the whole output where every process sees it all (a
  // shared file system), else of the files on each process's own storage.
  std::vector<uint8_t> all(static_cast<size_t>(mpi_size()));
  const uint8_t mine = storage.sees_all ? 1 : 0;
  mpi_allgather(&mine, 1, all.data());
  result.verified_as_whole = std::all_of(all.begin(), all.end(), [](uint8_t v) { return v == 1; });
  verify_output(result, rq, progress, /*only_present_files=*/!result.verified_as_whole);
  return result;
}

}  // namespace ckptdoc::repair::detail
