// `ckptdoc diagnose` of a checkpoint with ~20k params (written by ckptdoc's own synthetic writer, ZeRO-2 fp16
// dp 2): what the per-param reports cost in memory, and the CLI's peak RSS and wall time beside `cat` of the
// same files, warm cache and cold (pages evicted with POSIX_FADV_DONTNEED before each run), medians of ROUNDS
// interleaved runs. Each --baseline names another ckptdoc binary (e.g. one built from main) measured in the
// same rounds.
//
// Reports: a deep copy of the diagnosis' params is made in this process and the heap it allocates is counted
// (mallinfo2), so malloc's own overhead is included; beside it what the same reports took with dense
// histograms (2 KB per log histogram, 144 bytes per ULP histogram inline, as before they were packed).
//
// Beside them, two floors run as child processes of this program over the same files: `--walk` steps over
// every opcode of each file's data.pkl and builds nothing (the least any reader of these pickles does), and
// `--unpickle` opens each file with TorchFile::open (zip directory, ckptdoc's unpickler, storages mapped:
// the tree, without the catalog built on it).
// `ckptdoc inspect` (the catalog alone) and each baseline's inspect run too.
//
// Usage: bench_diagnose_memory [--ckptdoc PATH] [--baseline PATH]... [--rounds N] [--layers N] [--hidden N]
//                              [--dir DIR (reuse or write the checkpoint there)]
//        bench_diagnose_memory --walk|--unpickle FILE...   (one floor, as the rows above run it)
#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/executable_dir.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/deepspeed/synthesize.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

struct Run {
  double seconds = 0;
  double peak_mib = 0;
  int status = 0;
};

// Runs argv with stdout to /dev/null; wall time and the child's own peak RSS (wait4).
Run run(const std::vector<std::string>& argv) {
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    std::exit(2);
  }
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    std::vector<char*> a;
    a.reserve(argv.size() + 1);
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.peak_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

