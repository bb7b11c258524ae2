#include "sources/checkpoint/distributed_repartition.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"
#include "ckptdoc/sources/checkpoint/exchange_plan.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair::detail {
namespace {

constexpr int64_t kMaxPiece = int64_t{1} << 24;  // elements per piece: bounds one read
constexpr int64_t kRound = int64_t{1} << 26;     // elements per round in all (256 MiB of floats)

// Every process gets the same error, or none: see mpi_first_error.
void agree(const std::string& mine) {
  if (const std::string e = mpi_first_error(mine); !e.empty()) throw Error("", "distributed re-partition", e);
}

// A new partition being assembled: a sparse file of zeros that received pieces are written into.
class ScratchFile {
 public:
  ScratchFile(std::string path, int64_t numel) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0)
      throw Error(ErrorKind::Io, path_, "",
                  std::string("cannot create scratch file: ") + std::strerror(errno));
    if (::ftruncate(fd_, static_cast<off_t>(numel) * 4) != 0)
      throw Error(ErrorKind::Io, path_, "", std::string("cannot size scratch file: ") + std::strerror(errno));
  }
  ~ScratchFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  void write(int64_t offset, const float* data, int64_t n) {
    auto* p = reinterpret_cast<const char*>(data);
    size_t left = static_cast<size_t>(n) * 4;
    off_t at = static_cast<off_t>(offset) * 4;
    while (left > 0) {
      const ssize_t w = ::pwrite(fd_, p, left, at);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        throw Error(ErrorKind::Io, path_, "",
                    std::string("cannot write scratch file: ") + std::strerror(w < 0 ? errno : ENOSPC));
      p += w;
      at += w;
      left -= static_cast<size_t>(w);
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

std::string safe_name(const std::string& field) {
  std::string s;
  for (char c : field) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

}  // namespace

Assignment assign_ranks(const std::vector<std::string>& old_rank_files, const std::string& tag_dir,
                        int new_dp) {
  Assignment a;
  a.procs = mpi_size();
  a.me = mpi_rank();
  const int old_dp = static_cast<int>(old_rank_files.size());
  std::vector<uint8_t> mine(static_cast<size_t>(old_dp), 0);
  for (int r = 0; r < old_dp; ++r) {
    const std::string& file = old_rank_files[static_cast<size_t>(r)];
    std::error_code ec;
    mine[static_cast<size_t>(r)] = !file.empty() && fs::is_regular_file(file, ec) ? 1 : 0;
    if (mine[static_cast<size_t>(r)] && a.template_rank < 0) a.template_rank = r;
  }
  std::vector<uint8_t> all(mine.size() * static_cast<size_t>(a.procs));
  mpi_allgather(mine.data(), mine.size(), all.data());
  std::string err;
  std::vector<uint64_t> load(static_cast<size_t>(a.procs), 0);
  for (int r = 0; r < old_dp; ++r) {
    int best = -1;
    for (int p = 0; p < a.procs; ++p)
      if (all[static_cast<size_t>(p) * mine.size() + static_cast<size_t>(r)] &&
          (best < 0 || load[static_cast<size_t>(p)] < load[static_cast<size_t>(best)]))
        best = p;
    if (best < 0 && err.empty())
      err = "the optimizer file of old dp rank " + std::to_string(r) + " is on no process (" + tag_dir +
            "); every old rank must be readable by some process";
    a.old_holder.push_back(best);
    if (best >= 0) ++load[static_cast<size_t>(best)];
  }
  if (err.empty() && a.template_rank < 0)
    err = "process " + std::to_string(a.me) + " sees none of the optimizer files in " + tag_dir +
          "; each process needs at least one, with the model file, for the metadata of the files it writes";
  agree(err);
  // Process p writes ranks [ceil(p*n/P), ceil((p+1)*n/P)): the owner of r is floor(r*P/n).
  for (int r = 0; r < new_dp; ++r)
    a.new_owner.push_back(static_cast<int>(static_cast<int64_t>(r) * a.procs / new_dp));
  return a;
}

ExchangedPartitions::~ExchangedPartitions() {
  maps_.clear();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

deepspeed::FloatFill ExchangedPartitions::fill(int rank, int group, const std::string& field) const {
  const auto it = maps_.find({rank, group, field});
  if (it == maps_.end())
    throw Error(dir_, "rank " + std::to_string(rank) + " group " + std::to_string(group) + " " + field,
                "not assembled by this process");
  std::shared_ptr<const MappedFile> m = it->second;
  return [m](int64_t first, int64_t count, float* out) {
    const auto bytes =
        m->slice(static_cast<uint64_t>(first) * 4, static_cast<uint64_t>(count) * 4, "partition range");
    std::memcpy(out, bytes.data(), bytes.size());
  };
}

class PartitionAssembler {
 public:
  static std::unique_ptr<ExchangedPartitions> run(const StateReader& reader,
                                                  const std::vector<deepspeed::GroupLayout>& new_groups,
                                                  const std::vector<std::vector<std::string>>& fields,
                                                  bool zero3, const Assignment& a,
                                                  const std::string& scratch_dir, Exchanger& exchanger,
                                                  Progress* progress) {
    auto out = std::make_unique<ExchangedPartitions>(scratch_dir);
    std::vector<Piece> pieces;
    std::string err;
    try {
      std::error_code ec;
      fs::create_directories(scratch_dir, ec);
      if (ec)
        throw Error(ErrorKind::Io, scratch_dir, "", "cannot create the scratch folder: " + ec.message());
      pieces = exchange_pieces(reader.layout().groups, new_groups, zero3, kMaxPiece);
    } catch (const std::exception& e) {
      err = e.what();
    }
    agree(err);
    const auto procs = static_cast<size_t>(a.procs);
    int64_t total = 0;
    for (size_t gi = 0; gi < new_groups.size(); ++gi) total += static_cast<int64_t>(fields[gi].size());
    if (progress)
      progress->set_stage("exchanging partitions between processes", static_cast<uint64_t>(total));
    std::vector<float> send, recv;
    size_t group_start = 0;
    for (size_t gi = 0; gi < new_groups.size(); ++gi) {
      size_t group_end = group_start;
      while (group_end < pieces.size() && pieces[group_end].new_group == static_cast<int>(gi)) ++group_end;
      for (const std::string& field : fields[gi]) {
        std::map<int, std::unique_ptr<ScratchFile>> files;  // new rank -> its partition of this group/field
        try {
          for (int r = 0; r < static_cast<int>(a.new_owner.size()); ++r)
            if (a.owns(r))
              files[r] = std::make_unique<ScratchFile>(
                  scratch_dir + "/r" + std::to_string(r) + ".g" + std::to_string(gi) + "." + safe_name(field),
                  new_groups[gi].partition_numel);
        } catch (const std::exception& e) {
          err = e.what();
        }
        agree(err);
        for (size_t lo = group_start; lo < group_end;) {
          size_t hi = lo;
          for (int64_t n = 0; hi < group_end && n + pieces[hi].len <= kRound; ++hi) n += pieces[hi].len;
          if (hi == lo) ++hi;
          std::vector<size_t> sc(procs, 0), rc(procs, 0);
          for (size_t i = lo; i < hi; ++i) {
            const Piece& p = pieces[i];
            const auto from = static_cast<size_t>(a.old_holder[static_cast<size_t>(p.old_rank)]);
            const auto to = static_cast<size_t>(a.new_owner[static_cast<size_t>(p.new_rank)]);
            if (from == static_cast<size_t>(a.me)) sc[to] += static_cast<size_t>(p.len);
            if (to == static_cast<size_t>(a.me)) rc[from] += static_cast<size_t>(p.len);
          }
          std::vector<size_t> s_at(procs, 0), r_at(procs, 0);
          for (size_t p = 1; p < procs; ++p) {
            s_at[p] = s_at[p - 1] + sc[p - 1];
            r_at[p] = r_at[p - 1] + rc[p - 1];
          }
          send.resize(s_at.back() + sc.back());
          recv.resize(r_at.back() + rc.back());
          try {
            if (progress) progress->check();
            for (size_t i = lo; i < hi; ++i) {
              const Piece& p = pieces[i];
              if (a.old_holder[static_cast<size_t>(p.old_rank)] != a.me) continue;
              const auto to = static_cast<size_t>(a.new_owner[static_cast<size_t>(p.new_rank)]);
              reader.read(field, p.param, p.first, p.len, send.data() + s_at[to]);
              s_at[to] += static_cast<size_t>(p.len);
            }
          } catch (const std::exception& e) {
            err = e.what();
          }
          agree(err);
          exchanger.alltoallv(send.data(), sc, recv.data(), rc);
          try {
            for (size_t i = lo; i < hi; ++i) {
              const Piece& p = pieces[i];
              if (a.new_owner[static_cast<size_t>(p.new_rank)] != a.me) continue;
              const auto from = static_cast<size_t>(a.old_holder[static_cast<size_t>(p.old_rank)]);
              files.at(p.new_rank)->write(p.new_offset, recv.data() + r_at[from], p.len);
              r_at[from] += static_cast<size_t>(p.len);
              (from == static_cast<size_t>(a.me) ? out->bytes_kept : out->bytes_received) +=
                  static_cast<uint64_t>(p.len) * 4;
            }
          } catch (const std::exception& e) {
            err = e.what();
          }
          agree(err);
          lo = hi;
        }
        try {
          for (auto& [r, f] : files) {
            const std::string path = f->path();
            f.reset();
            out->maps_[{r, static_cast<int>(gi), field}] = MappedFile::open(path);
          }
        } catch (const std::exception& e) {
          err = e.what();
        }
        agree(err);
        if (progress) progress->add(1);
      }
      group_start = group_end;
    }
    return out;
  }
};

std::unique_ptr<ExchangedPartitions> exchange_partitions(
    const StateReader& reader, const std::vector<deepspeed::GroupLayout>& new_groups,
    const std::vector<std::vector<std::string>>& fields, bool zero3, const Assignment& assignment,
    const std::string& scratch_dir, Exchanger& exchanger, Progress* progress) {
  return PartitionAssembler::run(reader, new_groups, fields, zero3, assignment, scratch_dir, exchanger,
                                 progress);
}

}  // namespace ckptdoc::repair::detail
