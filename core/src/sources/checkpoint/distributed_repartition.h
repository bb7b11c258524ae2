#pragma once
// A re-partition spread over MPI processes, for rank files that live where they were saved (node-local
// storage): each process reads the old optimizer files it has, sends every slice to the process that
// writes the new partition holding it (exchange_plan.h), and writes the new ranks it owns.
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ckptdoc/compute/exchange.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "ckptdoc/task/progress.h"
#include "sources/deepspeed/param_readers.h"

namespace ckptdoc::repair::detail {

using deepspeed::detail::StateReader;

// Who does what. Collective to build; the same on every process.
struct Assignment {
  int procs = 1, me = 0;
  std::vector<int> old_holder;  // per old dp rank: the process that reads its optimizer file
  std::vector<int> new_owner;   // per new dp rank: the process that writes its files
  int template_rank = -1;       // an old dp rank whose files this process has (metadata for its new files)
  bool owns(int new_rank) const { return new_owner[static_cast<size_t>(new_rank)] == me; }
};
// Each process offers the old optimizer files in its own checkpoint folder `tag_dir`: `old_rank_files` has
// one path per old dp rank, that rank's optimizer file as this process's catalog lists it ("" where it lists
// none). An old rank goes to the least loaded process that has its file. New ranks go in contiguous blocks
// (process p writes ranks [p*n/P, (p+1)*n/P)), which is how mpirun places consecutive ranks on a node.
// Throws, on every process, when an old rank's file is on no process or a process has none at all. Knows no
// source: the caller names the files.
Assignment assign_ranks(const std::vector<std::string>& old_rank_files, const std::string& tag_dir,
                        int new_dp);

// The new partitions of the ranks this process owns, assembled in scratch files (zeros where no piece
// lands: padding) and read back by the writer.
class ExchangedPartitions {
 public:
  explicit ExchangedPartitions(std::string scratch_dir) : dir_(std::move(scratch_dir)) {}
  ~ExchangedPartitions();  // removes the scratch files and folder
  ExchangedPartitions(const ExchangedPartitions&) = delete;
  ExchangedPartitions& operator=(const ExchangedPartitions&) = delete;

  // Elements of `field` of `rank`'s partition of new group `group`; throws when this process does not own it.
  deepspeed::FloatFill fill(int rank, int group, const std::string& field) const;
  uint64_t bytes_received = 0;  // floats that came from other processes, in bytes
  uint64_t bytes_kept = 0;      // floats this process sent to itself, in bytes

 private:
  friend class PartitionAssembler;
  std::string dir_;
  std::map<std::tuple<int, int, std::string>, std::shared_ptr<const MappedFile>> maps_;
};

// Runs the exchange: for every new group and each of its fields ("fp32", then optimizer state keys), in
// rounds of bounded size, every process reads the pieces it holds, the exchanger moves them, and every
// process writes what it received into its scratch files. Collective; an error on any process stops all.
std::unique_ptr<ExchangedPartitions> exchange_partitions(
    const StateReader& reader, const std::vector<deepspeed::GroupLayout>& new_groups,
    const std::vector<std::vector<std::string>>& fields, bool zero3, const Assignment& assignment,
    const std::string& scratch_dir, Exchanger& exchanger, Progress* progress);

}  // namespace ckptdoc::repair::detail
