#!/usr/bin/python3
"""Per-rank judge (started by the judges' launch.py): megatron-core's own resume of a virtual-pipeline bucket-space
save (megatron_vpp_train.py's: pp stages of vpp model chunks, model0, model1, ... and one DistributedOptimizer in
dp_reshardable), as megatron_bucket_load_check.py does for one chunk: fresh chunks (another seed), their optimizer
filled with its dummy state, dist_checkpointing.load of every chunk's sharded state dict and the optimizer's, then
load_state_dict. Which fp32 mains it placed round to their loaded bf16 weights ("pp<s>:<chunk>.<name>") and the
param groups' steps, under loads.<ckpt> as megatron_bucket_load_check.py reports them, then one optimizer step
(synthetic gradients).

usage: launch.py --world 2 -- megatron_vpp_load_check.py --ckpt ITERATION_DIR --pp 2 --vpp 2 --json OUT
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_optim_train as trainer  # noqa: E402 - its CPU shims
import megatron_vpp_train as vpp_train  # noqa: E402 - the model chunks and optimizer it saves


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--vpp", type=int, default=2)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    notes = {}
    mode = trainer.cpu_shims(notes)
    dist.init_process_group("gloo")
    from megatron.core import dist_checkpointing, parallel_state
    parallel_state.initialize_model_parallel(pipeline_model_parallel_size=a.pp,
                                             virtual_pipeline_model_parallel_size=a.vpp)
    _, chunks, opt = vpp_train.build(a.pp, a.vpp, 5)  # not the save's seed: nothing may match by chance
    for o in getattr(opt, "chained_optimizers", [opt]):
        o._init_optimizer_states_with_dummy_values()
    model_sd = {f"model{v}": c.sharded_state_dict(metadata=vpp_train.METADATA) for v, c in enumerate(chunks)}
    request = dict(model_sd, optimizer=opt.sharded_state_dict(model_sd, is_loading=True, metadata=vpp_train.METADATA))
    mode.__exit__(None, None, None) if mode is not None else None
    loaded = dist_checkpointing.load(request, a.ckpt)
    mode.__enter__() if mode is not None else None
    for v, c in enumerate(chunks):
        c.load_state_dict(loaded[f"model{v}"])
    group_steps = sorted({float(g["step"]) for g in loaded["optimizer"]["optimizer"]["param_groups"]})
    opt.load_state_dict(loaded["optimizer"])

    stage = parallel_state.get_pipeline_model_parallel_rank()
    names = {p: f"pp{stage}:{v}.{n}" for v, c in enumerate(chunks) for n, p in c.named_parameters()}
    equal, differ = [], []
    for o in getattr(opt, "chained_optimizers", [opt]):
        for model_group, main_group in zip(o.model_float16_groups, o.shard_fp32_from_float16_groups):
            for p, main in zip(model_group, main_group):
                r = o._get_model_param_range_map(p)["param"]
                weight = p.detach().view(-1)[r.start:r.end]
                (equal if torch.equal(main.to(p.dtype), weight) else differ).append(names[p])
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (equal, differ))
    for c in chunks:
        for p in c.parameters():
            p.main_grad.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(300)) * 1e-2)
    step = opt.step()
    if dist.get_rank() == 0:
        import megatron.core
        with open(a.json, "w") as f:
            load = dict(group_steps=group_steps, mains_equal_weights=sorted(n for e, _ in gathered for n in e),
                        mains_differ=sorted(n for _, d in gathered for n in d))
            json.dump(dict(notes, megatron_core=megatron.core.__version__, loads={a.ckpt: load}, step=repr(step),
                           step_ok=bool(step[0])), f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
