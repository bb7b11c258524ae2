#include "sources/deepspeed/checksums.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>

#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/parallel.h"
#include "ckptdoc/short_list.h"
#include "ckptdoc/sources/deepspeed/rank_owners.h"

namespace ckptdoc::deepspeed::detail {
namespace {

struct Record {
  size_t file = 0;
  const ZipEntry* entry = nullptr;
};

std::string hex32(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", v);
  return b;
}

// Checks `records` on `threads` threads, appending "'name' (what)" to bad[file] for each mismatch.
void check_records(const std::vector<std::unique_ptr<ZipReader>>& zips, const std::vector<Record>& records,
                   unsigned threads, Progress* progress, std::vector<std::vector<std::string>>& bad) {
  std::mutex bad_mutex;
  const unsigned workers = threads ? threads : default_workers();
  // A cancel (progress->check) stops handing out records and is rethrown once every worker stopped.
  parallel_for(records.size(), workers, [&](size_t i, unsigned) {
    if (progress) progress->check();
    const Record& r = records[i];
    std::string what;
    try {
      const uint32_t got = crc32(zips[r.file]->data(*r.entry));
      if (got != r.entry->crc32)
        what = "'" + r.entry->name + "' (CRC-32 " + hex32(got) + ", stored " + hex32(r.entry->crc32) + ")";
    } catch (const Error& e) {
      what = "'" + r.entry->name + "' (" + e.detail() + ")";
    }
    if (!what.empty()) {
      std::lock_guard<std::mutex> lock(bad_mutex);
      bad[r.file].push_back(std::move(what));
    }
    if (progress) progress->add(r.entry->compressed_size);
  });
}

}  // namespace

std::vector<Problem> verify_checksums(const Catalog& catalog, unsigned threads, Progress* progress) {
  std::vector<std::unique_ptr<ZipReader>> zips(catalog.files.size());
  std::vector<Record> records;
  uint64_t total = 0;
  // Under MPI each process checks the files of the dp ranks it owns (rank_owners), and process 0
  // the files of no rank; diagnose then gathers every process's problems.
  const int procs = mpi_size();
  RankOwners owners;
  if (procs > 1)
    owners = rank_owners(catalog, catalog.groups.empty()
                                      ? catalog.dp_world_size
                                      : static_cast<int>(catalog.groups.front().partitions.size()));
  auto mine = [&](size_t f) {
    if (procs == 1) return true;
    const int r = catalog.files[f].dp_rank;
    return r >= 0 && r < static_cast<int>(owners.owner.size()) ? owners.mine(r) : owners.me == 0;
  };
  for (size_t f = 0; f < catalog.files.size(); ++f) {
    if (!mine(f)) continue;
    try {
      auto mapped = MappedFile::open(catalog.files[f].abs_path);
      if (!ZipReader::looks_like_zip(mapped->bytes())) continue;
      zips[f] = std::make_unique<ZipReader>(mapped);
    } catch (const Error&) {
      continue;  // the catalog already reports files it cannot read
    }
    for (const ZipEntry& e : zips[f]->entries()) {
      records.push_back({f, &e});
      total += e.compressed_size;
    }
  }
  // big records first so the threads finish together
  std::stable_sort(records.begin(), records.end(), [](const Record& a, const Record& b) {
    return a.entry->compressed_size > b.entry->compressed_size;
  });
  if (progress) progress->set_stage("verifying checksums", total);

  std::vector<std::vector<std::string>> bad(
      catalog.files.size());  // per file: what is wrong with which record
  check_records(zips, records, threads, progress, bad);
  std::vector<Problem> out;
  for (size_t f = 0; f < bad.size(); ++f) {
    if (bad[f].empty()) continue;
    std::sort(bad[f].begin(), bad[f].end());
    const std::string list = short_list(bad[f]);
    const auto& file = catalog.files[f];
    Problem p(model::Code::ChecksumMismatch);
    p.file = file.path;
    if (file.dp_rank >= 0) p.ranks = {file.dp_rank};
    p.message = file.path + ": " + std::to_string(bad[f].size()) + " of " +
                std::to_string(zips[f]->entries().size()) +
                " records no longer match the checksum torch wrote: " + list +
                ". The bytes changed after the file was saved (disk, copy or transfer corruption); " +
                "restore this file from another copy. ckptdoc cannot tell which values are wrong.";
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace ckptdoc::deepspeed::detail
