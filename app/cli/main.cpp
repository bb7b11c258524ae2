// ckptdoc command line: parses arguments and dispatches to one function per subcommand.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"
#include "commands.h"
#include "request_flags.h"
#include "suggest.h"
#include "test_hooks.h"

namespace cli = ckptdoc::cli;

namespace {
// Started by mpirun/srun: join MPI (through its plug-in) so diagnose can split the rank files over the
// processes.
struct MpiSession {
  MpiSession(int* argc, char*** argv) {
    try {
      ckptdoc::mpi_init(argc, argv);
    } catch (const ckptdoc::Error& e) {
      error = e.what();
    }
  }
  ~MpiSession() { ckptdoc::mpi_finalize(); }
  std::string error;
};
}  // namespace

namespace {
int run_command_line(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  if (!mpi.error.empty()) {
    std::fprintf(stderr, "ckptdoc: %s\n", mpi.error.c_str());
    return 2;
  }
  cli::install_test_hooks();  // test scaffolding only (CKPTDOC_TEST_HOOKS builds); see test_hooks.h
  CLI::App app{
      "ckptdoc - inspect and repair deep-learning training checkpoints (DeepSpeed ZeRO, torch.save, "
      "safetensors)"};
  app.set_version_flag("--version", std::string("ckptdoc ") + CKPTDOC_VERSION_STRING);
  app.require_subcommand(1);
  int rc = 0;

  cli::LsOptions ls;
  auto* ls_cmd = app.add_subcommand("ls",
                                    "Print the tree of a torch.save or safetensors file: keys, types, "
                                    "tensor dtypes/shapes/bytes, object classes");
  ls_cmd->add_option("FILE", ls.path, "torch.save (.pt/.bin/.pth) or .safetensors file")->required();
  ls_cmd->add_flag("--json", ls.json, "Machine-readable output");
  ls_cmd->add_option("--max-items", ls.max_items, "Items shown per container (text output)");
  ls_cmd->footer("Exit status: 0 printed, 2 unusable input (the file named, and what is wrong).");
  ls_cmd->callback([&] { rc = cli::run_ls(ls); });

  cli::InspectOptions inspect;
  auto* inspect_cmd = app.add_subcommand("inspect",
                                         "Summarise a DeepSpeed checkpoint: stage, dtypes, world sizes, "
                                         "param groups and their partition layout, files, problems");
  inspect_cmd
      ->add_option("PATH", inspect.path,
                   "DeepSpeed save folder (with `latest`), tag folder or rank file; a universal checkpoint; "
                   "a live-engine snapshot; a Hugging Face folder, safetensors or torch weights file")
      ->required();
  inspect_cmd->add_option("--tag", inspect.tag, "Tag folder to read instead of the one named in `latest`");
  inspect_cmd->add_flag("--json", inspect.json, "Machine-readable output");
  inspect_cmd->add_flag("--layout", inspect.layout, "List every rank's fragments (text output)");
  inspect_cmd->footer("Exit status: 0 summarised (problems are listed, not an error), 2 unusable input.");
  inspect_cmd->callback([&] { rc = cli::run_inspect(inspect); });

  cli::ExportCommandOptions exp;
  auto* export_cmd = app.add_subcommand(
      "export",
      "Write consolidated weights (what DeepSpeed's zero_to_fp32.py "
      "produces by default) to one safetensors, torch or HDF5 file, or to a folder of Hugging Face "
      "safetensors shards with an index (--max-shard-size)");
  export_cmd
      ->add_option("PATH", exp.path,
                   "DeepSpeed save folder (with `latest`), tag folder or rank file; a universal checkpoint; "
                   "a live-engine snapshot; a Hugging Face folder, safetensors or torch weights file")
      ->required();
  export_cmd->add_option("-o,--output", exp.output, "Output file (a folder with --max-shard-size)")
      ->required();
  export_cmd->add_option("--tag", exp.tag, "Tag folder to read instead of the one named in `latest`");
  export_cmd
      ->add_option("--format", exp.format,
                   "safetensors | torch | hdf5 (default: from the output's extension)")
      ->check(CLI::IsMember({"safetensors", "torch", "hdf5"}));
  export_cmd
      ->add_option("--dtype", exp.dtype, "float32 | float16 | bfloat16 (default: float32 for fp32 source)")
      ->check(CLI::IsMember({"float32", "float16", "bfloat16"}));
  export_cmd->add_option("--source", exp.source, "fp32 (master weights, default) | lp (module weights)")
      ->check(CLI::IsMember({"fp32", "lp"}));
  export_cmd->add_flag("--exclude-frozen", exp.exclude_frozen, "Leave frozen params out");
  export_cmd->add_option("--device", exp.device, "Where float32 <-> float16/bfloat16 conversions run")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  export_cmd->add_option(
      "--max-shard-size", exp.max_shard_size,
      "Write Hugging Face-style shards of at most SIZE (5GB = 5e9 bytes, 5GiB = 5*2^30) into the "
      "folder -o names, with an index when there are several");
  export_cmd->add_flag(
      "--force", exp.force,
      "Replace an existing output file (with --max-shard-size: weights files already in the folder); export "
      "fp32 masters the diagnosis finds stale; merge a replicated param whose tensor ranks differ (the copy "
      "most "
      "ranks hold, else tensor rank 0's)");
  export_cmd->add_flag("--strict", exp.strict,
                       "Refuse to write NaN or Inf values (default: write them and warn)");
  export_cmd->add_flag("--json", exp.json, "Machine-readable summary (with the tensors holding NaN or Inf)");
  export_cmd->add_option(
      "--tp-rank", exp.tp_rank,
      "Tensor-parallel checkpoints: write this tensor rank's slices of every stage, unmerged "
      "(default: merge the ranks by the checkpoint's universal_checkpoint_info or --tp-rules)");
  export_cmd->add_option(
      "--tp-rules", exp.tp_rules,
      "JSON rule file saying how tensor-parallel slices merge (universal_checkpoint_info's keys)");
  export_cmd->add_flag("-q,--quiet", exp.quiet, "No summary line");
  export_cmd->footer(
      "Exit status: 0 written, 2 refused or unusable input (nothing is published then: stale fp32 masters "
      "without --source lp or --force, NaN/Inf with --strict, an output that exists).");
  export_cmd->callback([&] { rc = cli::run_export(exp); });

  cli::DiagnoseOptions dg;
  auto* dg_cmd = app.add_subcommand("diagnose",
                                    "Find what is wrong with a DeepSpeed checkpoint: fp32 masters vs "
                                    "fp16/bf16 weights, optimizer moments, NaN/Inf, missing ranks");
  dg_cmd
      ->add_option("PATH", dg.path,
                   "DeepSpeed save folder (with `latest`), tag folder or rank file; a universal checkpoint; "
                   "a live-engine snapshot; a Hugging Face folder, safetensors or torch weights file")
      ->required();
  dg_cmd->add_option("--tag", dg.tag, "Tag folder to read (default: the `latest` file)");
  dg_cmd->add_flag("--json", dg.json, "Machine-readable report");
  dg_cmd->add_option("--device", dg.device, "Compute device")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  dg_cmd->add_option("--threads", dg.threads, "CPU worker threads (default: all cores)");
  dg_cmd->add_option("--gpu-workers", dg.gpu_workers, "Host threads feeding each GPU (default: up to 4)");
  dg_cmd->add_option("--max-params", dg.max_params, "Rows of the per-param table");
  dg_cmd->add_flag("--verify-checksums", dg.verify_checksums,
                   "Also check every record's CRC-32, or a Megatron-core folder's files against its "
                   "integrity.json sha256 (reads all bytes once more; finds flipped bits)");
  dg_cmd->add_option(
      "--tp-rules", dg.tp_rules,
      "Tensor-parallel checkpoints: JSON rule file naming the replicated params to compare across "
      "tensor ranks (default: the checkpoint's universal_checkpoint_info)");
  dg_cmd->add_option(
      "--lp-source", dg.lp_source,
      "ZeRO-3: a file of 16-bit weights saved elsewhere (stage3_gather_16bit_weights_on_model_save, "
      "an export) to compare the fp32 partitions with (default: weights saved beside the checkpoint)");
  dg_cmd->footer("Exit status: 0 no error-level finding, 1 an error-level finding, 2 unusable input.");
  dg_cmd->callback([&] { rc = cli::run_diagnose(dg); });

  cli::DiffCommandOptions df;
  auto* diff_cmd =
      app.add_subcommand("diff",
                         "Compare two checkpoints of any format ckptdoc reads tensor by tensor; exit 0 "
                         "equal, 1 different, 2 unusable input");
  const char* diff_side =
      "DeepSpeed checkpoint, Hugging Face folder, weights file, or DCP / Accelerate / "
      "Megatron-core folder (its weights)";
  diff_cmd->add_option("A", df.a, diff_side)->required();
  diff_cmd->add_option("B", df.b, diff_side)->required();
  diff_cmd->add_option("--what", df.what, "DeepSpeed side: fp32 (default) | lp | exp_avg | exp_avg_sq")
      ->check(CLI::IsMember({"fp32", "lp", "exp_avg", "exp_avg_sq"}));
  diff_cmd->add_option("--atol", df.atol, "Equal when |A-B| <= atol + rtol*|B| (default 0: exact)");
  diff_cmd->add_option("--rtol", df.rtol, "Relative tolerance (default 0)");
  diff_cmd->add_flag("--json", df.json, "Machine-readable output");
  diff_cmd->add_option("--max-rows", df.max_rows, "Differing tensors listed (text output)");
  diff_cmd->footer("Exit status: 0 equal, 1 different, 2 unusable input.");
  diff_cmd->callback([&] { rc = cli::run_diff(df); });

  cli::GuiOptions gui;
  auto* gui_cmd = app.add_subcommand("gui", "Open the desktop app (optionally on a checkpoint)");
  gui_cmd->add_option("PATH", gui.path, "Save folder, tag folder or rank file to open");
  gui_cmd->add_option("--screenshot", gui.screenshot,
                      "Save a window grab here once analysis is done, then exit");
  gui_cmd->add_option(
      "--watch", gui.watch,
      "Attach to a live run: follow this folder of snapshots (ckptdoc_hook's out_dir), showing the "
      "newest and a timeline of all");
  gui_cmd->add_option("--view", gui.view, "Tab to show")
      ->check(CLI::IsMember({"overview", "layout", "params", "timeline", "diff"}));
  gui_cmd->add_option("--compare", gui.compare,
                      "Checkpoint B for the Diff tab, compared with PATH once it is analysed");
  gui_cmd->add_option("--param", gui.param, "Param to select");
  gui_cmd->add_option("--shade", gui.shade, "Layout map shading (default: the metric of the worst finding)")
      ->check(CLI::IsMember({"param", "exact", "nonfinite", "moments"}));
  gui_cmd->add_option("--size", gui.size, "Window size WxH, e.g. 1280x800");
  gui_cmd->footer(
      "Exit status: 0 closed, 2 ckptdoc-gui not found (it is looked for beside ckptdoc, then on PATH) or bad "
      "arguments.");
  gui_cmd->callback([&] { rc = cli::run_gui(gui); });

  cli::DemoOptions demo;
  auto* demo_cmd =
      app.add_subcommand("demo",
                         "Write a small DeepSpeed ZeRO-2 fp16 checkpoint whose fp32 master "
                         "weights are stale (the DeepSpeed #762 bug), to try diagnose/repair on");
  demo_cmd->add_option("DIR", demo.dir, "Folder to write (default: ckptdoc-demo)");
  demo_cmd->add_flag("--force", demo.force, "Replace a checkpoint already in DIR");
  demo_cmd->add_option("--params", demo.params, "About this many parameters (default: a small model)");
  demo_cmd->add_flag("--healthy", demo.healthy, "Write a healthy checkpoint instead");
  demo_cmd->footer(
      "Exit status: 0 written, 2 refused (DIR holds something else; --force replaces only a checkpoint).");
  demo_cmd->callback([&] { rc = cli::run_demo(demo); });

  cli::SynthCliOptions synth;
  auto* synth_cmd = app.add_subcommand("synth", "Write a synthetic DeepSpeed checkpoint (tests, benchmarks)");
  synth_cmd->group("");  // hidden from --help
  synth_cmd->add_option("DIR", synth.dir, "Folder to write")->required();
  synth_cmd->add_option("--stage", synth.stage, "ZeRO stage 1, 2, 3");
  synth_cmd->add_option("--dtype", synth.dtype, "fp16 | bf16");
  synth_cmd->add_option("--dp", synth.dp, "Data-parallel size");
  synth_cmd->add_option("--layers", synth.layers, "Transformer layers");
  synth_cmd->add_option("--hidden", synth.hidden, "Hidden size");
  synth_cmd->add_option("--vocab", synth.vocab, "Embedding rows (default 8 x hidden)");
  synth_cmd->add_option("--params", synth.params, "About this many parameters (overrides --hidden)");
  synth_cmd->add_option("--steps", synth.steps, "global_steps (and Adam step)");
  synth_cmd->add_option(
      "--break", synth.breakage,
      "none | stale_fp32 | stale_fp32_one_rank | zero_moments_with_step | nan_in_exp_avg_sq | "
      "truncate_rank | missing_rank | wrong_dp_world_size");
  synth_cmd->add_flag("--bf16-optimizer", synth.bf16_optimizer, "BF16_Optimizer layout (bf16, stage 1)");
  synth_cmd->add_option("--sub-group-size", synth.sub_group_size, "ZeRO-3 sub_group_size");
  synth_cmd->add_option("--ds-version", synth.ds_version, "ds_version to record (decides the padding rule)");
  synth_cmd->add_option("--seed", synth.seed, "Value seed");
  synth_cmd->add_flag("--force", synth.force, "Replace a checkpoint already in DIR");
  synth_cmd->callback([&] { rc = cli::run_synth(synth); });

  cli::RepairOptions repair;
  auto* repair_cmd = app.add_subcommand(
      "repair",
      "Write a repaired copy of a DeepSpeed checkpoint (the input is never modified), then verify it");
  repair_cmd->add_option("PATH", repair.path, "Checkpoint save folder, tag folder or rank file")->required();
  repair_cmd->add_option("-o,--output", repair.output, "New save folder to write")->required();
  repair_cmd->add_flag("--refresh-fp32", repair.refresh_fp32,
                       "fp32 master weights := upcast(fp16/bf16 weights)");
  repair_cmd->add_option("--lp-source", repair.lp_source,
                         "ZeRO-3: consolidated 16-bit weights (safetensors or torch file) to refresh from");
  repair_cmd->add_flag("--reset-optimizer", repair.reset_optimizer, "Empty the Adam state (moments, step)");
  repair_cmd->add_flag("--drop-optimizer", repair.drop_optimizer,
                       "Weights-only checkpoint (DeepSpeed: load with load_optimizer_states=False; DCP "
                       "folder: the optimizer.* keys left out; Megatron-core: as --no-save-optim writes it; "
                       "Accelerate: without optimizer_<i>/)");
  repair_cmd->add_flag(
      "--restore-model-files", repair.restore_model_files,
      "ZeRO-3: write the ranks' missing model files as copies of one that is there (DeepSpeed #7546)");
  repair_cmd->add_flag("--repartition", repair.repartition,
                       "Re-partition for a new data-parallel size or layout");
  repair_cmd->add_option("--world-size", repair.world_size, "New data-parallel size (with --repartition)");
  repair_cmd->add_option("--target", repair.target,
                         "Template checkpoint whose layout to graft onto (with --repartition)");
  repair_cmd->add_flag("--allow-shape-change", repair.allow_shape_change,
                       "With --target: keep the template's values for params whose shape changed");
  repair_cmd->add_flag("--dry-run", repair.dry_run, "Print the plan only");
  repair_cmd->add_option("--device", repair.device, "auto | cpu | cuda");
  repair_cmd->add_flag(
      "--force", repair.force,
      "Replace an output folder that holds a DeepSpeed checkpoint (anything else is refused)");
  repair_cmd->add_flag(
      "--allow-unsafe-pickle", repair.allow_unsafe_pickle,
      "Write the output even though input files carry pickles that would run code in torch.load");
  repair_cmd->add_flag("--json", repair.json, "Machine-readable output");
  repair_cmd->footer(
      "Exit status: 0 written and verified, 1 written but the output still has error findings (the plan says "
      "which before writing), 2 refused or unusable input (nothing written).");
  repair_cmd->callback([&] { rc = cli::run_repair(repair); });

  cli::WatchOptions watch;
  auto* watch_cmd = app.add_subcommand(
      "watch",
      "Follow a folder of live-engine snapshots (ckptdoc_hook): one line per snapshot as it is committed");
  watch_cmd->add_option("DIR", watch.dir, "Folder the snapshots are written into")->required();
  watch_cmd->add_flag("--json", watch.json,
                      "One JSON object per line (snapshot, pending, removed, unreadable)");
  watch_cmd
      ->add_option("--fail-on", watch.fail_on,
                   "Exit 1 at the first snapshot with a finding this bad or worse")
      ->check(CLI::IsMember({"error", "warning", "info", "never"}));
  watch_cmd->add_flag("--once", watch.once, "Stop after the first snapshot (existing or new)");
  watch_cmd->add_option("--count", watch.count, "Stop after this many snapshots");
  watch_cmd->add_option("--timeout", watch.timeout,
                        "Give up after this many seconds (exit 3 with --once/--count)");
  watch_cmd->add_option("--device", watch.device, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  watch_cmd->add_option("--threads", watch.threads, "CPU threads per diagnosis (0: all cores)");
  watch_cmd->footer(
      "Exit status: 0 stopped after --once/--count, 1 a finding at --fail-on, 2 DIR unusable (or a "
      "checkpoint, not a snapshot folder), 3 --timeout ran out first.");
  watch_cmd->callback([&] { rc = cli::run_watch(watch); });

  cli::ConvertOptions convert;
  auto* convert_cmd = app.add_subcommand(
      "convert",
      "Write a DeepSpeed universal checkpoint from ZeRO files (--to universal), ZeRO files for a chosen "
      "data-parallel size from a universal one (--to zero), or the checkpoint a live-engine snapshot "
      "holds (--to checkpoint); verified after writing");
  convert_cmd
      ->add_option("PATH", convert.path,
                   "Save folder, tag folder or rank file (a universal folder for --to zero; a snapshot or a "
                   "folder of snapshots for --to checkpoint)")
      ->required();
  convert_cmd->add_option("-o,--output", convert.output, "New save folder to write (required)");
  convert_cmd->add_option("--to", convert.to, "universal | zero | checkpoint")
      ->check(CLI::IsMember({"universal", "zero", "checkpoint"}));
  convert_cmd->add_option(
      "--for-deepspeed", convert.for_deepspeed,
      "--to universal: DeepSpeed version whose loader will read it (default: the checkpoint's)");
  convert_cmd->add_option("--world-size", convert.world_size, "--to zero: data-parallel size to write");
  convert_cmd->add_option(
      "--target", convert.target,
      "--to zero: rigid checkpoint of the same model giving the optimizer hyper-parameters");
  convert_cmd->add_option("--tag", convert.tag,
                          "Tag folder (or, for --to checkpoint, snapshot) to read instead of the newest");
  convert_cmd->add_option("--output-tag", convert.output_tag, "Tag folder name to write");
  convert_cmd->add_option("--device", convert.device, "Compute device for the verification")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  convert_cmd->add_flag("--force", convert.force, "Allow a non-empty output folder");
  convert_cmd->add_flag("--json", convert.json, "Machine-readable output");
  convert_cmd->add_flag("-q,--quiet", convert.quiet, "Only findings and the outcome");
  convert_cmd->footer(
      "Exit status: 0 written and verified, 1 written but the verification found errors, 2 refused or "
      "unusable input (nothing written).");
  convert_cmd->callback([&] {
    if (convert.output.empty()) {  // say what convert can write, not only that -o is missing
      std::fputs(
          "ckptdoc convert: -o OUT is required: the new folder to write. Targets:\n"
          "  --to universal             a DeepSpeed universal checkpoint from ZeRO files\n"
          "  --to zero --world-size N   ZeRO files for N data-parallel ranks from a universal checkpoint\n"
          "  --to checkpoint            a live-engine snapshot back to a checkpoint (the default for "
          "snapshots)\n",
          stderr);
      rc = 2;
      return;
    }
    // A snapshot (or a folder of them) converts to a checkpoint, the one target it has: --to may be left out.
    const bool snapshot = convert.to == "checkpoint" ||
                          (convert.to.empty() && (ckptdoc::snapshot::is_snapshot_dir(convert.path) ||
                                                  ckptdoc::snapshot::holds_snapshots(convert.path)));
    if (!snapshot) {
      rc = cli::run_convert(convert);
      return;
    }
    cli::ConvertSnapshotOptions snap;  // a live-engine snapshot written back as a checkpoint
    snap.path = convert.path;
    snap.output = convert.output;
    snap.to = convert.to;
    snap.tag = convert.tag;
    snap.output_tag = convert.output_tag;
    snap.force = convert.force;
    snap.json = convert.json;
    snap.quiet = convert.quiet;
    rc = cli::run_convert_snapshot(snap);
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    if (code != 0) std::fputs(cli::suggestions(app, argc, argv).c_str(), stderr);
    return code == 0 ? 0 : 2;
  } catch (const ckptdoc::Error& e) {  // its kind as the source commands print it ("[unsupported]", ...)
    std::fprintf(stderr, "ckptdoc: error [%s]: %s\n", std::string(ckptdoc::kind_name(e.kind())).c_str(),
                 e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ckptdoc: error: %s\n", e.what());
    return 2;
  }
  return rc;
}
}  // namespace

int main(int argc, char** argv) {
  ckptdoc::set_request_field_namer(&cli::cli_flag);  // the core's refusals name our flags
  try {
    return run_command_line(argc, argv);
  } catch (
      const std::exception& e) {  // set-up outside the commands' own handlers (MPI, CLI11's option table)
    std::fprintf(stderr, "ckptdoc: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "ckptdoc: an unknown error\n");
  }
  return 2;
}
