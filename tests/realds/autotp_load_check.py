#!/usr/bin/python3
"""Per-rank load check of an AutoTP checkpoint (autotp_train.py's job) in real DeepSpeed, started by the judges'
launch.py on tp x dp ranks. Each rank builds the job from another seed (nothing matches by accident), loads
--orig with optimizer states and keeps its Adam moments, loads --ckpt (a repaired copy) the same way, and then
measures what the engine holds:

  fp32_equals_lp     every fp32 master partition equals float(its 16-bit partition), element for element
  moments_kept       the Adam moments equal those the engine loaded from --orig, bit for bit
  lp_as_saved        every rank's 16-bit module params equal those torch.load reads from --orig's model file of
                     its tensor rank (a refresh keeps the weights)
  step_ok            one more training step gives a finite loss
  max_fp32_lp_diff   the largest |fp32 master - 16-bit weight| over all ranks (stale masters: far above a bf16 ulp)

usage: launch.py --world N -- autotp_load_check.py --ckpt DIR --orig DIR --json OUT [--tp 2]
Rank 0 writes OUT; exit 0 when every check held on every rank.
"""
import argparse
import json
import math
import os

import torch
import deepspeed
import deepspeed.comm as dist

import autotp_train as T


def partitions(opt):
    """(fp32 partition, 16-bit partition) of each flat group of this rank (DeepSpeedZeroOptimizer)."""
    return [(opt.single_partition_of_fp32_groups[i],
             opt.parallel_partitioned_bit16_groups[i][dist.get_rank(group=opt.real_dp_process_group[i])])
            for i in range(len(opt.single_partition_of_fp32_groups))]


def moments(opt):
    out = []
    for fp32, _ in partitions(opt):
        st = opt.optimizer.state.get(fp32, {})
        out.append({k: st[k].detach().clone() for k in ("exp_avg", "exp_avg_sq") if k in st})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--orig", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--stage", type=int, default=1)
    ap.add_argument("--dtype", default="bf16")
    a = ap.parse_args()
    deepspeed.init_distributed(dist_backend="gloo")
    engine = T.build(777, a.tp, a.stage, a.dtype)
    engine.load_checkpoint(a.orig, load_optimizer_states=True, load_lr_scheduler_states=True)
    before = moments(engine.optimizer)
    engine.load_checkpoint(a.ckpt, load_optimizer_states=True, load_lr_scheduler_states=True)
    opt = engine.optimizer
    fp32_equals_lp = all(torch.equal(f.detach().float(), lp.detach().float()) for f, lp in partitions(opt))
    fp32_lp_diff = max(float((f.detach().float() - lp.detach().float()).abs().max()) for f, lp in partitions(opt))
    after = moments(opt)
    moments_kept = len(before) == len(after) and all(
        b.keys() == c.keys() and len(b) == 2 and all(torch.equal(b[k], c[k]) for k in b) for b, c in zip(before, after))
    from deepspeed.utils import groups
    tag = open(os.path.join(a.orig, "latest")).read().strip()
    saved = torch.load(os.path.join(a.orig, tag, f"mp_rank_{groups.get_tensor_model_parallel_rank():02d}_model_states.pt"),
                       weights_only=False)["module"]
    held = dict(engine.module.named_parameters())
    lp_differs = sorted(n for n in saved if n not in held or not torch.equal(held[n].detach(), saved[n]))
    ids = T.batch(9, 0, groups.get_data_parallel_rank())
    loss = engine(input_ids=ids, labels=ids).loss
    engine.backward(loss)
    engine.step()
    mine = {"fp32_equals_lp": fp32_equals_lp, "moments_kept": moments_kept, "lp_as_saved": not lp_differs,
            "step_ok": math.isfinite(float(loss.detach())), "lp_differs": lp_differs, "fp32_lp_diff": fp32_lp_diff}
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    if dist.get_rank() == 0:
        verdict = {k: all(r[k] for r in everyone) for k in mine if k not in ("lp_differs", "fp32_lp_diff")}
        verdict["ok"] = all(verdict.values())
        verdict["max_fp32_lp_diff"] = max(r["fp32_lp_diff"] for r in everyone)  # the worst rank's
        with open(a.json, "w") as f:
            json.dump({"verdict": verdict, "ranks": everyone, "deepspeed": deepspeed.__version__}, f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
