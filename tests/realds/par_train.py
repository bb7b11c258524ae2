#!/usr/bin/python3
"""Per-rank driver (started by the shared harness's launch.py): trains a tensor-, pipeline- or expert-parallel toy
job of par_models.py for a few steps with unmodified DeepSpeed, saves it with engine.save_checkpoint, and writes
what DeepSpeed itself holds for the whole model right before the save (the engine-assembled references):

  REF/fp32.pt      {name: fp32 master}            merged over dp, tp, pp and ep as par_models.gather_full does
  REF/lp.pt        {name: lp weight as float32}
  REF/moments.pt   {"exp_avg": {...}, "exp_avg_sq": {...}}
  REF/run.json     losses, coordinates, world

usage: launch.py --world N -- par_train.py --kind pipe3d|tp|moe|tp_z3 --out SAVE_DIR --ref REF [--steps 3] [--seed 1]
"""
import argparse
import json
import os

import torch
import deepspeed
import deepspeed.comm as dist

import ds_common as C
import par_models as M


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=sorted(M.KINDS), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tp", type=int, help="tensor-parallel size (default: the kind's)")
    a = ap.parse_args()
    M.cpu_patches()
    deepspeed.init_distributed(dist_backend="gloo")
    job = M.build(a.kind, a.seed, tp=a.tp)
    losses = []
    for step in range(a.steps):
        losses.append(M.train_step(job, M.batches(job, 4, a.seed + 100 + step)))
    refs = {w: M.gather_full(job, w) for w in ("fp32", "lp", "exp_avg", "exp_avg_sq")}
    job.engine.save_checkpoint(a.out, client_state=M.client_state(a.kind))
    dist.barrier()
    if dist.get_rank() == 0:
        os.makedirs(a.ref, exist_ok=True)
        torch.save(refs["fp32"], os.path.join(a.ref, "fp32.pt"))
        torch.save(refs["lp"], os.path.join(a.ref, "lp.pt"))
        torch.save({"exp_avg": refs["exp_avg"], "exp_avg_sq": refs["exp_avg_sq"]}, os.path.join(a.ref, "moments.pt"))
        with open(os.path.join(a.ref, "run.json"), "w") as f:
            json.dump({"kind": a.kind, "world": dist.get_world_size(), "losses": losses, "steps": a.steps,
                       "optimizer": type(job.engine.optimizer).__name__, "versions": C.versions()}, f, indent=1)
        print("saved", sorted(os.listdir(os.path.join(a.out, open(os.path.join(a.out, "latest")).read().strip()))))


if __name__ == "__main__":
    main()
