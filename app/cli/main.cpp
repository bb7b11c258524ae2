// ckptdoc command line: parses arguments and dispatches to one function per subcommand.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "commands.h"
#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"
#include "ckptdoc/io/fault_injection.h"

namespace cli = ckptdoc::cli;

namespace {
// Started by mpirun/srun: join MPI so diagnose can split the rank files over the processes.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}
struct MpiSession {
  MpiSession(int* argc, char*** argv) : active(launched_by_mpi()) {
    if (active) ckptdoc::mpi_init(argc, argv);
  }
  ~MpiSession() {
    if (active) ckptdoc::mpi_finalize();
  }
  bool active;
};
}  // namespace

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  if (const std::string note = ckptdoc::install_fault_injection_from_env(); !note.empty())
    std::fprintf(stderr, "ckptdoc: %s\n", note.c_str());
  CLI::App app{"ckptdoc - inspect and repair deep-learning training checkpoints (DeepSpeed ZeRO, torch.save, "
               "safetensors)"};
  app.set_version_flag("--version", std::string("ckptdoc ") + CKPTDOC_VERSION_STRING);
  app.require_subcommand(1);
  int rc = 0;

  cli::LsOptions ls;
  auto* ls_cmd = app.add_subcommand("ls", "Print the tree of a torch.save or safetensors file: keys, types, "
                                          "tensor dtypes/shapes/bytes, object classes");
  ls_cmd->add_option("FILE", ls.path, "torch.save (.pt/.bin/.pth) or .safetensors file")->required();
  ls_cmd->add_flag("--json", ls.json, "Machine-readable output");
  ls_cmd->add_option("--max-items", ls.max_items, "Items shown per container (text output)");
  ls_cmd->callback([&] { rc = cli::run_ls(ls); });

  cli::InspectOptions inspect;
  auto* inspect_cmd = app.add_subcommand("inspect", "Summarise a DeepSpeed checkpoint: stage, dtypes, world sizes, "
                                                    "param groups and their partition layout, files, problems");
  inspect_cmd->add_option("PATH", inspect.path, "save folder (with `latest`), tag folder, or one rank file")
      ->required();
  inspect_cmd->add_option("--tag", inspect.tag, "Tag folder to read instead of the one named in `latest`");
  inspect_cmd->add_flag("--json", inspect.json, "Machine-readable output");
  inspect_cmd->add_flag("--layout", inspect.layout, "List every rank's fragments (text output)");
  inspect_cmd->callback([&] { rc = cli::run_inspect(inspect); });

  cli::ExportCommandOptions exp;
  auto* export_cmd = app.add_subcommand("export", "Write consolidated weights (what DeepSpeed's zero_to_fp32.py "
                                                  "produces by default) to one safetensors, torch or HDF5 file");
  export_cmd->add_option("PATH", exp.path, "save folder (with `latest`), tag folder, or one rank file")->required();
  export_cmd->add_option("-o,--output", exp.output, "Output file")->required();
  export_cmd->add_option("--tag", exp.tag, "Tag folder to read instead of the one named in `latest`");
  export_cmd->add_option("--format", exp.format, "safetensors | torch | hdf5 (default: from the output's extension)")
      ->check(CLI::IsMember({"safetensors", "torch", "hdf5"}));
  export_cmd->add_option("--dtype", exp.dtype, "float32 | float16 | bfloat16 (default: float32 for fp32 source)")
      ->check(CLI::IsMember({"float32", "float16", "bfloat16"}));
  export_cmd->add_option("--source", exp.source, "fp32 (master weights, default) | lp (module weights)")
      ->check(CLI::IsMember({"fp32", "lp"}));
  export_cmd->add_flag("--exclude-frozen", exp.exclude_frozen, "Leave frozen params out");
  export_cmd->add_option("--device", exp.device, "Where float32 <-> float16/bfloat16 conversions run")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  export_cmd->add_option("--tp-rank", exp.tp_rank,
                         "Tensor-parallel checkpoints: write this tensor rank's slices of every stage, unmerged "
                         "(default: merge the ranks by the checkpoint's universal_checkpoint_info or --tp-rules)");
  export_cmd->add_option("--tp-rules", exp.tp_rules,
                         "JSON rule file saying how tensor-parallel slices merge (universal_checkpoint_info's keys)");
  export_cmd->add_flag("-q,--quiet", exp.quiet, "No summary line");
  export_cmd->callback([&] { rc = cli::run_export(exp); });

  cli::DiagnoseOptions dg;
  auto* dg_cmd = app.add_subcommand("diagnose", "Find what is wrong with a DeepSpeed checkpoint: fp32 masters vs "
                                                "fp16/bf16 weights, optimizer moments, NaN/Inf, missing ranks");
  dg_cmd->add_option("PATH", dg.path, "Save folder (holding `latest`), tag folder, or one rank file")->required();
  dg_cmd->add_option("--tag", dg.tag, "Tag folder to read (default: the `latest` file)");
  dg_cmd->add_flag("--json", dg.json, "Machine-readable report");
  dg_cmd->add_option("--device", dg.device, "Compute device")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  dg_cmd->add_option("--threads", dg.threads, "CPU worker threads (default: all cores)");
  dg_cmd->add_option("--gpu-workers", dg.gpu_workers, "Host threads feeding each GPU (default: up to 4)");
  dg_cmd->add_option("--max-params", dg.max_params, "Rows of the per-param table");
  dg_cmd->add_flag("--verify-checksums", dg.verify_checksums,
                   "Also check every record's CRC-32 (reads all bytes once more; finds flipped bits)");
  dg_cmd->add_option("--tp-rules", dg.tp_rules,
                     "Tensor-parallel checkpoints: JSON rule file naming the replicated params to compare across "
                     "tensor ranks (default: the checkpoint's universal_checkpoint_info)");
  dg_cmd->callback([&] { rc = cli::run_diagnose(dg); });

  cli::GuiOptions gui;
  auto* gui_cmd = app.add_subcommand("gui", "Open the desktop app (optionally on a checkpoint)");
  gui_cmd->add_option("PATH", gui.path, "Save folder, tag folder or rank file to open");
  gui_cmd->add_option("--screenshot", gui.screenshot, "Save a window grab here once analysis is done, then exit");
  gui_cmd->add_option("--view", gui.view, "Tab to show")->check(CLI::IsMember({"overview", "layout", "params"}));
  gui_cmd->add_option("--param", gui.param, "Param to select");
  gui_cmd->callback([&] { rc = cli::run_gui(gui, argc, argv); });

  cli::DemoOptions demo;
  auto* demo_cmd = app.add_subcommand("demo", "Write a small DeepSpeed ZeRO-2 fp16 checkpoint whose fp32 master "
                                              "weights are stale (the DeepSpeed #762 bug), to try diagnose/repair on");
  demo_cmd->add_option("DIR", demo.dir, "Folder to write (default: ckptdoc-demo)");
  demo_cmd->add_flag("--force", demo.force, "Replace a checkpoint already in DIR");
  demo_cmd->add_option("--params", demo.params, "About this many parameters (default: a small model)");
  demo_cmd->add_flag("--healthy", demo.healthy, "Write a healthy checkpoint instead");
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
  synth_cmd->add_option("--params", synth.params, "About this many parameters (overrides --hidden)");
  synth_cmd->add_option("--steps", synth.steps, "global_steps (and Adam step)");
  synth_cmd->add_option("--break", synth.breakage,
                        "none | stale_fp32 | zero_moments_with_step | nan_in_exp_avg_sq | truncate_rank | "
                        "missing_rank | wrong_dp_world_size");
  synth_cmd->add_flag("--bf16-optimizer", synth.bf16_optimizer, "BF16_Optimizer layout (bf16, stage 1)");
  synth_cmd->add_option("--sub-group-size", synth.sub_group_size, "ZeRO-3 sub_group_size");
  synth_cmd->add_option("--ds-version", synth.ds_version, "ds_version to record (decides the padding rule)");
  synth_cmd->add_option("--seed", synth.seed, "Value seed");
  synth_cmd->add_flag("--force", synth.force, "Replace a checkpoint already in DIR");
  synth_cmd->callback([&] { rc = cli::run_synth(synth); });

  cli::RepairOptions repair;
  auto* repair_cmd = app.add_subcommand(
      "repair", "Write a repaired copy of a DeepSpeed checkpoint (the input is never modified), then verify it");
  repair_cmd->add_option("PATH", repair.path, "Checkpoint save folder, tag folder or rank file")->required();
  repair_cmd->add_option("-o,--output", repair.output, "New save folder to write")->required();
  repair_cmd->add_flag("--refresh-fp32", repair.refresh_fp32, "fp32 master weights := upcast(fp16/bf16 weights)");
  repair_cmd->add_option("--lp-source", repair.lp_source,
                         "ZeRO-3: consolidated 16-bit weights (safetensors or torch file) to refresh from");
  repair_cmd->add_flag("--reset-optimizer", repair.reset_optimizer, "Empty the Adam state (moments, step)");
  repair_cmd->add_flag("--drop-optimizer", repair.drop_optimizer,
                       "Weights-only checkpoint (load with load_optimizer_states=False)");
  repair_cmd->add_flag("--repartition", repair.repartition, "Re-partition for a new data-parallel size or layout");
  repair_cmd->add_option("--world-size", repair.world_size, "New data-parallel size (with --repartition)");
  repair_cmd->add_option("--target", repair.target,
                         "Template checkpoint whose layout to graft onto (with --repartition)");
  repair_cmd->add_flag("--allow-shape-change", repair.allow_shape_change,
                       "With --target: keep the template's values for params whose shape changed");
  repair_cmd->add_flag("--dry-run", repair.dry_run, "Print the plan only");
  repair_cmd->add_option("--device", repair.device, "auto | cpu | cuda");
  repair_cmd->add_flag("--force", repair.force, "Allow a non-empty output folder");
  repair_cmd->add_flag("--json", repair.json, "Machine-readable output");
  repair_cmd->callback([&] { rc = cli::run_repair(repair); });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const ckptdoc::Error& e) {
    std::fprintf(stderr, "ckptdoc: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ckptdoc: error: %s\n", e.what());
    return 2;
  }
  return rc;
}
