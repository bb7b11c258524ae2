#!/usr/bin/python3
"""Per-rank judge (started by the judges' launch.py) of `ckptdoc repair --drop-optimizer` of a Megatron-core save:
megatron-core's own load of the output as Megatron-LM's --finetune / --no-load-optim resume does it
(dist_checkpointing.load of model.sharded_state_dict() alone, then load_state_dict), into a fresh bf16 model
(megatron_optim_train.py's model and CPU shims); the same load of the input into another fresh model; every entry
of the two models' state dicts compared bit for bit. Then a fresh non-distributed optimizer
(Float16OptimizerWithFloat16Params, built after the load, so its fp32 mains are the loaded weights' upcast) takes
one step (synthetic gradients: the forward needs CUDA, megatron_optim_train.py says why).

The output itself, read with torch: its .metadata's keys (none may start with "optimizer."; the others must be
the input's), and common.pt (torch.load: the framework's own file, its args an argparse.Namespace) or, from
megatron-core 0.19, the DCP's common_state item (megatron-core's load_common_state_dict): without
"optimizer" and "opt_param_scheduler", every other entry the input's. And megatron-core's load of the optimizer
from the output is tried: it must fail (the state is gone), its error is reported.

A mixture-of-experts save (--experts N --ep E: megatron_moe_train.py's) is loaded into the same MoE model; its
optimizer state is megatron-core's ChainedOptimizer's, keys chained_<i>.optimizer.*, counted with optimizer.*.

usage: launch.py --world 2 -- megatron_drop_check.py --in IN_ITERATION_DIR --out OUT_ITERATION_DIR [--tp 2]
       [--experts N --ep E] --json RESULT
"""
import argparse
import json
import os
import re
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_optim_train as trainer  # noqa: E402 - its CPU shims and the model it saves


OPTIMIZER_KEY = re.compile(r"(chained_\d+\.)?optimizer\.")  # ChainedOptimizer.sharded_state_dict's prefix


def build(seed, tp):
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig
    torch.manual_seed(seed)  # not the save's seed: nothing may match by chance
    cfg = TransformerConfig(num_layers=2, hidden_size=16, num_attention_heads=4, ffn_hidden_size=32,
                            use_cpu_initialization=True, params_dtype=torch.bfloat16, bf16=True,
                            perform_initialization=True)
    return cfg, GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=64,
                         max_sequence_length=8)


def load_model(gpt, ckpt, mode):
    from megatron.core import dist_checkpointing
    if mode is not None:  # the load's reader may spawn: nothing of the mode in the way
        mode.__exit__(None, None, None)
    loaded = dist_checkpointing.load({"model": gpt.sharded_state_dict()}, ckpt)
    if mode is not None:
        mode.__enter__()
    gpt.load_state_dict(loaded["model"])


def read_common(folder):
    """The state that is not sharded: common.pt (torch.load: the framework's own file, its args an
    argparse.Namespace), or megatron-core 0.19's common_state item in the DCP, read by megatron-core itself."""
    if os.path.exists(os.path.join(folder, "common.pt")):
        return torch.load(os.path.join(folder, "common.pt"), weights_only=False)
    from megatron.core.dist_checkpointing import load_common_state_dict
    return load_common_state_dict(folder)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--in", dest="src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--experts", type=int, default=None)
    ap.add_argument("--ep", type=int, default=1)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    notes = {}
    if a.experts:
        import megatron_moe_train as moe
        moe.with_experts(a.experts, a.ep, None)
    mode = trainer.cpu_shims(notes)
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    from megatron.core import dist_checkpointing, parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.module import Float16Module
    from torch.distributed.checkpoint import FileSystemReader

    parallel_state.initialize_model_parallel(tensor_model_parallel_size=a.tp)
    cfg, gpt = build(5, a.tp)
    _, ref = build(7, a.tp)
    load_model(gpt, a.out, mode)
    load_model(ref, a.src, mode)
    mine, theirs = gpt.state_dict(), ref.state_dict()
    equal = sorted(k for k in theirs if torch.is_tensor(theirs[k]) and k in mine and torch.equal(mine[k], theirs[k]))
    differ = sorted(k for k in theirs if torch.is_tensor(theirs[k]) and k not in equal)

    def is_optimizer(k):
        return OPTIMIZER_KEY.match(k) is not None

    keys_in = set(FileSystemReader(a.src).read_metadata().state_dict_metadata)
    keys_out = set(FileSystemReader(a.out).read_metadata().state_dict_metadata)
    common_in, common_out = read_common(a.src), read_common(a.out)
    dropped = [k for k in ("optimizer", "opt_param_scheduler") if k in common_in]
    for k in dropped:
        common_in.pop(k)

    def optimizer_of(model):
        ddp = DistributedDataParallel(cfg, DistributedDataParallelConfig(grad_reduce_in_fp32=True),
                                      Float16Module(cfg, model))
        return get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True), [ddp])

    # the attempt to resume the optimizer from the output, with the reference model's own optimizer (a failed
    # load leaves that optimizer's state half made)
    ref_opt = optimizer_of(ref)
    optimizer_load_error = None
    try:
        if mode is not None:
            mode.__exit__(None, None, None)
        ref_sd = ref.sharded_state_dict()
        dist_checkpointing.load({"optimizer": ref_opt.sharded_state_dict(ref_sd, is_loading=True)}, a.out)
    except BaseException as e:  # noqa: BLE001 - torch's CheckpointException is a BaseException; its words are reported
        optimizer_load_error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300]}"
    finally:
        if mode is not None:
            mode.__enter__()
    opt = optimizer_of(gpt)  # the fresh optimizer --no-load-optim gives, its mains the loaded weights' upcast
    for p in gpt.parameters():
        p.main_grad.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(300)) * 1e-2)
    step = opt.step()
    if rank == 0:
        import megatron.core
        with open(a.json, "w") as f:
            json.dump(dict(notes, megatron_core=megatron.core.__version__, weights_equal=len(equal),
                           weights_differ=differ, optimizer_keys_in=len([k for k in keys_in if is_optimizer(k)]),
                           optimizer_keys_out=sorted(k for k in keys_out if is_optimizer(k)),
                           other_keys_equal=keys_out == {k for k in keys_in if not is_optimizer(k)},
                           common_dropped=dropped, common_out_keys=sorted(common_out),
                           common_rest_equal=repr(common_in) == repr(common_out),
                           optimizer_load_error=optimizer_load_error, step=repr(step), step_ok=bool(step[0])),
                      f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
