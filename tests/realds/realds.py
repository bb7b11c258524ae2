#!/usr/bin/python3
"""Real DeepSpeed checkpoints for ckptdoc's tests, written and loaded by unmodified DeepSpeed.

Every checkpoint of the matrix below is written by ../shared/deepspeed's harness (DeepSpeed v0.12.6, or v0.14.5
where an entry says so, on the CPU over gloo) into a cache folder, once, and reused by every test that names it.
Entries with "ds": "0.19" are written and loaded by today's DeepSpeed on torch 2 instead: the judge venv that
scripts/setup-judges.sh makes from PyPI (its python runs the same harness scripts through judge/launch.py).
Reference values come from real DeepSpeed too: `ref` loads a checkpoint with `engine.load_checkpoint` and dumps
the consolidated fp32 masters and Adam moments (ds_load_check.py --dump-*), or runs DeepSpeed's own
zero_to_fp32.py, or takes the module weights with torch.load.

  realds.py status [--ds V]             exit 0 when real DeepSpeed (version V: its judge venv too) can run here,
                                        else 77 and one line saying why
  realds.py list                        the matrix, one line per entry
  realds.py path NAME                   write NAME if needed; print its entry (JSON: save_dir, stage, dtype, dp, ...)
  realds.py all                         write every entry (warm the cache)
  realds.py ref NAME fp32|moments|lp|zero_to_fp32
                                        the reference file for NAME (torch .pt / .bin); prints its path
  realds.py ref NAME zero_to_fp32_shards:SIZE|zero_to_fp32_bin_shards:SIZE
                                        the folder 0.19's zero_to_fp32.py writes for NAME with --max_shard_size
                                        SIZE (e.g. 3KB), with --safe_serialization or without; prints its path
  realds.py check CKPT --like NAME --json OUT [--world N] [--model M] [--ds V] [-- ds_load_check args]
                                        real engine.load_checkpoint(CKPT) + one training step, configured like
                                        NAME (stage, dtype, optimizer, model); exit code of ds_load_check.py
  realds.py py [--ds V] [--] ARGS      python with that DeepSpeed importable (torch.load/save of its own files)
  realds.py zero-to-fp32 CKPT OUT [--ds V]
                                        DeepSpeed's zero_to_fp32.py (from the given version) on CKPT
  realds.py launch [--world N] [--ds V] [--mcore M] [--torchtitan] [--logdir D] -- SCRIPT ARGS
                                        SCRIPT on N local ranks through the harness's launch.py (ds_common
                                        importable), with that DeepSpeed version

--ds V: 0.12.6 (default), 0.14.5 (../shared/deepspeed on Debian's torch 1.13) or 0.19 (the judge venv: the
DeepSpeed 0.19.x and torch 2 that scripts/judges-requirements.txt pins; its python runs `py`, with torch.load
defaulting to weights_only=False as torch 1.13's did), or 0.17.6 (that venv's python and torch with DeepSpeed
0.17.6 from PyPI first on PYTHONPATH, installed once beside the venv).

Options: --cache DIR (default $CKPTDOC_REALDS_CACHE, else ~/.cache/ckptdoc/realds), --shared DIR (default
$CKPTDOC_SHARED, else <repo>/../shared), --judges-venv DIR (default $CKPTDOC_JUDGES_VENV, else what
scripts/setup-judges.sh --path prints).
"""
import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3"  # Debian's, with torch 1.13
GENERATOR_VERSION = 3        # bump when an entry's recipe changes meaning
JUDGE = os.path.join(HERE, "judge")  # the judge venv's launcher, load check and rank hooks
RUN = os.path.join(JUDGE, "run.py")  # `python RUN SCRIPT ARGS`: python SCRIPT ARGS as a fork of a judge zygote
PINS = os.path.join(REPO, "scripts", "judges-requirements.txt")
JUDGE_VERSIONS = ("0.19",)  # run by the judge venv's python (scripts/setup-judges.sh), not from ../shared
# Older DeepSpeed releases run by the judge venv's python and torch (scripts/judges-extra-deepspeed.txt says which
# and why), installed from PyPI beside the venv by setup-judges.sh (or here, when missing) and put first on
# PYTHONPATH.
EXTRA_DS = tuple(line.strip() for line in open(os.path.join(REPO, "scripts", "judges-extra-deepspeed.txt"))
                 if line.strip() and not line.startswith("#"))
# Newer megatron-core releases (scripts/judges-extra-megatron-core.txt), the same way: an entry's "mcore".
# megatron-core releases whose import builds a CUDA extension when a CUDA toolkit is installed (0.15.3:
# inference/unified_memory.py, which dies without a GPU) and that call numpy 1's numpy.product: their runs go
# through megatron_015_shims.py
MCORE_015_SHIMS = ("0.15.3",)
EXTRA_MCORE = tuple(line.strip() for line in open(os.path.join(REPO, "scripts", "judges-extra-megatron-core.txt"))
                    if line.strip() and not line.startswith("#"))
# Megatron Bridge and the packages it needs beyond the venv (scripts/judges-extra-megatron-bridge.txt), installed
# beside the venv by setup-judges.sh in bridge-extra/<first 12 hex of the list's sha256>/: an entry of kind
# "megatron_bridge" runs with that folder first on PYTHONPATH.
BRIDGE_PINS = os.path.join(REPO, "scripts", "judges-extra-megatron-bridge.txt")
ZSTD_PINS = os.path.join(REPO, "scripts", "judges-extra-zstd.txt")
# torchtitan and what its checkpoint code imports (scripts/judges-extra-torchtitan.txt), beside the venv in
# titan-extra/<hash of the list>/: first on PYTHONPATH for kind "torchtitan" and `launch --torchtitan`.
TITAN_PINS = os.path.join(REPO, "scripts", "judges-extra-torchtitan.txt")
# "torch latest" (#28): PyPI's newest torch in its own venv (scripts/judges-torch-latest.txt, made by
# setup-judges.sh beside the judge venv as torch-latest-<hash of the list>/), no DeepSpeed. An entry whose "ds" is
# TORCH_LATEST is written by it; `py` / `launch` / `status --ds torch-latest` run it (ranks by torch.distributed.run:
# the judge's launch.py and rank hooks import the harness, which imports DeepSpeed).
TORCH_LATEST = "torch-latest"
LATEST_PINS = os.path.join(REPO, "scripts", "judges-torch-latest.txt")

# The matrix (pairwise, not the full product): every ZeRO stage x dtype, BF16_Optimizer at stage 0 and 1,
# dp 1-4 (ZeRO-3 at 2-4: dp 1 fails in the CPU harness), fresh (steps 0) and trained, the edge model (tied
# head, frozen bias), model B, every #762 variant, a ZeRO-3 sub_group_size that splits a group, and v0.14.5.
# kind "train": ds_driver.py train; kind "seedbug": a fresh engine loads `src` without optimizer states and saves;
# kind "par": par_train.py trains a tensor/pipeline/expert-parallel job (its references are assembled by the engine);
# model "autotp": autotp_train.py, DeepSpeed's AutoTP on a HuggingFace model; model "autoep": autoep_train.py,
# DeepSpeed's AutoEP on a tiny MoE.
# the harness's fp16 section (ds_common.make_config), which config_extra's "fp16" replaces whole
FP16_HARNESS = {"enabled": True, "loss_scale": 0, "initial_scale_power": 8, "loss_scale_window": 100, "hysteresis": 2,
                "min_loss_scale": 1}