void evict(const std::vector<std::string>& files) {
  for (const auto& f : files) {
    const int fd = open(f.c_str(), O_RDONLY);
    if (fd < 0) continue;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

size_t heap_in_use() {
  return mallinfo2().uordblks;
}

// The data.pkl record of a torch zip file.
std::span<const uint8_t> data_pkl(const ZipReader& zip) {
  for (const auto& e : zip.entries())
    if (e.name.ends_with("/data.pkl")) return zip.data(e);
  return {};
}

// Steps over every opcode of a pickle, building nothing; returns the opcode count (or -1 when malformed).
long walk_opcodes(std::span<const uint8_t> p) {
  size_t pos = 0;
  long ops = 0;
  auto le = [&](size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n && pos + i < p.size(); ++i) v |= static_cast<uint64_t>(p[pos + i]) << (8 * i);
    pos += n;
    return v;
  };
  auto line = [&] {
    while (pos < p.size() && p[pos] != '\n') ++pos;
    ++pos;
  };
  while (pos < p.size()) {
    const uint8_t op = p[pos++];
    ++ops;
    switch (op) {
      case '.':
        return ops;
      case 0x80:
      case 'K':
      case 'q':
      case 'h':
      case 0x82:  // PROTO BININT1 BINPUT BINGET EXT1
        pos += 1;
        break;
      case 'M':
      case 0x83:  // BININT2 EXT2
        pos += 2;
        break;
      case 'J':
      case 'r':
      case 'j':
      case 0x84:  // BININT LONG_BINPUT LONG_BINGET EXT4
        pos += 4;
        break;
      case 'G':
      case 0x95:  // BINFLOAT FRAME
        pos += 8;
        break;
      case 'U':
      case 'C':
      case 0x8c:
      case 0x8a:  // 1-byte length, then the bytes
        pos += le(1);
        break;
      case 'X':
      case 'B':
      case 'T':
      case 0x8b:  // 4-byte length
        pos += le(4);
        break;
      case 0x8d:
      case 0x8e:
      case 0x96:  // 8-byte length
        pos += le(8);
        break;
      case 'c':
      case 'i':  // GLOBAL, INST: two lines
        line();
        line();
        break;
      case 'I':
      case 'L':
      case 'F':
      case 'S':
      case 'V':
      case 'P':
      case 'p':
      case 'g':
        line();
        break;
      default:
        break;  // no argument
    }
  }
  return -1;
}

// The floors: --walk or --unpickle over each file's data.pkl; exit status 0 when all were read.
int floor_main(const std::string& mode, int argc, char** argv) {
  long total = 0;
  for (int i = 2; i < argc; ++i) {
    if (mode == "--walk") {
      const ZipReader zip(MappedFile::open(argv[i]));
      const long n = walk_opcodes(data_pkl(zip));
      if (n < 0) return 1;
      total += n;
    } else {
      total += static_cast<long>(TorchFile::open(argv[i]).storages.size());
    }
  }
  std::printf("%ld\n", total);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "--walk" || std::string(argv[1]) == "--unpickle"))
    return floor_main(argv[1], argc, argv);
  std::string ckptdoc = (fs::path(io::executable_dir()) / "../../app/ckptdoc").lexically_normal().string();
  std::vector<std::string> baselines;
  std::string dir;
  int rounds = 5, layers = 1666;
  int64_t hidden = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--ckptdoc")
      ckptdoc = v;
    else if (k == "--baseline")
      baselines.push_back(v);
    else if (k == "--rounds")
      rounds = std::stoi(v);
    else if (k == "--layers")
      layers = std::stoi(v);
    else if (k == "--hidden")
      hidden = std::stoll(v);
    else if (k == "--dir")
      dir = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const bool own_dir = dir.empty();
  if (own_dir) {
    char tmpl[] = "/tmp/bench_diagnose_memory.XXXXXX";
    if (!mkdtemp(tmpl)) return 2;
    dir = std::string(tmpl) + "/ckpt";
  }
  // Written in a child process, and the CLI runs measured before this process diagnoses anything: a child's
  // peak RSS (wait4) starts from what its parent has resident when it forks.
  if (!fs::exists(fs::path(dir) / "latest")) {
    const pid_t pid = fork();
    if (pid == 0) {
      deepspeed::SynthOptions s;
      s.stage = 2;
      s.dtype = DType::F16;
      s.dp = 2;
      s.layers = layers;
      s.hidden = hidden;
      deepspeed::write_synthetic_checkpoint(dir, s);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (status != 0) return 2;
  }
  std::string tag;
  {
    std::FILE* f = std::fopen((fs::path(dir) / "latest").c_str(), "r");
    char buf[256] = {};
    const bool ok = f && std::fgets(buf, sizeof buf, f);
    if (f) std::fclose(f);
    if (!ok) return 2;
    tag = buf;
    while (!tag.empty() && (tag.back() == '\n' || tag.back() == ' ')) tag.pop_back();
  }
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(fs::path(dir) / tag))
    if (e.is_regular_file()) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  uint64_t file_bytes = 0;
  for (const auto& f : files) file_bytes += fs::file_size(f);

  // The CLI beside cat, warm and cold, interleaved.
  std::vector<std::string> cat{"cat"};
  cat.insert(cat.end(), files.begin(), files.end());
  struct Row {
    std::string name;
    std::vector<std::string> argv;
    std::vector<double> warm_s, cold_s, peak;
    int status = 0;
  };
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  auto floor = [&](const std::string& mode) {
    std::vector<std::string> a{self, mode};
    a.insert(a.end(), files.begin(), files.end());
    return a;
  };
  std::vector<Row> rows{{"cat (baseline)", cat, {}, {}, {}, 0},
                        {"floor: opcode walk of the pickles", floor("--walk"), {}, {}, {}, 0},
                        {"TorchFile::open of each file", floor("--unpickle"), {}, {}, {}, 0},
                        {"ckptdoc inspect", {ckptdoc, "inspect", dir}, {}, {}, {}, 0},
                        {"ckptdoc diagnose", {ckptdoc, "diagnose", dir}, {}, {}, {}, 0}};
  for (const auto& b : baselines) {
    rows.push_back({"inspect: " + b, {b, "inspect", dir}, {}, {}, {}, 0});
    rows.push_back({"diagnose: " + b, {b, "diagnose", dir}, {}, {}, {}, 0});
  }
  (void)run(cat);  // warm the page cache
  for (int r = 0; r < rounds; ++r) {
    for (auto& row : rows) {
      const Run w = run(row.argv);
      row.warm_s.push_back(w.seconds);
      row.peak.push_back(w.peak_mib);
      row.status = w.status;
    }
    for (auto& row : rows) {
      evict(files);
      row.cold_s.push_back(run(row.argv).seconds);
    }
    (void)run(cat);
  }

  // The reports: a diagnosis in this process, then the heap a deep copy of its params takes.
  const auto ckpt = deepspeed::Checkpoint::open(dir);
  analysis::DiagnoseOptions o;
  o.device = DeviceKind::Cpu;
  analysis::Report report = deepspeed::diagnose(*ckpt, o);
  const size_t n = report.params.size();
  const size_t before = heap_in_use();
  std::vector<analysis::ParamReport> copy = report.params;
  const size_t packed = heap_in_use() - before;
  // The same reports with dense histograms: every histogram's packed form (16 bytes inline + its heap block)
  // replaced by its dense array (a lower bound: the heap blocks' malloc overhead is not subtracted).
  size_t log_hists = 0, ulp_hists = 0, hist_heap = 0;
  for (const auto& p : copy) {
    for (const auto* s : {&p.lp, &p.fp32, &p.exp_avg, &p.exp_avg_sq})
      if (*s) log_hists += 2, hist_heap += (*s)->heap_bytes();
    std::vector<const DivergenceStats*> divs;
    if (p.lp_vs_fp32) divs.push_back(&*p.lp_vs_fp32);
    for (const auto& [r, d] : p.per_rank) divs.push_back(&d);
    for (const auto* d : divs) log_hists += 1, ulp_hists += 1, hist_heap += d->heap_bytes();
  }
  const size_t dense =
      packed - hist_heap +
      log_hists * (size_t{LogHistogram::kBins} * 8 - sizeof(BinCounts<LogHistogram::kBins>)) +
      ulp_hists * (size_t{UlpHistogram::kBuckets} * 8 - sizeof(BinCounts<UlpHistogram::kBuckets>));

  std::printf("checkpoint: ZeRO-2 fp16 dp 2, %zu params, %d layers x hidden %lld; %zu files, %.1f MB\n", n,
              layers, static_cast<long long>(hidden), files.size(), static_cast<double>(file_bytes) / 1e6);
  std::printf("per-param reports (%zu log + %zu ULP histograms):\n", log_hists, ulp_hists);
  std::printf("  %-40s %10.0f bytes/param\n", "dense histograms (before; lower bound)",
              static_cast<double>(dense) / static_cast<double>(n));
  std::printf("  %-40s %10.0f bytes/param   (goal <= 4096)\n", "packed histograms (measured)",
              static_cast<double>(packed) / static_cast<double>(n));
  const double cat_warm = median(rows[0].warm_s), cat_cold = median(rows[0].cold_s);
  std::printf("\nmedians of %d rounds; peak RSS from wait4\n", rounds);
  std::printf("%-44s %9s %9s %9s %9s %9s %9s %6s\n", "", "warm s", "GB/s", "% of cat", "cold s", "GB/s",
              "% of cat", "MiB");
  for (const auto& row : rows) {
    const double w = median(row.warm_s), c = median(row.cold_s);
    std::printf("%-44s %9.3f %9.2f %8.0f%% %9.3f %9.2f %8.0f%% %6.0f%s\n", row.name.c_str(), w,
                static_cast<double>(file_bytes) / w / 1e9, cat_warm / w * 100, c,
                static_cast<double>(file_bytes) / c / 1e9, cat_cold / c * 100, median(row.peak),
                row.status ? (" (exit " + std::to_string(row.status) + ")").c_str() : "");
  }
  std::printf("goals: diagnose >= 50%% of cat warm, >= 80%% cold\n");
  if (own_dir) fs::remove_all(fs::path(dir).parent_path());
  return 0;
}
