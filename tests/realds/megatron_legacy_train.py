#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): legacy Megatron-LM checkpoints, written by Megatron-LM's own
megatron.training.checkpointing.save_checkpoint with args.ckpt_format = "torch" (megatron.training 0.18.0 from
PYTHONPATH: realds.py's "mcore" entries): <out>/iter_NNNNNNN/mp_rank_XX/model_optim_rng.pt and
latest_checkpointed_iteration.txt. The model is megatron_optim_train.py's tiny bf16 GPTModel with megatron-core's
non-distributed Float16OptimizerWithFloat16Params (get_megatron_optimizer, optimizer "local"), its CPU shims.

--mode pretrain: --steps steps (synthetic gradients: the forward needs CUDA, see megatron_optim_train.py), saved.
--mode finetune --load DIR: Megatron-LM's own load_checkpoint of DIR with args.finetune = True (model weights
  loaded, optimizer not), then saved at iteration 0. 0.18.0's load_checkpoint then calls
  optimizer.reload_model_params() (checkpointing.py:1959-1964), so the fp32 mains are the loaded weights (healthy).
--optimizer distributed: megatron-core's DistributedOptimizer (--use-distributed-optimizer): model_optim_rng.pt then
  holds the param groups alone and each mp_rank folder a distrib_optim.pt (save_parameter_state).
--nan-in NAME (pretrain): one element of NAME's gradient is NaN at the last step; megatron-core's optimizer (bf16:
  no grad scaler, no inf check; the NaN grad norm skips clipping) writes it into that param's fp32 main, both Adam
  moments and the bf16 weight.
--mode stale_no_load_optim --load DIR: the same load with --no-load-optim instead of --finetune (the iteration and
  the weights resumed, the optimizer not) and reload_model_params() not made: saved at the loaded iteration.