MATRIX = {
    "z1_fp16_dp2": dict(kind="train", stage=1, dtype="fp16", dp=2, steps=5),
    "z1_bf16_dp3_fresh": dict(kind="train", stage=1, dtype="bf16", dp=3, steps=0),
    "z1_fp16_dp4_edge": dict(kind="train", stage=1, dtype="fp16", dp=4, steps=3, model="edge"),
    "z2_fp16_dp2": dict(kind="train", stage=2, dtype="fp16", dp=2, steps=5),
    "z2_fp16_dp1_fresh": dict(kind="train", stage=2, dtype="fp16", dp=1, steps=0),
    "z2_fp16_dp3_edge": dict(kind="train", stage=2, dtype="fp16", dp=3, steps=4, model="edge"),
    "z2_bf16_dp2": dict(kind="train", stage=2, dtype="bf16", dp=2, steps=5),
    "z2_bf16_dp4": dict(kind="train", stage=2, dtype="bf16", dp=4, steps=3),
    "z2_fp16_dp2_modelB_fresh": dict(kind="train", stage=2, dtype="fp16", dp=2, steps=0, model="B"),
    "z3_fp16_dp2": dict(kind="train", stage=3, dtype="fp16", dp=2, steps=5),
    "z3_bf16_dp3_fresh": dict(kind="train", stage=3, dtype="bf16", dp=3, steps=0),
    "z3_fp16_dp4_subgroups": dict(kind="train", stage=3, dtype="fp16", dp=4, steps=3,
                                  zero_extra={"sub_group_size": 10000}),
    "bf16opt_s1_dp2": dict(kind="train", stage=1, dtype="bf16", dp=2, steps=5, bf16opt=True),
    "bf16opt_s0_dp3": dict(kind="train", stage=0, dtype="bf16", dp=3, steps=3, bf16opt=True),
    "bf16opt_s1_dp1_fresh": dict(kind="train", stage=1, dtype="bf16", dp=1, steps=0, bf16opt=True),
    # the #762 state, every variant the harness knows
    "seed_z2_fp16_no_optim": dict(kind="seedbug", src="z2_fp16_dp2", variant="no_optim"),
    "seed_z2_fp16_module_only": dict(kind="seedbug", src="z2_fp16_dp2", variant="module_only"),
    "seed_z2_fp16_module_only_no_optim": dict(kind="seedbug", src="z2_fp16_dp2", variant="module_only_no_optim"),
    "seed_z1_fp16_no_optim_step": dict(kind="seedbug", src="z1_fp16_dp2", variant="no_optim_step"),
    "seed_z2_bf16_no_optim": dict(kind="seedbug", src="z2_bf16_dp2", variant="no_optim"),
    "seed_z2_bf16_module_only": dict(kind="seedbug", src="z2_bf16_dp2", variant="module_only"),
    "seed_z2_bf16_module_only_no_optim": dict(kind="seedbug", src="z2_bf16_dp2", variant="module_only_no_optim"),
    "seed_bf16opt_no_optim": dict(kind="seedbug", src="bf16opt_s1_dp2", variant="no_optim"),
    # model B (A + one Linear) loads A's trained checkpoint with load_module_strict=False and saves: moments of A
    "addlayer_z2_fp16_strict_false": dict(kind="addlayer", src="z2_fp16_dp2", variant="strict_false", model="B"),
    # the checkpoints committed under tests/fixtures/deepspeed (the tests that need no DeepSpeed read them there);
    # the harness is deterministic, so these rewrite them bit for bit
    "zero1_fp16_ws2": dict(kind="train", stage=1, dtype="fp16", dp=2, steps=5),
    "zero2_fp16_ws2": dict(kind="train", stage=2, dtype="fp16", dp=2, steps=5),
    "zero2_bf16_ws2": dict(kind="train", stage=2, dtype="bf16", dp=2, steps=5),
    "zero3_fp16_ws2": dict(kind="train", stage=3, dtype="fp16", dp=2, steps=5),
    "bf16opt_zero1_ws2": dict(kind="train", stage=1, dtype="bf16", dp=2, steps=5, bf16opt=True),
    # DeepSpeed v0.14.5 (#762 fixed in 0.13)
    "v145_z2_fp16_dp2": dict(kind="train", stage=2, dtype="fp16", dp=2, steps=5, ds="0.14.5"),
    "v145_seed_z2_fp16_no_optim": dict(kind="seedbug", src="v145_z2_fp16_dp2", variant="no_optim", ds="0.14.5"),
    "v145_z2_bf16_dp3": dict(kind="train", stage=2, dtype="bf16", dp=3, steps=4, ds="0.14.5"),
    # today's DeepSpeed: 0.19.x on torch 2 (the judge venv, scripts/setup-judges.sh). #762 is fixed, and ZeRO's
    # initialize() no longer runs a step: a fresh engine, or a load without optimizer states, saves no Adam state.
    "v019_z1_fp16_dp2": dict(kind="train", stage=1, dtype="fp16", dp=2, steps=5, ds="0.19"),
    "v019_z1_bf16_dp2": dict(kind="train", stage=1, dtype="bf16", dp=2, steps=5, ds="0.19"),
    "v019_z2_fp16_dp2": dict(kind="train", stage=2, dtype="fp16", dp=2, steps=5, ds="0.19"),
    "v019_z2_bf16_dp2": dict(kind="train", stage=2, dtype="bf16", dp=2, steps=5, ds="0.19"),
    "v019_z3_fp16_dp2": dict(kind="train", stage=3, dtype="fp16", dp=2, steps=5, ds="0.19"),
    "v019_z3_bf16_dp2": dict(kind="train", stage=3, dtype="bf16", dp=2, steps=5, ds="0.19"),
    # ZeRO-3 with a frozen param (the edge model's fc1.bias): convert --to universal refuses it
    "v019_z3_fp16_dp2_edge": dict(kind="train", stage=3, dtype="fp16", dp=2, steps=3, model="edge", ds="0.19"),
    # bf16 at ZeRO stage 0: FP16_UnfusedOptimizer in bf16 mode (torch's AdamW is not a fused Adam; FusedAdam, on a
    # GPU, gives FP16_Optimizer), its whole state in the model file (ckptdoc reads it; ds_load_check.py does not
    # know that wrapper).
    "v019_bf16_z0_dp2": dict(kind="train", stage=0, dtype="bf16", dp=2, steps=5, ds="0.19"),
    # the same with DeepSpeed's FusedAdam (cpu_fused_adam.py: its CUDA kernel's arithmetic in torch): FP16_Optimizer
    # in bf16 mode, one flat fp32 master per param group (fp32_groups_flat) in the model file, param_shapes None
    "v019_bf16_z0_fused_dp2": dict(kind="train", stage=0, dtype="bf16", dp=2, steps=5, ds="0.19", fused_adam=True),
    # BF16_Optimizer: only ZeRO-1 with grad_accum_dtype fp32 in 0.19 (stage 0 raises "unsupported mix of
    # model_dtype=torch.bfloat16 and grad_accum_dtype=torch.float32")
    "v019_bf16opt_s1_dp2": dict(kind="train", stage=1, dtype="bf16", dp=2, steps=5, bf16opt=True, ds="0.19"),
    # model B (A + one Linear), fresh: the template of a graft of v019_z2_fp16_dp2
    "v019_z2_fp16_dp2_modelB_fresh": dict(kind="train", stage=2, dtype="fp16", dp=2, steps=0, model="B", ds="0.19"),
    # the #762 recipe on 0.19: masters refreshed by the load, no optimizer state saved
    "v019_seed_z2_fp16_no_optim": dict(kind="seedbug", src="v019_z2_fp16_dp2", variant="no_optim", ds="0.19"),
    # a tiny model at dp 8: since 0.16.4 alignment padding sits on several trailing ranks, and ranks can hold
    # no element of a group at all (0-length partitions)
    "v019_z2_fp16_dp8_tiny": dict(kind="train", stage=2, dtype="fp16", dp=8, steps=3, dims="6,5,3,2", ds="0.19"),
    # bf16 masters and bf16 Adam moments (0.18.3+): no fp32 anywhere in the optimizer files
    "v019_z2_bf16_dp2_bf16_states": dict(kind="train", stage=2, dtype="bf16", dp=2, steps=5, ds="0.19",
                                         config_extra={"bf16": {"enabled": True, "bf16_master_weights_and_grads": True,
                                                                "bf16_optimizer_states": True}}),
    # 16-bit masters need ZeRO-Offload with DeepSpeedCPUAdam (ZeRO asserts its exact type), so these use DeepSpeed's
    # own DeepSpeedCPUAdam with its C++ op done in torch (cpu_adam.py). fp16 masters and grads (ZeRO-2, ZeRO-3):
    "v019_z2_fp16_dp2_fp16_masters": dict(kind="train", stage=2, dtype="fp16", dp=2, steps=5, ds="0.19",
                                          cpu_adam=True, zero_extra={"offload_optimizer": {"device": "cpu"}},
                                          config_extra={"fp16": dict(FP16_HARNESS, fp16_master_weights_and_grads=True)}),
    "v019_z3_fp16_dp2_fp16_masters": dict(kind="train", stage=3, dtype="fp16", dp=2, steps=5, ds="0.19",
                                          cpu_adam=True, zero_extra={"offload_optimizer": {"device": "cpu"}},
                                          config_extra={"fp16": dict(FP16_HARNESS, fp16_master_weights_and_grads=True)}),
    # CPU-offloaded bf16 masters and bf16 moments (0.19.1+)
    "v019_z2_bf16_dp2_offload_bf16_states": dict(kind="train", stage=2, dtype="bf16", dp=2, steps=5, ds="0.19",
                                                 cpu_adam=True, zero_extra={"offload_optimizer": {"device": "cpu"}},
                                                 config_extra={"bf16": {"enabled": True,
                                                                        "bf16_master_weights_and_grads": True,
                                                                        "bf16_optimizer_states": True}}),
    # checkpoint.checkpoint_serialization false: torch's legacy (non-zip) file format
    "v019_z2_fp16_dp2_legacy": dict(kind="train", stage=2, dtype="fp16", dp=2, steps=5, ds="0.19",
                                    config_extra={"checkpoint": {"checkpoint_serialization": False}}),
    # kind "synthrecipe": synth_recipe_train.py, the transformer `ckptdoc synth --vocab` writes (tied head, same
    # names and order), small: the synthetic writer's layout is checked against these (test_realds_synth_layout)
    "v019_synthrecipe_z2_bf16_dp2": dict(kind="synthrecipe", stage=2, dtype="bf16", dp=2, steps=2, ds="0.19",
                                         synth=dict(vocab=61, hidden=12, layers=2)),
    "v019_synthrecipe_z2_bf16_dp4": dict(kind="synthrecipe", stage=2, dtype="bf16", dp=4, steps=2, ds="0.19",
                                         synth=dict(vocab=61, hidden=12, layers=2)),
    "v019_synthrecipe_z3_fp16_dp2": dict(kind="synthrecipe", stage=3, dtype="fp16", dp=2, steps=2, ds="0.19",
                                         synth=dict(vocab=61, hidden=12, layers=2)),
    # kind "client": our client_state_driver.py, saving the client state Megatron-DeepSpeed saves
    # (universal_checkpoint_info, iteration). dims 96,304,176,16 give groups of 85,504 and 1,104 elements: no
    # alignment padding at dp 1, 2 and 4, which ds_to_universal.py of v0.12.6 needs with torch's Adam.
    "uci_z2_fp16_dp2": dict(kind="client", stage=2, dtype="fp16", dp=2, steps=5, dims="96,304,176,16",
                            client=["--universal-info", "--iteration", "global_steps"]),
    # the same client state on model A, whose groups need padding: v0.12.6's converter fails on it
    "uci_z2_bf16_dp2_padded": dict(kind="client", stage=2, dtype="bf16", dp=2, steps=3,
                                   client=["--universal-info", "--iteration", "global_steps"]),
    "uci_bf16opt_s1_dp2": dict(kind="client", stage=1, dtype="bf16", dp=2, steps=4, bf16opt=True,
                               dims="96,304,176,16", client=["--universal-info"]),
    "v145_uci_z1_bf16_dp2": dict(kind="client", stage=1, dtype="bf16", dp=2, steps=4, ds="0.14.5",
                                 client=["--universal-info"]),
    # tensor-, pipeline- and expert-parallel jobs (par_models.py, written by par_train.py, loaded by par_load_check.py);
    # `model` names the par_models kind, `dp` is the data-parallel size, `world` the number of ranks
    "par_pipe3d": dict(kind="par", model="pipe3d", stage=1, dtype="bf16", bf16opt=True, pp=2, tp=2, dp=2, world=8,
                       steps=3),
    "par_tp": dict(kind="par", model="tp", stage=2, dtype="fp16", pp=1, tp=2, dp=2, world=4, steps=3),
    "par_moe": dict(kind="par", model="moe", stage=2, dtype="fp16", pp=1, tp=1, ep=2, dp=4, world=4, steps=3),
    "par_tp_z3": dict(kind="par", model="tp_z3", stage=3, dtype="fp16", pp=1, tp=2, dp=2, world=4, steps=3),
    # v0.14.5 records the expert groups' param_slice_mappings with the expert-data-parallel size (PR #5681)
    "v019_par_tp": dict(kind="par", model="tp", stage=2, dtype="fp16", pp=1, tp=2, dp=2, world=4, steps=3, ds="0.19"),
    # four tensor ranks: enough copies of a replicated param for a majority to name the one that drifted
    "v019_par_tp4": dict(kind="par", model="tp", stage=2, dtype="fp16", pp=1, tp=4, dp=1, world=4, steps=3,
                         ds="0.19"),
    "v019_par_moe": dict(kind="par", model="moe", stage=2, dtype="fp16", pp=1, tp=1, ep=2, dp=4, world=4, steps=3,
                         ds="0.19"),
    # the pipeline on 0.19 (0.19.5+ records checkpoint_parallel_dimensions {pp_degree, tp_degree} in every model file)
    "v019_par_pipe3d": dict(kind="par", model="pipe3d", stage=1, dtype="bf16", bf16opt=True, pp=2, tp=2, dp=2,
                            world=8, steps=3, ds="0.19"),
    # AutoTP (0.18.9+): DeepSpeed partitions a plain HuggingFace Llama itself ("tensor_parallel": {"autotp_size": 2})
    # and writes universal_checkpoint_info; autotp_train.py's references are the engine's consolidated 16-bit
    # weights and ds_to_universal.py's fp32 masters and moments
    "v019_autotp_z1": dict(kind="par", model="autotp", stage=1, dtype="bf16", pp=1, tp=2, dp=2, world=4, steps=3,
                           ds="0.19"),
    "par_moe_v145": dict(kind="par", model="moe", stage=2, dtype="fp16", pp=1, tp=1, ep=2, dp=4, world=4, steps=3,
                         ds="0.14.5"),
    # kind "hftrainer": a real transformers Trainer run under DeepSpeed (hf_trainer_train.py, a tiny Llama, bf16,
    # saves at steps 2 and 4); the entry is the Trainer's OUT/checkpoint-4 folder as users point at it.
    # ZeRO-3 with stage3_gather_16bit_weights_on_model_save and a tied head: model.safetensors holds the gathered
    # 16-bit weights; without the option there is no weights file at all; ZeRO-2: the engine's module weights.
    "v019_hf_trainer_z3": dict(kind="hftrainer", stage=3, dtype="bf16", dp=2, steps=4, gather=True, tied=True,
                               ds="0.19", model="llama"),
    "v019_hf_trainer_z3_nogather": dict(kind="hftrainer", stage=3, dtype="bf16", dp=2, steps=4, gather=False,
                                        tied=True, ds="0.19", model="llama"),
    # DeepSpeed 0.17.6 (before 0.18.0) with checkpoint.load_universal set: every ZeRO-3 rank saves its model file
    # under rank 0's name (#7546), so only zero_pp_rank_0's is left; its twin without the setting is the same run
    # saved whole (the harness is deterministic), the reference of the restored files' values
    "v0176_z3_fp16_dp2": dict(kind="train", stage=3, dtype="fp16", dp=2, steps=3, ds="0.17.6"),
    "v0176_z3_fp16_dp2_load_universal": dict(kind="train", stage=3, dtype="fp16", dp=2, steps=3, ds="0.17.6",
                                             config_extra={"checkpoint": {"load_universal": True}}),
    # DeepSpeed 0.18.4: bf16 at ZeRO stage 0 saves no optimizer state at all (0.17.6-0.18.4, #7571); the same
    # recipe as tests/fixtures/deepspeed/v0184_bf16_z0_ws2 (committed for the tests without DeepSpeed)
    "v0184_bf16_z0_dp2": dict(kind="train", stage=0, dtype="bf16", dp=2, steps=5, ds="0.18.4"),
    "v019_hf_trainer_z2": dict(kind="hftrainer", stage=2, dtype="bf16", dp=2, steps=4, tied=False, ds="0.19",
                               model="llama"),
    # kind "hftrainer_plain": a real Trainer run without DeepSpeed (hf_trainer_plain_train.py, one CPU process,
    # fp32, torch AdamW, saves at steps 2 and 4); checkpoint-4 holds optimizer.pt (torch.save of
    # optimizer.state_dict()), scheduler.pt, rng_state.pth and training_args.bin beside model.safetensors
    "hf_trainer_plain": dict(kind="hftrainer_plain", stage=0, dtype="fp32", dp=1, steps=4, ds="0.19",
                             model="llama"),
    # kind "ulysses": ulysses_train.py, model A with DeepSpeed's Ulysses sequence-parallel groups (ALST's
    # parallel_state_sp as the engine's mpu). ZeRO partitions over sp x dp ranks (`dp`, what the model file's
    # dp_world_size records); `world` ranks, `sp` of them per sequence-parallel group.
    "v019_ulysses_sp2": dict(kind="ulysses", stage=1, dtype="bf16", dp=2, sp=2, world=2, steps=3, ds="0.19"),
    "v019_ulysses_sp2_dp2": dict(kind="ulysses", stage=2, dtype="fp16", dp=4, sp=2, world=4, steps=3, ds="0.19"),
    # The same two runs on DeepSpeed 0.18.4, which names each rank's optimizer file by its sequence-parallel rank
    # (zero_pp_rank_D_mp_rank_{D % sp}); 0.17.6 cannot save with that mpu (no get_model_parallel_rank)
    "v0184_ulysses_sp2": dict(kind="ulysses", stage=1, dtype="bf16", dp=2, sp=2, world=2, steps=3, ds="0.18.4"),
    "v0184_ulysses_sp2_dp2": dict(kind="ulysses", stage=2, dtype="fp16", dp=4, sp=2, world=4, steps=3,
                                  ds="0.18.4"),
    # AutoEP (0.19.3+) under ZeRO-3: autoep_train.py, a tiny MoE whose 4 experts DeepSpeed spreads over ep 2 ranks.
    # The expert sub-group is partitioned over the expert-data-parallel group (1 rank), the dense ones over both:
    # the optimizer files carry ds_zero_partition_groups, the model files ds_autoep_layers; zero_to_fp32.py refuses
    # it (ref/run.json records that, and that a fresh engine loads it)
    "v019_autoep_z3": dict(kind="par", model="autoep", stage=3, dtype="bf16", pp=1, tp=1, ep=2, dp=2, world=2,
                           steps=2, ds="0.19"),
    # the same at 4 ranks with 6 experts (3 per ep rank) and odd sizes (dims HIDDEN,FFN,EXPERTS): the expert
    # sub-group over expert-data-parallel groups of 2 ranks ({0, 2} and {1, 3}), the dense ones over 4, padding
    # in both
    "v019_autoep_z3_w4": dict(kind="par", model="autoep", stage=3, dtype="bf16", pp=1, tp=1, ep=2, dp=4, world=4,
                              steps=2, dims="9,7,6", ds="0.19"),
    # kind "accelerate": accelerate_fsdp_train.py, a tiny transformers GPT-2 under Accelerate 1.16's FSDP2 plugin
    # (SHARDED_STATE_DICT) saved with accelerator.save_state; ref/ holds accelerate's merge_fsdp_weights output
    # (model.safetensors, pytorch_model.bin). No `latest`: the save_state folder is the checkpoint.
    "accelerate_fsdp2_ws2": dict(kind="accelerate", stage=0, dtype="fp32", dp=2, world=2, steps=3, ds="0.19",
                                 model="gpt2"),
    # the same run stopped after 2 steps (same seed): other Adam moments, for `diff --what exp_avg` against a
    # second real save (test_realds_accelerate momentsDiffAgreesWithTorch)
    "accelerate_fsdp2_ws2_step2": dict(kind="accelerate", stage=0, dtype="fp32", dp=2, world=2, steps=2, ds="0.19",
                                       model="gpt2"),
    # the same run with the plugin's FULL_STATE_DICT (accelerate_fsdp_full_train.py): pytorch_model_fsdp.bin and an
    # optimizer.bin keyed by FQN instead of the DCP folders; no ref/ (merge_fsdp_weights reads DCP folders only)
    "accelerate_fsdp2_full_ws2": dict(kind="accelerate", stage=0, dtype="fp32", dp=2, world=2, steps=3, ds="0.19",
                                      model="gpt2", state_dict="full"),
    # kind "dcpformat" (#28): dcp_format_save.py, torch's own dcp.save (no process group) of a tiny model state dict
    # (a NaN in model.0.weight, a bf16 tensor) in one of torch 2.10's other storage variants: FileSystemWriter's
    # SerializationFormat.SAFETENSORS (.distcp files that are safetensors), HuggingFaceStorageWriter (model-0000i-of-
    # 0000N.safetensors and an index). ref/ holds the saved state dict; run.json what torch's own readers made of it
    "dcp_safetensors_ws1": dict(kind="dcpformat", fmt="safetensors", stage=0, dtype="fp32", dp=1, world=1, steps=0,
                                ds="0.19"),
    # the same with non-tensor state (train_state.step, .note: bytes items), which torch writes first: the safetensors
    # part then starts after them, at the offset every tensor item of the file names
    "dcp_safetensors_state_ws1": dict(kind="dcpformat", fmt="safetensors_state", stage=0, dtype="fp32", dp=1,
                                      world=1, steps=0, ds="0.19"),
    # FileSystemWriter(_extensions=[ZStandard()]): every storage item "stream.zstd" (zstandard from
    # scripts/judges-extra-zstd.txt, which the venv lacks)
    "dcp_zstd_ws1": dict(kind="dcpformat", fmt="zstd", stage=0, dtype="fp32", dp=1, world=1, steps=0, ds="0.19"),
    # the same with non-tensor state (train_state.step, .note): zstd bytes items, whose decoded size nothing records
    "dcp_zstd_state_ws1": dict(kind="dcpformat", fmt="zstd_state", stage=0, dtype="fp32", dp=1, world=1, steps=0,
                               ds="0.19"),
    "dcp_hf_writer_ws1": dict(kind="dcpformat", fmt="hf", stage=0, dtype="fp32", dp=1, world=1, steps=0, ds="0.19"),
    # HuggingFaceStorageWriter(save_distributed=True) at world 2 (judge's launch.py, gloo), no consolidation: each
    # rank's shard-0000r-model-00001-of-00001.safetensors holds its piece of a tensor under the tensor's own name
    "dcp_hf_distributed_ws2": dict(kind="dcpformat", fmt="hf_distributed", stage=0, dtype="fp32", dp=2, world=2,
                                   steps=0, ds="0.19"),
    # FileSystemWriter's SAFETENSORS serialization at world 2 (judge's launch.py, gloo): 2-D tensors DTensor
    # Shard(0), so each rank's __<rank>_0.distcp holds its row pieces, their offsets in DCP_SHARDING_INFO
    "dcp_safetensors_ws2": dict(kind="dcpformat", fmt="safetensors_distributed", stage=0, dtype="fp32", dp=2,
                                world=2, steps=0, ds="0.19"),
    # The same DCP saves written by torch latest (2.15.0, scripts/judges-torch-latest.txt; #28): FSDP2 at world 2
    # with its Adam in torchtitan's layout (kind "fsdp2": tests/fixtures/dcp/make_fsdp2_dcp.py, whose
    # reference.json is torch's own reading of the save), the SAFETENSORS serialization at world 1 and 2, the
    # ZStandard extension (the venv has zstandard), HuggingFaceStorageWriter
    "t215_fsdp2_ws2": dict(kind="fsdp2", stage=0, dtype="fp32", dp=2, world=2, steps=3, ds=TORCH_LATEST),
    "t215_dcp_safetensors_ws1": dict(kind="dcpformat", fmt="safetensors", stage=0, dtype="fp32", dp=1, world=1,
                                     steps=0, ds=TORCH_LATEST),
    "t215_dcp_safetensors_ws2": dict(kind="dcpformat", fmt="safetensors_distributed", stage=0, dtype="fp32", dp=2,
                                     world=2, steps=0, ds=TORCH_LATEST),
    "t215_dcp_zstd_ws1": dict(kind="dcpformat", fmt="zstd", stage=0, dtype="fp32", dp=1, world=1, steps=0,
                              ds=TORCH_LATEST),
    "t215_dcp_hf_writer_ws1": dict(kind="dcpformat", fmt="hf", stage=0, dtype="fp32", dp=1, world=1, steps=0,
                                   ds=TORCH_LATEST),
    # kind "torchtitan" (#28): torchtitan_train.py, torchtitan 0.3.0's llama3 debugmodel (2 layers) under FSDP2 at
    # world 2, its own optimizers, LR schedulers, dataloader and CheckpointManager; save_dir is the manager's folder:
    # step-2/ (interval 2: model, optimizer, lr_scheduler, dataloader, train_state) and step-3/ (the last step,
    # model only, export_dtype bfloat16)
    "torchtitan_fsdp2_ws2": dict(kind="torchtitan", stage=0, dtype="fp32", dp=2, world=2, steps=3, ds="0.19"),
    # kind "crossformat" (#28): cross_format_train.py, model A trained the same 3 steps by DeepSpeed ZeRO-2 and by
    # FSDP2 at world 2, each saved by its own framework: save_dir/deepspeed, save_dir/fsdp2 (torchtitan's layout)
    # and save_dir/reference.json (each framework's reading of its save, compared weight by weight, and exp_avg)
    "crossformat_zero2_fsdp2_ws2": dict(kind="crossformat", stage=2, dtype="fp32", dp=2, world=2, steps=3, ds="0.19"),
    # kind "megatron" (#28): megatron_train.py, a tiny megatron-core GPTModel at TP 2 (dp 1) on gloo, saved with
    # megatron.core.dist_checkpointing.save (torch_dist) as <ckpt>/iter_0000002/ and latest_checkpointed_iteration.txt;
    # run.json records what of megatron-core needs CUDA (the forward, every optimizer)
    "v019_megatron_tp2": dict(kind="megatron", stage=0, dtype="fp32", dp=1, tp=2, world=2, steps=2, ds="0.19"),
    # the same run saved by megatron-core 0.18.0 with verify_integrity=True (megatron_integrity_train.py): its
    # iteration folder holds integrity.json, each file's sha256 (test_realds_megatron_integrity)
    "v019_megatron_tp2_integrity": dict(kind="megatron", stage=0, dtype="fp32", dp=1, tp=2, world=2, steps=2,
                                        ds="0.19", mcore="0.18.0", integrity=True),
    # a Llama-shaped megatron-core GPTModel (RMSNorm, SwiGLU, RoPE, 2 query groups, no biases, untied), TP 2,
    # fp32, saved the same way (megatron_llama_train.py): the model Megatron Bridge converts to Hugging Face
    "v019_megatron_llama_tp2": dict(kind="megatron", variant="llama", stage=0, dtype="fp32", dp=1, tp=2, world=2,
                                    steps=2, ds="0.19"),
    # kind "megatron_bridge" (#28): NVIDIA Megatron Bridge 0.3.1's own Megatron -> Hugging Face export of `src`'s
    # save (megatron_bridge_export.py, TP 2 on gloo); save_dir is the Hugging Face folder (model.safetensors)
    "v019_megatron_llama_tp2_bridge_hf": dict(kind="megatron_bridge", src="v019_megatron_llama_tp2", stage=0,
                                              dtype="fp32", dp=1, tp=2, world=2, steps=2, ds="0.19"),
    # kind "megatron_optim" (#28): megatron_optim_train.py, the same model in bf16 with megatron-core's own
    # optimizer (CPU shims listed there), saved with its sharded state dict. bf16_distopt: 2 steps of the
    # DistributedOptimizer, param_state_sharding_type fully_reshardable (optimizer.state.param.<key>, healthy mains);
    # finetune_stale: a --finetune-style run from it (model loaded, optimizer not, no reload_model_params) with the
    # non-distributed Float16OptimizerWithFloat16Params, saved at iteration 0: optimizer.state.fp32_param.<key> hold
    # the initial values (stale mains)
    "v019_megatron_bf16_distopt": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed", stage=0,
                                       dtype="bf16", dp=1, tp=2, world=2, steps=2, ds="0.19"),
    # bf16_distopt_stale: a --finetune-style run from it with the same DistributedOptimizer and fully_reshardable
    # state (megatron_distopt_finetune_train.py), saved at iteration 0: optimizer.state.param.<key> hold the initial
    # values (stale mains)
    "v019_megatron_bf16_distopt_stale": dict(kind="megatron_optim", mode="finetune", optimizer="distributed",
                                             sharding="fully_reshardable", src="v019_megatron_bf16_distopt", stage=0,
                                             dtype="bf16", dp=1, tp=2, world=2, steps=0, ds="0.19"),
    # bf16_local: 2 steps of the non-distributed optimizer (optimizer.state.fp32_param.<key> and moments, healthy):
    # the finetune save's layout, what megatron_load_check.py loads
    "v019_megatron_bf16_local": dict(kind="megatron_optim", mode="pretrain", optimizer="local", stage=0,
                                     dtype="bf16", dp=1, tp=2, world=2, steps=2, ds="0.19"),
    # the same three layouts saved by megatron-core 0.15.3, whose torch_dist strategy pickles .metadata as its own
    # MCoreMetadata (a subclass of torch's Metadata with an `mcore_data` field); 0.16 went back to torch's class
    "v019_megatron_bf16_local_mcore015": dict(kind="megatron_optim", mode="pretrain", optimizer="local", stage=0,
                                              dtype="bf16", dp=1, tp=2, world=2, steps=2, ds="0.19", mcore="0.15.3"),
    "v019_megatron_bf16_distopt_mcore015": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                                stage=0, dtype="bf16", dp=1, tp=2, world=2, steps=2, ds="0.19",
                                                mcore="0.15.3"),
    # param_state_sharding_type fully_sharded_model_space (megatron_model_space_train.py): 0.15.3 saves each rank's
    # flattened range of the mains and moments nd-flattened (stored shape: fragments per axis, then one fragment's
    # elements; mcore_data names the original shape); _stale: a --finetune-style run from it, mains stale
    "v019_megatron_bf16_model_space_mcore015": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                                    model_space=True, stage=0, dtype="bf16", dp=1, tp=2, world=2,
                                                    steps=2, ds="0.19", mcore="0.15.3"),
    "v019_megatron_bf16_model_space_mcore015_stale": dict(kind="megatron_optim", mode="finetune",
                                                          optimizer="distributed", model_space=True,
                                                          src="v019_megatron_bf16_model_space_mcore015", stage=0,
                                                          dtype="bf16", dp=1, tp=2, world=2, steps=0, ds="0.19",
                                                          mcore="0.15.3"),
    # bf16_distopt_step1: the same after 1 step, so its param groups' step 1.0 is spelled like their lr_mult and
    # wd_mult (1.0): --reset-optimizer must rewrite the steps alone (test_realds_megatron repairResetsTheOptimizer)
    "v019_megatron_bf16_distopt_step1": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                             stage=0, dtype="bf16", dp=1, tp=2, world=2, steps=1, ds="0.19"),
    # bf16_distopt_dp_reshardable: the same as bf16_distopt, saved with Megatron-LM's default
    # param_state_sharding_type "dp_reshardable" (megatron_bucket_train.py): the optimizer state in bucket space,
    # 1-D optimizer.distributed.dp_group_idx_<i>.gbuf_idx_<g>.dtype_(...).bucket_idx_<b>.{param,exp_avg,exp_avg_sq}
    # and each dp group's param groups (the step) in a ShardedObject optimizer.distributed.dp_group_idx_<i>.optimizer
    "v019_megatron_bf16_distopt_dp_reshardable": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                                      sharding="dp_reshardable", stage=0, dtype="bf16", dp=1, tp=2,
                                                      world=2, steps=2, ds="0.19"),
    # bf16_distopt_dp_reshardable_stale: a --finetune-style run from it (model loaded, optimizer not, no
    # reload_model_params) with the same DistributedOptimizer in bucket space, saved at iteration 0
    # (megatron_bucket_finetune_train.py): the `param` buckets hold the initial values (stale mains)
    "v019_megatron_bf16_distopt_dp_reshardable_stale": dict(kind="megatron_optim", mode="finetune",
                                                            optimizer="distributed", sharding="dp_reshardable",
                                                            src="v019_megatron_bf16_distopt_dp_reshardable", stage=0,
                                                            dtype="bf16", dp=1, tp=2, world=2, steps=0, ds="0.19"),
    # the same saves by megatron-core 0.19.2 (PyPI's newest on 2026-12-07), which keeps the state that is not
    # sharded in the DCP (bytes item common_state/shard_0_1, a torch.save of [state]) and writes no common.pt:
    # the model-only save with integrity.json, and the default bucket layout with its --finetune-style stale copy
    "v019_megatron_tp2_mcore019": dict(kind="megatron", stage=0, dtype="fp32", dp=1, tp=2, world=2, steps=2,
                                       ds="0.19", mcore="0.19.2", integrity=True),
    "v019_megatron_bf16_local_mcore019": dict(kind="megatron_optim", mode="pretrain", optimizer="local", stage=0,
                                              dtype="bf16", dp=1, tp=2, world=2, steps=2, ds="0.19",
                                              mcore="0.19.2"),
    "v019_megatron_bf16_distopt_dp_reshardable_mcore019": dict(kind="megatron_optim", mode="pretrain",
                                                               optimizer="distributed", sharding="dp_reshardable",
                                                               stage=0, dtype="bf16", dp=1, tp=2, world=2, steps=2,
                                                               ds="0.19", mcore="0.19.2"),
    "v019_megatron_bf16_distopt_dp_reshardable_stale_mcore019": dict(
        kind="megatron_optim", mode="finetune", optimizer="distributed", sharding="dp_reshardable",
        src="v019_megatron_bf16_distopt_dp_reshardable_mcore019", stage=0, dtype="bf16", dp=1, tp=2, world=2,
        steps=0, ds="0.19", mcore="0.19.2"),
    # the other layouts by 0.19.2: the DistributedOptimizer fully_reshardable (its step in the common_state item)
    # and its --finetune-style stale copy, the MoE ep2 bucket save and its stale copy. Not fully_sharded_model_space: 0.19.2's own
    # sharded_param_state_fs_model_space raises "ShardedTensor.flattened_range is not supported"
    "v019_megatron_bf16_distopt_mcore019": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                                stage=0, dtype="bf16", dp=1, tp=2, world=2, steps=2, ds="0.19",
                                                mcore="0.19.2"),
    "v019_megatron_bf16_distopt_stale_mcore019": dict(kind="megatron_optim", mode="finetune", optimizer="distributed",
                                                      sharding="fully_reshardable",
                                                      src="v019_megatron_bf16_distopt_mcore019", stage=0,
                                                      dtype="bf16", dp=1, tp=2, world=2, steps=0, ds="0.19",
                                                      mcore="0.19.2"),
    "v019_megatron_bf16_distopt_moe_ep2_mcore019": dict(kind="megatron_optim", mode="pretrain",
                                                        optimizer="distributed", sharding="dp_reshardable", experts=4,
                                                        ep=2, stage=0, dtype="bf16", dp=2, tp=1, world=2, steps=2,
                                                        ds="0.19", mcore="0.19.2"),
    "v019_megatron_bf16_distopt_moe_ep2_stale_mcore019": dict(kind="megatron_optim", mode="finetune",
                                                              optimizer="distributed", sharding="dp_reshardable",
                                                              experts=4, ep=2,
                                                              src="v019_megatron_bf16_distopt_moe_ep2_mcore019",
                                                              stage=0, dtype="bf16", dp=2, tp=1, world=2, steps=0,
                                                              ds="0.19", mcore="0.19.2"),
    # bf16_distopt_dp2_buckets: bucket space at tp 1 x dp 2 (world 2) with overlap_grad_reduce and bucket_size 300
    # (megatron_bucket_small_train.py): 10 buckets per group, each cut at its DP shards; _stale: its --finetune-style
    # run (stale mains, saved before a step)
    "v019_megatron_bf16_distopt_dp2_buckets": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                                   sharding="dp_reshardable", bucket_size=300, stage=0, dtype="bf16",
                                                   dp=2, tp=1, world=2, steps=2, ds="0.19"),
    # bf16_distopt_dp3_buckets: the same at dp 3 (world 3), where megatron-core pads each bucket to a multiple of
    # lcm(3, 128) = 384 rather than 128 (param_and_grad_buffer.py); check 6 of test_realds_megatron
    "v019_megatron_bf16_distopt_dp3_buckets": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                                   sharding="dp_reshardable", bucket_size=300, stage=0, dtype="bf16",
                                                   dp=3, tp=1, world=3, steps=2, ds="0.19"),
    "v019_megatron_bf16_distopt_dp2_buckets_stale": dict(kind="megatron_optim", mode="finetune",
                                                         optimizer="distributed", sharding="dp_reshardable",
                                                         bucket_size=300,
                                                         src="v019_megatron_bf16_distopt_dp2_buckets", stage=0,
                                                         dtype="bf16", dp=2, tp=1, world=2, steps=0, ds="0.19"),
    # bf16_distopt_pp2_tied: bucket space over 2 pipeline stages with tied embeddings (tp 1, dp 1, world 2; bucket_size
    # 300; megatron_bucket_map_probe.py --train --pp 2 --tied): each stage's copy of the word embeddings in a bucket of
    # its own, the last stage's saved only as a replica; _stale: its --finetune-style run
    "v019_megatron_bf16_distopt_pp2_tied": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                                sharding="dp_reshardable", bucket_size=300, pp=2, tied=True, stage=0,
                                                dtype="bf16", dp=1, tp=1, world=2, steps=2, ds="0.19"),
    "v019_megatron_bf16_distopt_pp2_tied_stale": dict(kind="megatron_optim", mode="finetune", optimizer="distributed",
                                                      sharding="dp_reshardable", bucket_size=300, pp=2, tied=True,
                                                      src="v019_megatron_bf16_distopt_pp2_tied", stage=0,
                                                      dtype="bf16", dp=1, tp=1, world=2, steps=0, ds="0.19"),
    # bf16_distopt_tp2_pp2: bucket space over 2 pipeline stages of 2 tensor ranks each (dp 1, world 4; untied
    # embeddings; bucket_size 300; megatron_bucket_map_probe.py --train --pp 2): four dp groups, one per (stage, tensor
    # rank); _stale: its --finetune-style run
    "v019_megatron_bf16_distopt_tp2_pp2": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                               sharding="dp_reshardable", bucket_size=300, pp=2, stage=0,
                                               dtype="bf16", dp=1, tp=2, world=4, steps=2, ds="0.19"),
    "v019_megatron_bf16_distopt_tp2_pp2_stale": dict(kind="megatron_optim", mode="finetune", optimizer="distributed",
                                                     sharding="dp_reshardable", bucket_size=300, pp=2,
                                                     src="v019_megatron_bf16_distopt_tp2_pp2", stage=0,
                                                     dtype="bf16", dp=1, tp=2, world=4, steps=0, ds="0.19"),
    # bf16_distopt_moe_ep2: mixture-of-experts MLPs (4 SequentialMLP experts, top-2 router, the allgather token
    # dispatcher: alltoall's needs CUDA) at expert parallel 2 (tp 1, world 2: dense dp 2, expert dp 1) in bucket
    # space (megatron_moe_train.py): megatron-core's ChainedOptimizer of a dense and an expert DistributedOptimizer,
    # their keys chained_0.optimizer.distributed.* and chained_1.optimizer.distributed.*; _stale: its
    # --finetune-style run
    "v019_megatron_bf16_distopt_moe_ep2": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                               sharding="dp_reshardable", experts=4, ep=2, stage=0, dtype="bf16",
                                               dp=2, tp=1, world=2, steps=2, ds="0.19"),
    "v019_megatron_bf16_distopt_moe_ep2_stale": dict(kind="megatron_optim", mode="finetune", optimizer="distributed",
                                                     sharding="dp_reshardable", experts=4, ep=2,
                                                     src="v019_megatron_bf16_distopt_moe_ep2", stage=0,
                                                     dtype="bf16", dp=2, tp=1, world=2, steps=0, ds="0.19"),
    # bf16_distopt_pp2_vpp2: a virtual pipeline, 2 stages of 2 model chunks (4 layers, one per chunk; tp 1, dp 1,
    # world 2) in bucket space (megatron_vpp_train.py): one gbuf_idx per chunk in each stage's dp group, the model
    # saved as model0 / model1 as Megatron-LM saves it; _stale: its --finetune-style run
    "v019_megatron_bf16_distopt_pp2_vpp2": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                                sharding="dp_reshardable", pp=2, vpp=2, stage=0, dtype="bf16", dp=1,
                                                tp=1, world=2, steps=2, ds="0.19"),
    "v019_megatron_bf16_distopt_pp2_vpp2_stale": dict(kind="megatron_optim", mode="finetune", optimizer="distributed",
                                                      sharding="dp_reshardable", pp=2, vpp=2,
                                                      src="v019_megatron_bf16_distopt_pp2_vpp2", stage=0,
                                                      dtype="bf16", dp=1, tp=1, world=2, steps=0, ds="0.19"),
    # bf16_distopt_dp2_buckets_nan / _negative_sq: dp2_buckets' run with one fault megatron-core itself writes into one
    # param's slice of the buckets (megatron_bucket_damage_train.py): a NaN gradient element that its Adam carries into
    # the main, both moments and the bf16 weight; one exp_avg_sq element set negative in its optimizer state before
    # the save
    "v019_megatron_bf16_distopt_dp2_buckets_nan": dict(kind="megatron_optim", mode="pretrain", optimizer="distributed",
                                                       sharding="dp_reshardable", bucket_size=300, stage=0,
                                                       dtype="bf16", dp=2, tp=1, world=2, steps=2, ds="0.19",
                                                       damage=["nan", "decoder.layers.1.mlp.linear_fc2.weight"]),
    "v019_megatron_bf16_distopt_dp2_buckets_negative_sq": dict(
        kind="megatron_optim", mode="pretrain", optimizer="distributed", sharding="dp_reshardable", bucket_size=300,
        stage=0, dtype="bf16", dp=2, tp=1, world=2, steps=2, ds="0.19",
        damage=["negative_sq", "decoder.layers.0.self_attention.linear_proj.weight"]),
    "v019_megatron_finetune_stale": dict(kind="megatron_optim", mode="finetune", optimizer="local",
                                         src="v019_megatron_bf16_distopt", stage=0, dtype="bf16", dp=1, tp=2,
                                         world=2, steps=0, ds="0.19"),
    # kind "megatron_legacy" (#28): Megatron-LM's own save_checkpoint with ckpt_format "torch" (megatron.training
    # 0.18.0, megatron_legacy_train.py): iter_NNNNNNN/mp_rank_TT/model_optim_rng.pt, the tiny bf16 GPTModel with
    # the non-distributed Float16OptimizerWithFloat16Params (optimizer.fp32_from_fp16_params). tp1 / tp2: 2 steps
    # (healthy mains); _finetune: Megatron-LM's load_checkpoint of tp2 with --finetune (0.18.0 then calls
    # optimizer.reload_model_params(): healthy mains), saved at iteration 0; _stale: the same load without that
    # call, as Megatron-LM did before it was added (#174): the mains keep the initial values
    "v019_megatron_legacy_tp1": dict(kind="megatron_legacy", mode="pretrain", stage=0, dtype="bf16", dp=1, tp=1,
                                     world=1, steps=2, ds="0.19", mcore="0.18.0"),
    "v019_megatron_legacy_tp2": dict(kind="megatron_legacy", mode="pretrain", stage=0, dtype="bf16", dp=1, tp=2,
                                     world=2, steps=2, ds="0.19", mcore="0.18.0"),
    "v019_megatron_legacy_tp2_finetune": dict(kind="megatron_legacy", mode="finetune", src="v019_megatron_legacy_tp2",
                                              stage=0, dtype="bf16", dp=1, tp=2, world=2, steps=0, ds="0.19",
                                              mcore="0.18.0"),
    "v019_megatron_legacy_tp2_stale": dict(kind="megatron_legacy", mode="stale", src="v019_megatron_legacy_tp2",
                                           stage=0, dtype="bf16", dp=1, tp=2, world=2, steps=0, ds="0.19",
                                           mcore="0.18.0"),
    # tp2_nan: tp2's run with one NaN element in decoder.layers.1.mlp.linear_fc2.weight's last gradient (each tensor
    # rank's piece), which megatron-core's Adam carries into that param's main, both moments and the bf16 weight
    "v019_megatron_legacy_tp2_nan": dict(kind="megatron_legacy", mode="pretrain", stage=0, dtype="bf16", dp=1, tp=2,
                                         world=2, steps=2, ds="0.19", mcore="0.18.0",
                                         nan_in="decoder.layers.1.mlp.linear_fc2.weight"),
    # pp2 / pp2_stale: 2 pipeline stages (tp 1, world 2, untied embeddings): mp_rank_00_000/ and mp_rank_00_001/, each
    # stage's layers numbered from 0
    "v019_megatron_legacy_pp2": dict(kind="megatron_legacy", mode="pretrain", stage=0, dtype="bf16", dp=1, tp=1, pp=2,
                                     world=2, steps=2, ds="0.19", mcore="0.18.0"),
    "v019_megatron_legacy_pp2_stale": dict(kind="megatron_legacy", mode="stale", src="v019_megatron_legacy_pp2",
                                           stage=0, dtype="bf16", dp=1, tp=1, pp=2, world=2, steps=0, ds="0.19",
                                           mcore="0.18.0"),
    # distopt_dp2 / _stale: megatron-core's DistributedOptimizer (--use-distributed-optimizer) at tp 1 x dp 2: each
    # mp_rank folder's distrib_optim.pt (save_parameter_state, buckets coalesced) holds the fp32 mains; _stale is
    # the --finetune load without reload_model_params, its torch Adam state filled as a fresh one's before the save
    "v019_megatron_legacy_distopt_dp2": dict(kind="megatron_legacy", mode="pretrain", optimizer="distributed",
                                             stage=0, dtype="bf16", dp=2, tp=1, world=2, steps=2, ds="0.19",
                                             mcore="0.18.0"),
    "v019_megatron_legacy_distopt_dp2_stale": dict(kind="megatron_legacy", mode="stale", optimizer="distributed",
                                                   src="v019_megatron_legacy_distopt_dp2", stage=0, dtype="bf16",
                                                   dp=2, tp=1, world=2, steps=0, ds="0.19", mcore="0.18.0"),
    # tp2_no_load_optim_stale: the same stale load with --no-load-optim instead of --finetune (iteration 2 resumed)
    "v019_megatron_legacy_tp2_no_load_optim_stale": dict(kind="megatron_legacy", mode="stale_no_load_optim",
                                                         src="v019_megatron_legacy_tp2", stage=0, dtype="bf16",
                                                         dp=1, tp=2, world=2, steps=0, ds="0.19", mcore="0.18.0"),
    "v019_megatron_legacy_tp1_stale": dict(kind="megatron_legacy", mode="stale", src="v019_megatron_legacy_tp1",
                                           stage=0, dtype="bf16", dp=1, tp=1, world=1, steps=0, ds="0.19",
                                           mcore="0.18.0"),
}

