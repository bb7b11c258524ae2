#!/usr/bin/python3
"""Per-rank driver (start it through the harness's launch.py): trains the harness's toy model like
`ds_driver.py train` and saves with extra client state, the way Megatron-DeepSpeed saves
`universal_checkpoint_info` (and its `iteration`) next to DeepSpeed's own keys. Our code; DeepSpeed unchanged.

  client_state_driver.py --out DIR --stage S --dtype fp16|bf16 [--bf16-optimizer] [--steps N] [--dims ...]
                         [--universal-info] [--iteration global_steps|adam_step-1]

--universal-info adds {'universal_checkpoint_info': {'universal_checkpoint_version': 0.2}} (what
ds_to_universal.py's --inject_missing_state would assume). --iteration adds Megatron's `iteration` key with the
engine's global_steps, or with the Adam step minus one (what DeepSpeed 0.12's universal loader turns back into
the step).
"""
import argparse
import json

import torch

import deepspeed
import deepspeed.comm as dist

import ds_common as C


def adam_step(engine):
    opt = engine.optimizer.optimizer
    for g in opt.param_groups:
        st = opt.state.get(g["params"][0], {})
        if "step" in st:
            return int(float(st["step"]))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--stage", type=int, required=True)
    ap.add_argument("--dtype", choices=["fp16", "bf16"], required=True)
    ap.add_argument("--bf16-optimizer", action="store_true")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-seed", type=int, default=7)
    ap.add_argument("--dims", default=",".join(map(str, C.SMALL_DIMS)))
    ap.add_argument("--universal-info", action="store_true")
    ap.add_argument("--iteration", choices=["global_steps", "adam_step-1"], default=None)
    a = ap.parse_args()

    C.cpu_gloo_patch()
    C.cpu_grad_bucketing_patch()
    deepspeed.init_distributed(dist_backend="gloo")
    dims = [int(v) for v in a.dims.split(",")]
    engine, _ = C.build_engine(dims, a.stage, a.dtype, a.seed, bf16_fp32_accum=a.bf16_optimizer)
    log = C.train_steps(engine, dims, a.dtype, a.steps, a.data_seed)
    client = {"fixture": "client_state_driver"}
    if a.universal_info:
        client["universal_checkpoint_info"] = {"universal_checkpoint_version": 0.2}
    if a.iteration == "global_steps":
        client["iteration"] = int(engine.global_steps)
    elif a.iteration == "adam_step-1":
        client["iteration"] = adam_step(engine) - 1
    engine.save_checkpoint(a.out, client_state=client)
    dist.barrier()
    if dist.get_rank() == 0:
        print(json.dumps({"global_steps": int(engine.global_steps), "adam_step": adam_step(engine),
                          "client_state": sorted(client), "log": log}))


if __name__ == "__main__":
    main()