--mode stale --load DIR: the same with that reload_model_params() call not made, as Megatron-LM did before it was
  added (Megatron-LM #174): the fp32 mains keep the new model's initial values (stale). The call is replaced by a
  no-op on this optimizer object only; everything else is Megatron-LM's own code.

Megatron-LM reads its arguments with get_args(): they are parse_args() of a minimal command line (MEGATRON_ARGV)
plus the fields validate_args would derive that save/load read (see megatron_args); set_args installs them.
Extra CPU shim (besides megatron_optim_train.py's): torch.cuda.get_rng_state (checkpointing.py:378, get_rng_state)
answers the CPU generator's state, so model_optim_rng.pt's rng_state.cuda_rng_state is a CPU ByteTensor.

usage: launch.py --world 2 -- megatron_legacy_train.py --out SAVE [--mode pretrain|finetune|stale] [--load DIR]
       [--tp 2] [--pp 1] [--optimizer local|distributed] [--steps 2] [--nan-in NAME] [--json RUN_JSON]
"""
import argparse
import json
import os
import sys
import typing

typing.override = getattr(typing, "override", lambda f: f)  # megatron.training 0.18.0 uses it; Python 3.11 lacks it

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_optim_train as trainer  # noqa: E402 - its CPU shims

NUM_LAYERS, HIDDEN, HEADS, FFN, VOCAB, SEQ = 2, 16, 4, 32, 64, 8


def megatron_args(tp, save=None, load=None, finetune=False, world=1, pp=1, distributed=False, no_load_optim=False):
    """Megatron-LM's args for this model: parse_args of a minimal command line, then the fields of validate_args
    that save_checkpoint / load_checkpoint read (validate_args itself wants a full training setup)."""
    from megatron.training.arguments import parse_args
    from megatron.training.global_vars import set_args
    argv = ["--num-layers", str(NUM_LAYERS), "--hidden-size", str(HIDDEN), "--num-attention-heads", str(HEADS),
            "--ffn-hidden-size", str(FFN), "--seq-length", str(SEQ), "--max-position-embeddings", str(SEQ),
            "--micro-batch-size", "1", "--global-batch-size", str(world // (tp * pp)), "--bf16", "--lr", "1e-3",
            "--tensor-model-parallel-size", str(tp), "--pipeline-model-parallel-size", str(pp),
            "--ckpt-format", "torch", "--optimizer", "adam"]
    argv += ["--save", save] if save else []
    argv += ["--load", load] if load else []
    argv += ["--finetune"] if finetune else []
    argv += ["--no-load-optim"] if no_load_optim else []
    argv += ["--use-distributed-optimizer"] if distributed else []
    saved_argv = sys.argv
    sys.argv = [saved_argv[0]] + argv
    try:
        args = parse_args()
    finally:
        sys.argv = saved_argv
    args.rank = dist.get_rank()
    args.world_size = world
    args.data_parallel_size = world // (tp * pp)
    args.params_dtype = torch.bfloat16
    args.use_dist_ckpt = False  # update_use_dist_ckpt: ckpt_format "torch" is the legacy one
    args.no_load_rng = True  # its cuda_rng_state cannot be set without CUDA (checkpointing.py:1996)
    args.consumed_train_samples = args.consumed_valid_samples = args.skipped_train_samples = 0
    set_args(args)
    return args


def build(tp, pp=1, distributed=False):
    """megatron_optim_train.py's model and the non-distributed optimizer, the same seed on every run; with pp > 1
    this rank's pipeline stage of it (GPTModel's pre_process / post_process, untied embeddings)."""
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp)
    torch.manual_seed(1)
    cfg = TransformerConfig(num_layers=NUM_LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS,
                            ffn_hidden_size=FFN, use_cpu_initialization=True, params_dtype=torch.bfloat16,
                            bf16=True, perform_initialization=True, pipeline_model_parallel_size=pp,
                            pipeline_dtype=torch.bfloat16)
    gpt = GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=VOCAB,
                   max_sequence_length=SEQ, share_embeddings_and_output_weights=False,
                   pre_process=parallel_state.is_pipeline_first_stage(),
                   post_process=parallel_state.is_pipeline_last_stage())
    ddp = DistributedDataParallel(cfg, DistributedDataParallelConfig(use_distributed_optimizer=distributed,
                                                                     grad_reduce_in_fp32=True),
                                  Float16Module(cfg, gpt))
    opt = get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True,
                                                 use_distributed_optimizer=distributed), [ddp])
    return gpt, ddp, opt


def cuda_rng_on_cpu(notes):
    if not torch.cuda.is_available():
        torch.cuda.get_rng_state = lambda *args, **kwargs: torch.get_rng_state()
        notes["cpu_shims"].append("torch.cuda.get_rng_state: the CPU generator's state (checkpointing.py:378)")


def microbatches(args):
    from megatron.core.num_microbatches_calculator import init_num_microbatches_calculator
    init_num_microbatches_calculator(args.rank, None, args.global_batch_size, args.micro_batch_size,
                                     args.data_parallel_size)


def load_megatron(model, opt, notes):
    """Megatron-LM's load_checkpoint. Its torch-format load is torch.load(checkpoint_name, map_location='cpu')
    (checkpointing.py:1381): with torch >= 2.6's weights_only default it fails on the saved args Namespace
    ("Unsupported global: GLOBAL getattr") and Megatron-LM prints "could not load the checkpoint" and calls
    sys.exit() (exit status 0). Users of torch >= 2.6 set TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1, as here; a
    sys.exit() inside the load is an error here."""
    from megatron.training.checkpointing import load_checkpoint
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    notes["env"] = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 (checkpointing.py:1381 torch.load, weights_only default)"
    try:
        return load_checkpoint(model, opt, None)
    except SystemExit as e:
        raise RuntimeError(f"Megatron-LM's load_checkpoint exited ({e.code!r}): see the log above") from None


def fresh_adam_state(opt, notes):
    """A save before the first step: torch's Adam (no Apex/TE on the CPU) has no state yet, and the
    DistributedOptimizer's save_parameter_state reads exp_avg of every param (get_parameter_state_dp_zero,
    distrib_optimizer.py:1298 in 0.18.0: KeyError 'exp_avg'). Fill it as a fresh Adam's (step 0, zero moments),
    the fp32 mains untouched (megatron_bucket_map_probe.py does the same for torch_dist)."""
    for inner in getattr(opt, "chained_optimizers", [opt]):
        for group in inner.optimizer.param_groups:
            for p in group["params"]:
                if not inner.optimizer.state[p]:
                    inner.optimizer.state[p] = dict(step=torch.tensor(0.0), exp_avg=torch.zeros_like(p),
                                                    exp_avg_sq=torch.zeros_like(p))
    notes["fresh_adam_state"] = "step 0, zero moments, before the save (no step taken)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=("pretrain", "finetune", "stale", "stale_no_load_optim"), default="pretrain")
    ap.add_argument("--load")
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--optimizer", choices=("local", "distributed"), default="local")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--json")
    ap.add_argument("--nan-in", help="pretrain: the last step's gradient of this param gets one NaN element")
    a = ap.parse_args()
    notes = {"mode": a.mode}
    mode = trainer.cpu_shims(notes)
    cuda_rng_on_cpu(notes)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    from megatron.training.checkpointing import save_checkpoint

    args = megatron_args(a.tp, save=a.out, load=a.load, finetune=a.mode in ("finetune", "stale"),
                         no_load_optim=a.mode == "stale_no_load_optim",
                         world=dist.get_world_size(), pp=a.pp, distributed=a.optimizer == "distributed")
    microbatches(args)
    gpt, ddp, opt = build(a.tp, a.pp, a.optimizer == "distributed")
    notes["optimizer"] = type(opt).__name__
    iteration = a.steps
    if a.mode == "pretrain":
        for step in range(a.steps):
            for p in gpt.parameters():  # deterministic, the same on every replica of a param
                grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(100 + step)) * 1e-2
                p.main_grad.copy_(grad)
            if a.nan_in and step == a.steps - 1:  # Adam carries it into the main, both moments and the weight
                dict(gpt.named_parameters())[a.nan_in].main_grad.view(-1)[0] = float("nan")
                notes["nan_in"] = a.nan_in
            notes.setdefault("step_results", []).append(repr(opt.step()))
            opt.zero_grad()
    else:
        if a.mode.startswith("stale"):  # Megatron-LM before #174's fix: no reload of the mains after the load
            opt.reload_model_params = lambda *args, **kwargs: notes.setdefault("reload_model_params_skipped", 1)
        iteration, _ = load_megatron([ddp], opt, notes)
        notes["load_checkpoint_iteration"] = iteration  # 0 under --finetune, the loaded one under --no-load-optim
        if a.optimizer == "distributed":
            fresh_adam_state(opt, notes)
    save_checkpoint(iteration, [ddp], opt, None, 0)
    dist.barrier()
    if mode is not None:
        mode.__exit__(None, None, None)
    if a.json and rank == 0:
        import megatron.core
        with open(a.json, "w") as f:
            json.dump(dict(notes, iteration=iteration, megatron_core=megatron.core.__version__, tp=a.tp, pp=a.pp,
                           world=dist.get_world_size()), f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