DEFAULTS = dict(model="A", bf16opt=False, zero_extra=None, ds="0.12.6", steps=5, dims=None, client=(), pp=1, tp=1, ep=1,
                config_extra=None, fused_adam=False, cpu_adam=False)


class Unavailable(Exception):
    pass


def die(msg, code=2):
    print(f"realds.py: {msg}", file=sys.stderr)
    sys.exit(code)


def shared_dir(a):
    return os.path.abspath(a.shared or os.environ.get("CKPTDOC_SHARED") or os.path.join(REPO, "..", "shared"))


def cache_dir(a):
    d = a.cache or os.environ.get("CKPTDOC_REALDS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "ckptdoc", "realds")
    os.makedirs(d, exist_ok=True)
    return os.path.abspath(d)


def harness(a):
    return os.path.join(shared_dir(a), "deepspeed", "harness")


def check_available(a):
    ds = os.path.join(shared_dir(a), "deepspeed")
    if not os.path.isfile(os.path.join(ds, "setup.sh")) or not os.path.isdir(os.path.join(ds, "harness")):
        raise Unavailable(f"real DeepSpeed not found: no {ds}/setup.sh and harness/ (clone with ../shared beside it)")
    if not os.access(PYTHON, os.X_OK):
        raise Unavailable(f"{PYTHON} not found (Debian's python3-torch)")
    marker = os.path.join(cache_dir(a), ".modules-ok")  # the import probe costs a second; every test asks
    if os.path.isfile(marker):
        return
    probe = subprocess.run([PYTHON, "-c", "import torch, pydantic, cpuinfo, psutil, packaging, yaml, msgpack, tqdm"],
                           capture_output=True, text=True)
    if probe.returncode:
        raise Unavailable("python modules DeepSpeed needs are missing (run scripts/setup.sh): "
                          + probe.stderr.strip().splitlines()[-1])
    open(marker, "w").close()


class Lock:
    """An exclusive flock on a file in the cache: tests running in parallel share one generation of each entry."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.f = open(self.path, "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def is_judge(version):
    return version in JUDGE_VERSIONS or version in EXTRA_DS


def judges_venv(a):
    """The judge venv's folder: as scripts/setup-judges.sh names it (a hash of the pins file)."""
    if a.judges_venv or os.environ.get("CKPTDOC_JUDGES_VENV"):
        return os.path.abspath(a.judges_venv or os.environ["CKPTDOC_JUDGES_VENV"])
    h = hashlib.sha256(open(PINS, "rb").read()).hexdigest()[:12]
    return os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "ckptdoc", f"judges-{h}")


