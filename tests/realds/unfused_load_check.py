#!/usr/bin/python3
"""Loads a ZeRO stage 0 bf16 checkpoint (FP16_UnfusedOptimizer, or with --fused FP16_Optimizer on the CPU FusedAdam
of cpu_fused_adam.py) with DeepSpeed's own engine.load_checkpoint,
optimizer states included, on every rank of `realds.py launch`, which ds_load_check.py cannot (it does not know
the wrapper). A fresh engine is built with another seed, so nothing below holds unless the load set it.

  realds.py launch --world 2 --ds 0.19 -- unfused_load_check.py SAVE_DIR ORIGINAL_MODEL_STATES_PT [--steps N] [--fused]

Checks, on each rank: every loaded fp32 master (engine.optimizer.fp32_groups, named by the harness's own
param_groups(); with --fused each flat fp32_groups_flat[g] against its group's bf16 weights flattened) equals its
loaded bf16 weight as float32; every loaded exp_avg/exp_avg_sq and the step equal the
original file's (a refresh leaves the moments); then N training steps run with finite losses. Exit 1 on a failure.
"""
import argparse
import os
import sys

import torch

import deepspeed
import deepspeed.comm as dist

HARNESS = os.environ.get("CKPTDOC_HARNESS", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                                          "deepspeed", "harness"))
sys.path.insert(0, HARNESS)
import ds_common as C  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("save_dir")
    ap.add_argument("original")
    ap.add_argument("--dims", default="96,301,173,13")  # model A
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--fused", action="store_true")
    a = ap.parse_args()
    if a.fused:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import cpu_fused_adam
        cpu_fused_adam.install()
    C.cpu_gloo_patch()
    deepspeed.init_distributed(dist_backend="gloo")
    dims = [int(v) for v in a.dims.split(",")]
    engine, _ = C.build_engine(dims, 0, "bf16", seed=12345)
    opt = engine.optimizer
    assert type(opt).__name__ == ("FP16_Optimizer" if a.fused else "FP16_UnfusedOptimizer"), type(opt).__name__
    path, _ = engine.load_checkpoint(a.save_dir, load_optimizer_states=True, load_lr_scheduler_states=True)
    assert path, f"load_checkpoint found nothing in {a.save_dir}"
    original = torch.load(a.original, map_location="cpu", weights_only=False)["optimizer"]["optimizer_state_dict"]
    name_of = {id(p): n for n, p in engine.module.named_parameters()}
    failures = []
    k = 0
    masters = opt.fp32_groups_flat if a.fused else opt.fp32_groups
    for lp_group, fp32_group in zip(opt.fp16_groups, masters):
        if a.fused:  # one flat master per group: compare it with the group's weights in the same order
            lp_group, fp32_group = [torch.cat([p.detach().flatten() for p in lp_group])], [fp32_group]
        for lp, fp32 in zip(lp_group, fp32_group):
            name = f"group {k}" if a.fused else name_of[id(lp)]
            if not torch.equal(fp32.detach(), lp.detach().float()):
                failures.append(f"{name}: loaded fp32 master differs from its bf16 weight")
            st = opt.optimizer.state.get(fp32, {})
            for key in ("exp_avg", "exp_avg_sq", "step"):
                want = original["state"][k][key]
                # FusedAdam keeps step as an int, torch's optimizers as a tensor
                if key not in st or not torch.equal(torch.as_tensor(st[key]).float(), torch.as_tensor(want).float()):
                    failures.append(f"{name}: loaded {key} differs from the original file's")
            k += 1
    losses = [r["loss"] for r in C.train_steps(engine, dims, "bf16", a.steps, 99)]
    if not all(torch.isfinite(torch.tensor(losses))):
        failures.append(f"non-finite training loss after the load: {losses}")
    rank = dist.get_rank()
    for f in failures:
        print(f"unfused_load_check.py rank {rank}: {f}", file=sys.stderr)
    if not failures:
        print(f"unfused_load_check.py rank {rank}: {k} masters equal their bf16 weights, moments kept, "
              f"{a.steps} step(s) trained: {losses}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
