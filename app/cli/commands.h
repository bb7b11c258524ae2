#pragma once
// The CLI's subcommands. main.cpp parses arguments (CLI11 lives only there) and calls these; each returns
// the process exit code: 0 ok, 1 problems found (diagnose) or failed, 2 unusable input or usage.
#include <optional>
#include <string>

#include "ckptdoc/sources/source.h"

namespace ckptdoc::cli {

struct LsOptions {
  std::string path;
  bool json = false;
  int max_items = 50;  // list/dict items shown per container in the text view
};
int run_ls(const LsOptions& o);

// `ckptdoc inspect PATH`: what a DeepSpeed checkpoint holds (catalog, layout, problems). Exit 0 when the
// catalog could be built (problems are listed, not fatal), 2 when nothing usable is there.
struct InspectOptions {
  std::string path;
  std::optional<std::string> tag;
  bool json = false;
  bool layout = false;  // text output: list every rank's fragments
};
int run_inspect(const InspectOptions& o);

// `ckptdoc export PATH -o FILE`: weights-only consolidation (zero_to_fp32.py's output by default).
struct ExportCommandOptions {
  std::string path;
  std::string output;
  std::optional<std::string> tag;
  std::string format;  // empty: from the output's extension, else safetensors
  std::string dtype;   // empty: float32 for fp32 source, the lp dtype for lp source
  std::string source = "fp32";
  bool exclude_frozen = false;
  bool quiet = false;
  std::string device = "auto";
  std::string max_shard_size;  // empty: one file; else -o names a folder of Hugging Face-style shards
  bool force = false;
  bool strict = false;  // NaN/Inf values fail the export instead of a warning
  bool json = false;
  int tp_rank = -1;                     // tensor-parallel jobs: this rank's slices, unmerged
  std::optional<std::string> tp_rules;  // tensor-parallel rule file (default: universal_checkpoint_info)
};
int run_export(const ExportCommandOptions& o);

// `ckptdoc demo [DIR]`: a small DeepSpeed ZeRO-2 fp16 dp2 checkpoint with stale fp32 masters (or healthy).
struct DemoOptions {
  std::string dir = "ckptdoc-demo";
  bool force = false;
  long long params = 0;  // 0: the small default model
  bool healthy = false;
};
int run_demo(const DemoOptions& o);

// `ckptdoc synth DIR ...`: any synthetic checkpoint, for tests and benchmarks.
struct SynthCliOptions {
  std::string dir;
  int stage = 2;
  std::string dtype = "fp16";
  int dp = 2;
  int layers = 2;
  long long hidden = 64;
  long long vocab = 0;  // 0: 8 * hidden
  long long params = 0;
  long long steps = 10;
  std::string breakage = "none";
  bool bf16_optimizer = false;
  long long sub_group_size = 1000000000;
  std::string ds_version = "0.12.6";
  unsigned long long seed = 1;
  bool force = false;
};
int run_synth(const SynthCliOptions& o);

// `ckptdoc repair PATH -o OUT ...`.
struct RepairOptions {
  std::string path, output;
  bool refresh_fp32 = false;
  std::string lp_source;
  bool reset_optimizer = false;
  bool drop_optimizer = false;
  bool restore_model_files = false;
  bool repartition = false;
  int world_size = 0;
  std::string target;
  bool allow_shape_change = false;
  bool dry_run = false;
  std::string device = "auto";
  bool force = false;
  bool allow_unsafe_pickle = false;
  bool json = false;
};
int run_repair(const RepairOptions& o);

// `ckptdoc convert PATH -o OUT --to universal|zero ...` (convert_command.cpp); without --to it lists the
// targets.
struct ConvertOptions {
  std::string path, output;
  std::string to;                  // "universal" | "zero"; empty: error listing the targets
  std::optional<std::string> tag;  // input tag
  std::string output_tag;          // tag folder name to write
  std::string for_deepspeed;       // --to universal
  int world_size = 0;              // --to zero
  std::string target;              // --to zero: template checkpoint for hyper-parameters
  bool force = false;
  bool json = false;
  bool quiet = false;
  std::string device = "auto";
};
int run_convert(const ConvertOptions& o);

}  // namespace ckptdoc::cli

namespace ckptdoc::cli {

struct DiagnoseOptions {
  std::string path;
  std::optional<std::string> tag;
  bool json = false;
  std::string device = "auto";
  unsigned threads = 0;
  unsigned gpu_workers = 0;
  int max_params = 30;  // rows of the per-param table in the text report
  bool verify_checksums = false;
  std::optional<std::string> tp_rules;   // tensor-parallel rule file (default: universal_checkpoint_info)
  std::optional<std::string> lp_source;  // ZeRO-3: 16-bit weights saved elsewhere to compare the masters with
};
int run_diagnose(const DiagnoseOptions& o);

// A path a self-reporting source reads (sources::find_source, not the catalog; today a PyTorch Distributed
// Checkpoint folder): `inspect`, `diagnose`, `export` and `repair` print what the source returns
// (source_command.cpp). Same exit codes as their catalog forms; a command the source cannot do is refused
// naming what it can.
int run_source_inspect(const sources::Source& source, const InspectOptions& o);
int run_source_diagnose(const sources::Source& source, const DiagnoseOptions& o);
int run_source_export(const sources::Source& source, const ExportCommandOptions& o);
int run_source_repair(const sources::Source& source, const RepairOptions& o);

}  // namespace ckptdoc::cli

namespace ckptdoc::cli {

// `ckptdoc gui [PATH]`: runs the Qt desktop app, ckptdoc-gui (beside ckptdoc or on PATH), with these options.
struct GuiOptions {
  std::optional<std::string> path;
  std::optional<std::string> watch;       // attach to this folder of live-run snapshots
  std::optional<std::string> screenshot;  // save a grab once analysis is done, then exit
  std::string view = "overview";
  std::optional<std::string> compare;  // B of the Diff tab, compared with PATH once it is analysed
  std::optional<std::string> param;
  std::optional<std::string> shade;  // layout map shading: param | exact | nonfinite | moments
  std::optional<std::string> size;   // window size WxH
};
int run_gui(const GuiOptions& o);

}  // namespace ckptdoc::cli

namespace ckptdoc::cli {

// `ckptdoc diff A B`: tensors added, removed, changed; exit 0 equal, 1 different, 2 unusable input.
struct DiffCommandOptions {
  std::string a, b;
  std::string what = "fp32";
  double atol = 0, rtol = 0;
  bool json = false;
  int max_rows = 40;
};
int run_diff(const DiffCommandOptions& o);
// `ckptdoc watch DIR` (watch_command.cpp): a line per snapshot committed into DIR.
struct WatchOptions {
  std::string dir;
  bool json = false;
  std::string fail_on = "never";  // error | warning | info | never
  bool once = false;              // stop after the first snapshot line
  int count = 0;                  // stop after this many (0: never)
  double timeout = 0;             // seconds; 0: no limit
  std::string device = "auto";
  unsigned threads = 0;
};
int run_watch(const WatchOptions& o);

// `ckptdoc convert SNAPSHOT -o CKPT [--to checkpoint]` (convert_snapshot_command.cpp).
struct ConvertSnapshotOptions {
  std::string path, output;
  std::string to;                  // "checkpoint" or empty
  std::optional<std::string> tag;  // which snapshot of a folder of snapshots
  std::string output_tag;          // tag folder to write (default global_step<N>)
  bool force = false;
  bool json = false;
  bool quiet = false;
};
int run_convert_snapshot(const ConvertSnapshotOptions& o);

}  // namespace ckptdoc::cli