def torch_latest_python(a):
    """The torch-latest venv's python (LATEST_PINS), made by scripts/setup-judges.sh beside the judge venv."""
    h = hashlib.sha256(open(LATEST_PINS, "rb").read()).hexdigest()[:12]
    venv = os.path.join(os.path.dirname(judges_venv(a)), f"torch-latest-{h}")
    py = os.path.join(venv, "bin", "python")
    if not os.path.isfile(os.path.join(venv, ".ckptdoc-judges-ready")) or not os.access(py, os.X_OK):
        raise Unavailable(f"torch latest (the torch-latest venv) is not made: {venv} is not ready "
                          "(run scripts/setup-judges.sh)")
    return py


def torch_latest_env():
    """The torch-latest venv's environment: nothing of the judge venv's but its rank hook (judge/hooks: each rank
    leaves its process group at a clean exit; without it a rank of dcp_drop_check.py now and then aborted at
    teardown, "terminate called without an active exception")."""
    env = dict(os.environ)
    for k in ("DS_SRC", "CKPTDOC_HARNESS"):
        env.pop(k, None)
    env["PYTHONPATH"] = os.path.join(JUDGE, "hooks")
    return env


def torch_latest_launch(a, world):
    """torch.distributed.run of the torch-latest venv: `world` ranks on this machine, a free port (--standalone)."""
    return [torch_latest_python(a), "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world)]


def judge_python(a):
    venv = judges_venv(a)
    py = os.path.join(venv, "bin", "python")
    if not os.path.isfile(os.path.join(venv, ".ckptdoc-judges-ready")) or not os.access(py, os.X_OK):
        raise Unavailable(f"DeepSpeed 0.19 on torch 2 (the judge venv) is not made: {venv} is not ready "
                          "(run scripts/setup-judges.sh)")
    return py


def judge_env(a, base=None, version="0.19"):
    """Environment of the judge venv's python: the harness (ds_common, ds_driver, ds_load_check) found through
    CKPTDOC_HARNESS, DeepSpeed from the venv (no DS_SRC) or, for an older `version`, from its folder beside the
    venv, the CPU accelerator."""
    env = dict(base if base is not None else os.environ)
    env.pop("DS_SRC", None)
    env.update(CKPTDOC_HARNESS=harness(a), DS_ACCELERATOR="cpu")
    if version in EXTRA_DS:
        env["PYTHONPATH"] = os.pathsep.join([ds_extra(a, version)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def debian_env(a, version, base=None):
    """Environment of the 2023 stack (Debian's python and torch 1.13, DeepSpeed `version` from its extracted
    source): judge/launch.py forks its ranks like the venv's, with the PYTHONPATH the harness's launch.py gives them."""
    env = dict(base if base is not None else os.environ)
    env.update(CKPTDOC_HARNESS=harness(a), CKPTDOC_JUDGE_STACK="debian", DS_SRC=ds_src(a, version))
    return env


def ds_extra(a, version):
    """The folder of DeepSpeed `version` (scripts/judges-extra-deepspeed.txt), which scripts/setup-judges.sh
    installs beside the judge venv: that script is the one installer."""
    venv = judges_venv(a)
    judge_python(a)  # the venv must be made
    folder = os.path.join(os.path.dirname(venv), "ds-extra", version)
    if not os.path.isfile(os.path.join(folder, "deepspeed", "__init__.py")):
        raise Unavailable(f"DeepSpeed {version} is not installed in {folder} (run scripts/setup-judges.sh)")
    return folder


def mcore_extra(a, version):
    """The folder of megatron-core `version` (scripts/judges-extra-megatron-core.txt), installed beside the judge
    venv by scripts/setup-judges.sh."""
    venv = judges_venv(a)
    judge_python(a)
    folder = os.path.join(os.path.dirname(venv), "mcore-extra", version)
    if version not in EXTRA_MCORE or not os.path.isfile(os.path.join(folder, "megatron", "core", "__init__.py")):
        raise Unavailable(f"megatron-core {version} is not installed in {folder} (run scripts/setup-judges.sh)")
    return folder


def bridge_extra(a):
    """The folder of Megatron Bridge and its pins (scripts/judges-extra-megatron-bridge.txt), installed beside the
    judge venv by scripts/setup-judges.sh."""
    venv = judges_venv(a)
    judge_python(a)
    folder = os.path.join(os.path.dirname(venv), "bridge-extra",
                          hashlib.sha256(open(BRIDGE_PINS, "rb").read()).hexdigest()[:12])
    if not os.path.isfile(os.path.join(folder, "megatron", "bridge", "__init__.py")):
        raise Unavailable(f"Megatron Bridge is not installed in {folder} (run scripts/setup-judges.sh)")
    return folder


def zstd_extra(a):
    """The folder of zstandard (scripts/judges-extra-zstd.txt), installed beside the judge venv by
    scripts/setup-judges.sh: torch's DCP ZStandard extension imports it."""
    venv = judges_venv(a)
    judge_python(a)
    folder = os.path.join(os.path.dirname(venv), "zstd-extra",
                          hashlib.sha256(open(ZSTD_PINS, "rb").read()).hexdigest()[:12])
    if not os.path.isdir(os.path.join(folder, "zstandard")):
        raise Unavailable(f"zstandard is not installed in {folder} (run scripts/setup-judges.sh)")
    return folder


def titan_extra(a):
    """The folder of torchtitan and its pins (scripts/judges-extra-torchtitan.txt), installed beside the judge venv
    by scripts/setup-judges.sh."""
    venv = judges_venv(a)
    judge_python(a)
    folder = os.path.join(os.path.dirname(venv), "titan-extra",
                          hashlib.sha256(open(TITAN_PINS, "rb").read()).hexdigest()[:12])
    if not os.path.isfile(os.path.join(folder, "torchtitan", "__init__.py")):
        raise Unavailable(f"torchtitan is not installed in {folder} (run scripts/setup-judges.sh)")
    return folder


def ds_src(a, version):
    """Extracts DeepSpeed `version` into the cache with ../shared/deepspeed/setup.sh; returns the folder."""
    cache = cache_dir(a)
    target = os.path.join(cache, f"deepspeed-v{version}")
    with Lock(os.path.join(cache, f".deepspeed-v{version}.lock")):
        env = dict(os.environ, DS_VERSION=version)
        p = subprocess.run(["bash", os.path.join(shared_dir(a), "deepspeed", "setup.sh"), target], env=env,
                           capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"setup.sh for DeepSpeed {version} failed:\n{p.stderr[-3000:]}")
    return target


def spec_of(name):
    if name not in MATRIX:
        die(f"unknown matrix entry {name!r}; `realds.py list` shows them")
    s = dict(DEFAULTS)
    s.update(MATRIX[name])
    if s["kind"] in ("seedbug", "addlayer"):
        src = spec_of(s["src"])
        for k in ("stage", "dtype", "dp", "model", "bf16opt", "zero_extra", "config_extra"):
            if not (k == "model" and s["kind"] == "addlayer"):  # the saving engine's model is B
                s[k] = src[k]
    s["name"] = name
    return s


def file_sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()[:16]


def stamp_of(a, spec):
    h = harness(a)
    # keys at their defaults that older entries did not have leave those entries' stamps (and caches) as they were
    recipe = {k: v for k, v in spec.items()
              if not ((k in ("dims", "client", "config_extra", "fused_adam", "cpu_adam") and not v) or
                      (k in ("pp", "tp", "ep") and v == 1))}
    parts = [json.dumps(recipe, sort_keys=True), str(GENERATOR_VERSION)]
    parts += [file_sha(os.path.join(h, f)) for f in ("ds_driver.py", "ds_common.py")]
    parts.append(file_sha(os.path.join(JUDGE, "launch.py")))  # every stack's ranks start there
    if spec["ds"] == TORCH_LATEST:  # the venv's pins and its ranks' hook
        parts += [file_sha(LATEST_PINS), file_sha(os.path.join(JUDGE, "hooks", "sitecustomize.py"))]
    if spec["kind"] == "fsdp2":
        parts.append(file_sha(os.path.join(REPO, "tests", "fixtures", "dcp", "make_fsdp2_dcp.py")))
    if is_judge(spec["ds"]):  # the judge venv's rank hooks and the pinned versions
        parts.append(file_sha(os.path.join(JUDGE, "hooks", "sitecustomize.py")))
        parts.append(file_sha(PINS))
    if spec.get("fused_adam"):
        parts += [file_sha(os.path.join(HERE, f)) for f in ("cpu_fused_adam.py", "engine_hook/sitecustomize.py")]
    if spec.get("cpu_adam"):
        parts += [file_sha(os.path.join(HERE, f)) for f in ("cpu_adam.py", "engine_hook/sitecustomize.py")]
    if spec["kind"] == "client":
        parts.append(file_sha(os.path.join(HERE, "client_state_driver.py")))
    if spec["kind"] == "par":
        parts += [file_sha(os.path.join(HERE, f)) for f in ("par_models.py", par_driver(spec))]
    if spec["kind"] == "hftrainer":
        parts.append(file_sha(os.path.join(HERE, "hf_trainer_train.py")))
    if spec["kind"] == "hftrainer_plain":  # it takes hf_trainer_train.py's model and data
        parts += [file_sha(os.path.join(HERE, f)) for f in ("hf_trainer_train.py", "hf_trainer_plain_train.py")]
    if spec["kind"] == "ulysses":
        parts.append(file_sha(os.path.join(HERE, "ulysses_train.py")))
    if spec["kind"] == "synthrecipe":
        parts.append(file_sha(os.path.join(HERE, "synth_recipe_train.py")))
    if spec["kind"] == "accelerate":
        parts.append(file_sha(os.path.join(HERE, "accelerate_fsdp_train.py")))
        if spec.get("state_dict") == "full":
            parts.append(file_sha(os.path.join(HERE, "accelerate_fsdp_full_train.py")))
    if spec["kind"] == "dcpformat":
        parts.append(file_sha(os.path.join(HERE, "dcp_format_save.py")))
        if spec["fmt"].startswith("zstd"):
            parts.append(file_sha(ZSTD_PINS))
    if spec["kind"] == "torchtitan":
        parts += [file_sha(os.path.join(HERE, "torchtitan_train.py")), file_sha(TITAN_PINS)]
    if spec["kind"] == "crossformat":
        parts += [file_sha(os.path.join(HERE, f)) for f in ("cross_format_train.py", "par_models.py")]
    if spec["kind"] == "megatron" and spec.get("variant") == "llama":
        parts.append(file_sha(os.path.join(HERE, "megatron_llama_train.py")))
    elif spec["kind"] == "megatron":
        parts.append(file_sha(os.path.join(HERE, "megatron_train.py")))
    if spec["kind"] == "megatron_bridge":
        parts += [file_sha(os.path.join(HERE, "megatron_bridge_export.py")), file_sha(BRIDGE_PINS),
                  stamp_of(a, spec_of(spec["src"]))]
        if spec.get("integrity"):
            parts.append(file_sha(os.path.join(HERE, "megatron_integrity_train.py")))
    if spec["kind"] == "megatron_legacy":
        parts += [file_sha(os.path.join(HERE, n)) for n in ("megatron_legacy_train.py", "megatron_optim_train.py")]
        if spec.get("src"):
            parts.append(stamp_of(a, spec_of(spec["src"])))
    if spec["kind"] == "megatron_optim":
        parts.append(file_sha(os.path.join(HERE, "megatron_optim_train.py")))
        if spec.get("sharding"):
            parts.append(file_sha(os.path.join(HERE, "megatron_bucket_train.py")))
            if spec["mode"] == "finetune":
                parts.append(file_sha(os.path.join(HERE, "megatron_bucket_finetune_train.py")))
                if spec["sharding"] == "fully_reshardable":
                    parts.append(file_sha(os.path.join(HERE, "megatron_distopt_finetune_train.py")))
            if spec.get("bucket_size"):
                parts.append(file_sha(os.path.join(HERE, "megatron_bucket_small_train.py")))
            if spec.get("tied") or spec["pp"] > 1:
                parts.append(file_sha(os.path.join(HERE, "megatron_bucket_map_probe.py")))
            if spec.get("damage"):
                parts.append(file_sha(os.path.join(HERE, "megatron_bucket_damage_train.py")))
            if spec.get("experts"):
                parts.append(file_sha(os.path.join(HERE, "megatron_moe_train.py")))
            if spec.get("vpp"):
                parts.append(file_sha(os.path.join(HERE, "megatron_vpp_train.py")))
        if spec.get("model_space"):
            parts += [file_sha(os.path.join(HERE, f)) for f in ("megatron_model_space_train.py",
                                                                "megatron_bucket_finetune_train.py")]
        if spec.get("src"):  # a run that loads another entry is remade with it
            parts.append(stamp_of(a, spec_of(spec["src"])))
    if spec.get("mcore") in MCORE_015_SHIMS:
        parts.append(file_sha(os.path.join(HERE, "megatron_015_shims.py")))
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:20]


def par_driver(spec):
    """The per-rank training script of a "par" entry: AutoTP has its own (a HuggingFace model DeepSpeed shards)."""
    return {"autotp": "autotp_train.py", "autoep": "autoep_train.py"}.get(spec["model"], "par_train.py")


def run_logged(cmd, env, log_path, timeout=900):
    t0 = time.time()
    with open(log_path, "w") as log:
        p = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
    if p.returncode:
        tail = open(log_path, errors="replace").read()[-4000:]
        raise RuntimeError(f"{' '.join(cmd[:6])} ... failed ({p.returncode}):\n{tail}")
    return time.time() - t0


def base_args(spec):
    args = ["--stage", str(spec["stage"]), "--dtype", spec["dtype"]]
    if spec["bf16opt"]:
        args.append("--bf16-optimizer")
    return args


def ensure(a, name):
    """Writes matrix entry `name` unless the cache already holds it (same recipe); returns its entry dict."""
    spec = spec_of(name)
    if spec["kind"] in ("seedbug", "addlayer") or spec.get("src"):
        ensure(a, spec["src"])
    cache = cache_dir(a)
    folder = os.path.join(cache, name)
    entry_path = os.path.join(folder, "entry.json")
    stamp = stamp_of(a, spec)
    with Lock(os.path.join(cache, f".{name}.lock")):
        if os.path.isfile(entry_path):
            entry = json.load(open(entry_path))
            if entry.get("stamp") == stamp and os.path.isdir(entry["save_dir"]):
                return entry
        h = harness(a)
        if spec["ds"] == TORCH_LATEST:  # its own python and environment; ranks by torch.distributed.run below
            py, env = torch_latest_python(a), torch_latest_env()
        elif is_judge(spec["ds"]):
            py, launcher = judge_python(a), os.path.join(JUDGE, "launch.py")
            env = judge_env(a, version=spec["ds"])
            if spec["kind"] in ("seedbug", "addlayer"):  # ds_driver.py's own torch.load of DeepSpeed's files (torch >= 2.6)
                env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
        else:
            py, launcher = PYTHON, os.path.join(JUDGE, "launch.py")
            env = debian_env(a, spec["ds"])
        if spec["kind"] == "megatron_bridge":  # Megatron Bridge and its transformers before the venv's
            env["PYTHONPATH"] = os.pathsep.join([bridge_extra(a)] +
                                                ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        # zstandard for torch's ZStandard extension (the torch-latest venv has its own)
        if spec.get("fmt", "").startswith("zstd") and spec["ds"] != TORCH_LATEST:
            env["PYTHONPATH"] = os.pathsep.join([zstd_extra(a)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        if spec["kind"] == "torchtitan":  # torchtitan and its pins before the venv's
            env["PYTHONPATH"] = os.pathsep.join([titan_extra(a)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        if spec.get("mcore"):  # this entry's megatron-core before the venv's
            env["PYTHONPATH"] = os.pathsep.join([mcore_extra(a, spec["mcore"])] +
                                                ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        if spec.get("config_extra") or spec.get("fused_adam") or spec.get("cpu_adam"):  # ds_driver.py has no option
            env = with_engine_hook(env, {k: spec.get(k) for k in ("config_extra", "fused_adam", "cpu_adam")})
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        save_dir = os.path.join(folder, "ckpt")
        if spec["ds"] == TORCH_LATEST:
            launch = torch_latest_launch(a, spec.get("world", spec["dp"])) + [os.path.join(h, "ds_driver.py")]
        else:
            launch = [py, launcher, "--world", str(spec.get("world", spec["dp"])), "--logdir",
                      os.path.join(folder, "logs"), "--", os.path.join(h, "ds_driver.py")]
        if spec["kind"] == "client":
            cmd = launch[:-1] + [os.path.join(HERE, "client_state_driver.py"), "--out", save_dir, "--steps",
                                 str(spec["steps"])] + base_args(spec) + list(spec["client"])
            if spec["dims"]:
                cmd += ["--dims", spec["dims"]]
        elif spec["kind"] == "par" and spec["model"] == "autotp":
            cmd = launch[:-1] + [os.path.join(HERE, par_driver(spec)), "--out", save_dir, "--ref",
                                 os.path.join(folder, "ref"), "--steps", str(spec["steps"]), "--tp", str(spec["tp"]),
                                 "--stage", str(spec["stage"]), "--dtype", spec["dtype"]]
        elif spec["kind"] == "par" and spec["model"] == "autoep":
            cmd = launch[:-1] + [os.path.join(HERE, par_driver(spec)), "--out", save_dir, "--ref",
                                 os.path.join(folder, "ref"), "--steps", str(spec["steps"]), "--ep", str(spec["ep"]),
                                 "--stage", str(spec["stage"]), "--dtype", spec["dtype"]]
            if spec["dims"]:  # HIDDEN,FFN,EXPERTS
                cmd += ["--dims", spec["dims"]]
        elif spec["kind"] == "hftrainer":  # the Trainer's folder of the last save is the checkpoint
            run = os.path.join(folder, "run")
            save_dir = os.path.join(run, f"checkpoint-{spec['steps']}")
            cmd = launch[:-1] + [os.path.join(HERE, "hf_trainer_train.py"), "--out", run, "--stage",
                                 str(spec["stage"]), "--steps", str(spec["steps"]), "--save-steps", "2"]
            cmd += (["--gather"] if spec.get("gather") else []) + (["--tied"] if spec.get("tied") else [])
        elif spec["kind"] == "hftrainer_plain":  # one process, no launcher: the Trainer's folder of the last save
            save_dir = os.path.join(folder, "run", f"checkpoint-{spec['steps']}")
            cmd = [py, os.path.join(HERE, "hf_trainer_plain_train.py"), "--out", os.path.join(folder, "run"),
                   "--steps", str(spec["steps"]), "--save-steps", "2"]
        elif spec["kind"] == "ulysses":
            cmd = launch[:-1] + [os.path.join(HERE, "ulysses_train.py"), "--out", save_dir, "--sp", str(spec["sp"]),
                                 "--steps", str(spec["steps"]), "--json", os.path.join(folder, "run.json")]
            cmd += base_args(spec)
        elif spec["kind"] == "synthrecipe":
            cmd = launch[:-1] + [os.path.join(HERE, "synth_recipe_train.py"), "--out", save_dir, "--steps",
                                 str(spec["steps"])] + base_args(spec)
            cmd += [x for k in ("vocab", "hidden", "layers") for x in (f"--{k}", str(spec["synth"][k]))]
        elif spec["kind"] == "accelerate" and spec.get("state_dict") == "full":
            cmd = launch[:-1] + [os.path.join(HERE, "accelerate_fsdp_full_train.py"), "--out", save_dir, "--steps",
                                 str(spec["steps"]), "--json", os.path.join(folder, "run.json")]
        elif spec["kind"] == "dcpformat":  # one process, no launcher: dcp.save's no_dist path
            cmd = ([py] if spec["world"] == 1 else launch[:-1]) + [
                os.path.join(HERE, "dcp_format_save.py"), "--out", save_dir, "--format", spec["fmt"], "--ref",
                os.path.join(folder, "ref"), "--json", os.path.join(folder, "run.json")]
        elif spec["kind"] == "fsdp2":  # make_fsdp2_dcp.py: the save, torch's reading of it, damaged .metadata files
            cmd = launch[:-1] + [os.path.join(REPO, "tests", "fixtures", "dcp", "make_fsdp2_dcp.py"), save_dir,
                                 os.path.join(folder, "reference.json"), os.path.join(folder, "damaged")]
        elif spec["kind"] == "crossformat":  # save_dir holds both saves and the reference
            cmd = launch[:-1] + [os.path.join(HERE, "cross_format_train.py"), "--out", save_dir, "--steps",
                                 str(spec["steps"])]
        elif spec["kind"] == "torchtitan":  # the CheckpointManager's folder (step-2/, step-3/) is the save
            save_dir = os.path.join(folder, "run", "checkpoint")
            cmd = launch[:-1] + [os.path.join(HERE, "torchtitan_train.py"), "train", "--out",
                                 os.path.join(folder, "run"), "--steps", str(spec["steps"]), "--json",
                                 os.path.join(folder, "run.json")]
        elif spec["kind"] == "accelerate":
            cmd = launch[:-1] + [os.path.join(HERE, "accelerate_fsdp_train.py"), "--out", save_dir, "--steps",
                                 str(spec["steps"]), "--ref", os.path.join(folder, "ref"), "--json",
                                 os.path.join(folder, "run.json")]
        elif spec["kind"] == "megatron_bridge":
            src = ensure(a, spec["src"])
            save_dir = os.path.join(folder, "hf")
            cmd = launch[:-1] + [os.path.join(HERE, "megatron_bridge_export.py"), "--ckpt",
                                 os.path.join(src["save_dir"], f"iter_{int(src['tag']):07d}"), "--out", save_dir,
                                 "--tp", str(spec["tp"]), "--json", os.path.join(folder, "run.json")]
        elif spec["kind"] == "megatron":
            script = "megatron_integrity_train.py" if spec.get("integrity") else "megatron_train.py"
            if spec.get("variant") == "llama":
                script = "megatron_llama_train.py"
            cmd = launch[:-1] + [os.path.join(HERE, script), "--out", save_dir, "--tp", str(spec["tp"]),
                                 "--steps", str(spec["steps"]), "--json", os.path.join(folder, "run.json")]
        elif spec["kind"] == "megatron_legacy":
            cmd = launch[:-1] + [os.path.join(HERE, "megatron_legacy_train.py"), "--out", save_dir, "--mode",
                                 spec["mode"], "--tp", str(spec["tp"]), "--steps", str(spec["steps"]), "--json",
                                 os.path.join(folder, "run.json")]
            if spec.get("src"):
                cmd += ["--load", ensure(a, spec["src"])["save_dir"]]
            if spec.get("nan_in"):
                cmd += ["--nan-in", spec["nan_in"]]
            if spec["pp"] > 1:
                cmd += ["--pp", str(spec["pp"])]
            if spec.get("optimizer") == "distributed":
                cmd += ["--optimizer", "distributed"]
        elif spec["kind"] == "megatron_optim" and spec.get("vpp"):  # its own arguments: no --tp, --optimizer
            cmd = launch[:-1] + [os.path.join(HERE, "megatron_vpp_train.py"), "--out", save_dir, "--mode",
                                 spec["mode"], "--pp", str(spec["pp"]), "--vpp", str(spec["vpp"]), "--steps",
                                 str(spec["steps"]), "--json", os.path.join(folder, "run.json")]
            if spec.get("src"):
                cmd += ["--load", ensure(a, spec["src"])["save_dir"]]
        elif spec["kind"] == "megatron_optim":
            script = "megatron_bucket_train.py" if spec.get("sharding") == "dp_reshardable" else "megatron_optim_train.py"
            if spec.get("sharding") == "dp_reshardable" and spec["mode"] == "finetune":
                script = "megatron_bucket_finetune_train.py"
            if spec.get("sharding") == "fully_reshardable" and spec["mode"] == "finetune":
                script = "megatron_distopt_finetune_train.py"
            if spec.get("bucket_size"):
                script = "megatron_bucket_small_train.py"
            if spec.get("damage"):
                script = "megatron_bucket_damage_train.py"
            if spec.get("experts"):
                script = "megatron_moe_train.py"
            if spec.get("model_space"):
                script = "megatron_model_space_train.py"
            cmd = launch[:-1] + [os.path.join(HERE, script), "--out", save_dir, "--mode",
                                 spec["mode"], "--optimizer", spec["optimizer"], "--tp", str(spec["tp"]), "--steps",
                                 str(spec["steps"]), "--json", os.path.join(folder, "run.json")]
            if spec.get("src"):
                cmd += ["--load", ensure(a, spec["src"])["save_dir"]]
            if spec.get("tied") or spec["pp"] > 1:  # the research probe's --train mode: pipeline stages
                at = cmd.index(os.path.join(HERE, script))
                cmd[at:at + 1] = [os.path.join(HERE, "megatron_bucket_map_probe.py"), "--train",
                                  str(spec["bucket_size"]), "--pp", str(spec["pp"])] + (["--tied"] if spec.get("tied")
                                                                                        else [])
            elif spec.get("bucket_size"):
                cmd += ["--bucket-size", str(spec["bucket_size"])]
            if spec.get("damage"):
                cmd += ["--damage"] + list(spec["damage"])
            if spec.get("mcore") in MCORE_015_SHIMS:  # see MCORE_015_SHIMS
                at = len(launch) - 1
                cmd.insert(at, os.path.join(HERE, "megatron_015_shims.py"))
            if spec.get("experts"):
                cmd += ["--experts", str(spec["experts"]), "--ep", str(spec["ep"])]
        elif spec["kind"] == "par":
            cmd = launch[:-1] + [os.path.join(HERE, "par_train.py"), "--kind", spec["model"], "--out", save_dir,
                                 "--ref", os.path.join(folder, "ref"), "--steps", str(spec["steps"]), "--tp",
                                 str(spec["tp"])]
        elif spec["kind"] == "train":
            cmd = launch + ["train", "--name", name, "--out", save_dir, "--steps", str(spec["steps"]), "--model",
                            spec["model"], "--no-truth"] + base_args(spec)
            if spec["zero_extra"]:
                cmd += ["--zero-extra", json.dumps(spec["zero_extra"])]
            if spec["dims"]:
                cmd += ["--dims", spec["dims"]]
        elif spec["kind"] == "addlayer":  # ds_driver.py saves the attempt's engine in <save-out>/<variant>
            src = ensure(a, spec["src"])
            save_dir = os.path.join(folder, "saved", spec["variant"])
            cmd = launch + ["addlayer", "--name", name, "--src", src["save_dir"], "--only", spec["variant"],
                            "--save-attempts", spec["variant"], "--save-out", os.path.join(folder, "saved"),
                            "--json", os.path.join(folder, "addlayer.json")]
        else:
            src = ensure(a, spec["src"])
            cmd = launch + ["seedbug", "--name", name, "--src", src["save_dir"], "--variant", spec["variant"],
                            "--save-out", save_dir, "--json", os.path.join(folder, "seedbug.json")] + base_args(spec)
        seconds = run_logged(cmd, env, os.path.join(folder, "generate.log"))
        if spec["kind"] in ("accelerate", "hftrainer_plain", "megatron_bridge", "dcpformat", "torchtitan",
                            "crossformat", "fsdp2"):
            tag = ""  # the save_state / checkpoint-N folder is the checkpoint
        else:
            tracker = ("latest_checkpointed_iteration.txt" if spec["kind"] in ("megatron", "megatron_optim", "megatron_legacy")
                       else "latest")
            tag = open(os.path.join(save_dir, tracker)).read().strip()
        entry = dict(spec, save_dir=save_dir, tag=tag, stamp=stamp, seconds=round(seconds, 1))
        with open(entry_path + ".tmp", "w") as f:
            json.dump(entry, f, indent=1)
        os.replace(entry_path + ".tmp", entry_path)
        return entry


def as_zygote_script(args):
    """python's arguments `args`, run through judge/run.py (a fork of a judge zygote) when they start with a script
    (not -c, -m or -P)."""
    return [RUN] + list(args) if args and args[0].endswith(".py") else list(args)


def load_check_cmd(a, entry, ckpt, json_out, world=None, model=None, extra=(), version=None):
    h = harness(a)
    if entry["kind"] == "par":
        judge = is_judge(version or entry["ds"])  # ranks started by the judges' launcher with the venv's python
        return ([judge_python(a) if judge else PYTHON, RUN, os.path.join(HERE, "par_load_check.py"), "--ckpt", ckpt,
                 "--kind", entry["model"], "--world", str(world or entry["world"]), "--harness", h, "--json",
                 json_out, "--launcher", os.path.join(JUDGE, "launch.py")] + list(extra))
    # the harness's ds_load_check.py, its ranks started by judge/launch.py (either stack: load_env says which)
    start = [judge_python(a) if is_judge(version or entry["ds"]) else PYTHON, RUN, os.path.join(JUDGE, "load_check.py")]
    cmd = start + ["--ckpt", ckpt, "--world", str(world or entry["dp"]),
           "--model", model or entry["model"], "--json", json_out, "--timeout", "1200"] + base_args(entry) + list(extra)
    if entry.get("dims"):
        cmd += ["--dims", entry["dims"]]
    return cmd


def load_env(a, entry, version=None):
    """Environment for ds_load_check.py loading a checkpoint like `entry`: its DeepSpeed version, and its extra ZeRO
    settings (engine_hook/sitecustomize.py builds the loading engine with them)."""
    version = version or entry["ds"]
    env = judge_env(a, version=version) if is_judge(version) else debian_env(a, version)
    return with_engine_hook(env, entry)


def with_engine_hook(env, spec):
    """`env` with engine_hook/ on PYTHONPATH and its settings when `spec` has extra ZeRO or config settings: the
    engines that write and load such a checkpoint are built with them."""
    if spec.get("zero_extra"):
        env["CKPTDOC_DS_ZERO_EXTRA"] = json.dumps(spec["zero_extra"])
    if spec.get("config_extra"):
        env["CKPTDOC_DS_CONFIG_EXTRA"] = json.dumps(spec["config_extra"])
    if spec.get("fused_adam"):
        env["CKPTDOC_DS_CPU_FUSED_ADAM"] = "1"
    if spec.get("cpu_adam"):
        env["CKPTDOC_DS_CPU_ADAM"] = "1"
    if spec.get("zero_extra") or spec.get("config_extra") or spec.get("fused_adam") or spec.get("cpu_adam"):
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(HERE, "engine_hook"), HERE] +
                                            ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def make_ref(a, name, kind):
    entry = ensure(a, name)
    folder = os.path.join(cache_dir(a), name, "ref")
    os.makedirs(folder, exist_ok=True)
    paths = {"fp32": "fp32.pt", "moments": "moments.pt", "lp": "lp.pt", "zero_to_fp32": "zero_to_fp32.bin"}
    base, _, size = kind.partition(":")
    if base in SHARDED_KINDS:  # a folder: zero_to_fp32.py OUT --max_shard_size SIZE [--safe_serialization]
        if not size or not all(c.isalnum() or c == "." for c in size):
            die(f"reference kind {base} needs a size such as {base}:3KB")
        paths[kind] = f"{base}-{size}"
    if kind not in paths:
        die(f"unknown reference kind {kind!r} (fp32, moments, lp, zero_to_fp32, "
            "zero_to_fp32_shards:SIZE, zero_to_fp32_bin_shards:SIZE)")
    out = os.path.join(folder, paths[kind])
    with Lock(os.path.join(folder, ".lock")):
        if os.path.exists(out):
            return out
        if entry["kind"] == "par":  # assembled by DeepSpeed in the training run itself (par_train.py)
            if kind == "zero_to_fp32":
                die(f"{name}: zero_to_fp32.py reads data-parallel checkpoints only")
            die(f"{name}: the training run wrote no {out}")
        env = load_env(a, entry)
        if kind in ("fp32", "moments"):
            # real DeepSpeed consolidates what it loaded (engine.load_checkpoint with optimizer states)
            tmp_f, tmp_m = os.path.join(folder, "fp32.tmp.pt"), os.path.join(folder, "moments.tmp.pt")
            cmd = load_check_cmd(a, entry, entry["save_dir"], os.path.join(folder, "input_load.json"),
                                 extra=["--dump-fp32", tmp_f, "--dump-moments", tmp_m])
            run_logged(cmd, env, os.path.join(folder, "input_load.log"))
            os.replace(tmp_m, os.path.join(folder, "moments.pt"))
            os.replace(tmp_f, os.path.join(folder, "fp32.pt"))
        elif kind == "lp":
            if is_judge(entry["ds"]):
                py = judge_python(a)
                env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"  # DeepSpeed's loss scaler and enums (torch >= 2.6)
            else:
                py = PYTHON
                env["PYTHONPATH"] = os.pathsep.join([env["DS_SRC"], os.path.join(harness(a), "stubs")])
            code = ("import sys, torch\n"
                    "sd = torch.load(sys.argv[1], map_location='cpu')['module']\n"
                    "torch.save({k: v.float() for k, v in sd.items()}, sys.argv[2])\n")
            model = os.path.join(entry["save_dir"], entry["tag"], "mp_rank_00_model_states.pt")
            run_logged([py, "-c", code, model, out + ".tmp"], env, os.path.join(folder, "lp.log"))
            os.replace(out + ".tmp", out)
        elif base in SHARDED_KINDS:
            if not is_judge(entry["ds"]):
                die(f"{name}: zero_to_fp32.py writes shards since DeepSpeed 0.15.3; this entry is {entry['ds']}")
            zero_to_fp32_folder(a, entry["save_dir"], out, ["--max_shard_size", size] +
                                (["--safe_serialization"] if SHARDED_KINDS[base] else []),
                                os.path.join(folder, paths[kind] + ".log"))
        else:
            zero_to_fp32(a, entry["save_dir"], out + ".tmp", entry["ds"], os.path.join(folder, "zero_to_fp32.log"))
            os.replace(out + ".tmp", out)
    return out


# Reference kinds that are a folder zero_to_fp32.py writes with --max_shard_size: safetensors shards or not.
SHARDED_KINDS = {"zero_to_fp32_shards": True, "zero_to_fp32_bin_shards": False}


def judge_zero_to_fp32_script(a):
    py = judge_python(a)
    return py, subprocess.run([py, "-c", "import deepspeed.utils.zero_to_fp32 as z; print(z.__file__)"],
                              env=judge_env(a), capture_output=True, text=True, check=True).stdout.strip()


def zero_to_fp32_folder(a, ckpt, out, args, log):
    """The judge venv's zero_to_fp32.py writing its output folder `out` (complete, or not there) with `args`."""
    py, script = judge_zero_to_fp32_script(a)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    run_logged([py, "-P", script, ckpt, tmp] + args, judge_env(a), log)
    os.replace(tmp, out)


def zero_to_fp32(a, ckpt, out, version, log):
    """DeepSpeed's own zero_to_fp32.py of `version`, run from its source tree on the save folder `ckpt`."""
    if is_judge(version):
        # the venv's copy; since 0.15.3 its second argument is an output folder (pytorch_model.bin, or shards and
        # an index above 5 GB, which the toy models never reach)
        py, script = judge_zero_to_fp32_script(a)
        tmp = out + ".dir"
        shutil.rmtree(tmp, ignore_errors=True)
        run_logged([py, "-P", script, ckpt, tmp], judge_env(a), log)
        os.replace(os.path.join(tmp, "pytorch_model.bin"), out)
        shutil.rmtree(tmp)
        return
    src = ds_src(a, version)
    script = os.path.join(src, "deepspeed", "utils", "zero_to_fp32.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.path.join(harness(a), "stubs")]),
               DS_ACCELERATOR="cpu")
    # -P: the script's own folder (deepspeed/utils, whose logging.py shadows the stdlib) stays off sys.path
    run_logged([PYTHON, "-P", script, ckpt, out], env, log)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache")
    ap.add_argument("--shared")
    ap.add_argument("--judges-venv")
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("status")
    st.add_argument("--ds", default=None)
    sub.add_parser("list")
    p = sub.add_parser("path")
    p.add_argument("name")
    sub.add_parser("all")
    r = sub.add_parser("ref")
    r.add_argument("name")
    r.add_argument("kind")
    c = sub.add_parser("check")
    c.add_argument("ckpt")
    c.add_argument("--like", required=True)
    c.add_argument("--json", required=True)
    c.add_argument("--world", type=int)
    c.add_argument("--model")
    c.add_argument("--ds")
    y = sub.add_parser("py")
    y.add_argument("--ds", default="0.12.6")
    y.add_argument("--mcore", default=None)  # a megatron-core of judges-extra-megatron-core.txt first (judge venv)
    z = sub.add_parser("zero-to-fp32")
    z.add_argument("ckpt")
    z.add_argument("out")
    z.add_argument("--ds", default="0.12.6")
    n = sub.add_parser("launch")
    n.add_argument("--world", type=int, default=2)
    n.add_argument("--ds", default="0.12.6")
    n.add_argument("--logdir", default=None)
    n.add_argument("--mcore", default=None)  # as py's: that megatron-core first (its shims, MCORE_015_SHIMS)
    n.add_argument("--torchtitan", action="store_true")  # torchtitan (judges-extra-torchtitan.txt) first
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    a, unknown = ap.parse_known_args(argv[:argv.index("--")] if "--" in argv else argv)
    if unknown:  # `py script.py ARGS` and `launch script.py ARGS` without "--": the script and its own arguments
        if a.cmd not in ("py", "launch") or "--" in argv:
            ap.error("unrecognized arguments: " + " ".join(unknown))
        rest = unknown

    if a.cmd == "list":
        for n in MATRIX:
            s = spec_of(n)
            print(f"{n:36s} {s['kind']:8s} stage {s['stage']} {s['dtype']} dp {s['dp']} model {s['model']}"
                  + (f" pp {s['pp']} tp {s['tp']} ep {s['ep']} world {s['world']}" if s["kind"] == "par" else "")
                  + (f" sp {s['sp']} world {s['world']}" if s["kind"] == "ulysses" else "")
                  + f"{' BF16_Optimizer' if s['bf16opt'] else ''} DeepSpeed {s['ds']}"
                  + (f" from {s['src']} ({s['variant']})" if s["kind"] in ("seedbug", "addlayer")
                     else f" steps {s['steps']}"))
        return 0
    try:
        check_available(a)
        if a.cmd == "status" and a.ds == TORCH_LATEST:
            print(f"torch latest available: {torch_latest_python(a)}")
            return 0
        if a.cmd == "status" and a.ds and is_judge(a.ds):
            extra = f" with {ds_extra(a, a.ds)}" if a.ds in EXTRA_DS else ""
            print(f"DeepSpeed {a.ds} available: {judge_python(a)}{extra}")
            return 0
    except Unavailable as e:
        print(f"realds.py: {e}", file=sys.stderr)
        return 77
    if a.cmd == "status":
        print("real DeepSpeed available: " + os.path.join(shared_dir(a), "deepspeed"))
        return 0
    try:
        if a.cmd == "path":
            print(json.dumps(ensure(a, a.name)))
        elif a.cmd == "all":
            for n in MATRIX:
                e = ensure(a, n)
                print(f"{n}: {e['save_dir']} ({e.get('seconds', 0)} s)", flush=True)
        elif a.cmd == "ref":
            print(make_ref(a, a.name, a.kind))
        elif a.cmd == "check":
            entry = ensure(a, a.like)
            env = load_env(a, entry, a.ds)
            cmd = load_check_cmd(a, entry, a.ckpt, a.json, world=a.world, model=a.model, extra=rest, version=a.ds)
            rc = subprocess.run(cmd, env=env).returncode
            with open(os.path.join(cache_dir(a), "loads.log"), "a") as log:  # how many real loads a test run made
                log.write(f"{time.strftime('%H:%M:%S')} rc={rc} like={a.like} ds={a.ds or entry['ds']} {' '.join(rest)}\n")
            return rc
        elif a.cmd == "py" and a.ds == TORCH_LATEST:  # no zygote (judge/run.py's preloads are the judge venv's)
            env = torch_latest_env()
            env["PYTHONPATH"] = os.pathsep.join([HERE, env["PYTHONPATH"]])
            return subprocess.run([torch_latest_python(a)] + rest, env=env).returncode
        elif a.cmd == "launch" and a.ds == TORCH_LATEST:  # its ranks' output goes to this process's (no --logdir)
            env = torch_latest_env()
            env["PYTHONPATH"] = os.pathsep.join([HERE, env["PYTHONPATH"]])
            return subprocess.run(torch_latest_launch(a, a.world) + rest, env=env).returncode
        elif a.cmd == "py" and is_judge(a.ds):
            # the judge venv's python; torch.load defaults to weights_only=False there, as torch 1.13's did, so our
            # scripts read DeepSpeed's files (loss scaler, enums) the way they do with the other versions
            env = judge_env(a, version=a.ds)
            extra = mcore_extra(a, a.mcore) if a.mcore else None
            env.update(PYTHONPATH=os.pathsep.join([p for p in (extra, HERE, env.get("PYTHONPATH")) if p]),
                       TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
            return subprocess.run([judge_python(a)] + as_zygote_script(rest), env=env).returncode
        elif a.cmd == "py":
            env = debian_env(a, a.ds)
            env.update(PYTHONPATH=os.pathsep.join([env["DS_SRC"], os.path.join(harness(a), "stubs"), HERE]),
                       DS_ACCELERATOR="cpu")
            return subprocess.run([PYTHON] + as_zygote_script(rest), env=env).returncode
        elif a.cmd == "zero-to-fp32":
            zero_to_fp32(a, a.ckpt, a.out, a.ds, a.out + ".log")
        elif a.cmd == "launch":
            if is_judge(a.ds):
                env = judge_env(a, version=a.ds)
                cmd = [judge_python(a), os.path.join(JUDGE, "launch.py"), "--world", str(a.world)]
                if a.mcore:
                    env["PYTHONPATH"] = os.pathsep.join(
                        [p for p in (mcore_extra(a, a.mcore), HERE, env.get("PYTHONPATH")) if p])
                    if a.mcore in MCORE_015_SHIMS:
                        rest = [os.path.join(HERE, "megatron_015_shims.py")] + rest
                if a.torchtitan:
                    env["PYTHONPATH"] = os.pathsep.join([p for p in (titan_extra(a), env.get("PYTHONPATH")) if p])
            else:
                env = debian_env(a, a.ds)
                cmd = [PYTHON, os.path.join(JUDGE, "launch.py"), "--world", str(a.world)]
            cmd += (["--logdir", a.logdir] if a.logdir else []) + ["--"] + rest
            return subprocess.run(cmd, env=env).returncode
    except RuntimeError as e:
        die(str(e), 1)
    except Unavailable as e:  # a judge venv that is not made
        print(f"realds.py: {e}", file=sys.stderr)
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
