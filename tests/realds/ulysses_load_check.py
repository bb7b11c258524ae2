#!/usr/bin/python3
"""Per-rank load check (started by the judges' launch.py) of a ZeRO-1/2 checkpoint written by ulysses_train.py:
the same engine (model A, ALST's parallel_state_sp as the mpu, SP ranks per group) loads CKPT with
engine.load_checkpoint, every rank compares its fp32 master partitions with its partitions of the loaded 16-bit
weights, and one training step runs. Rank 0 prints

  ulysses load: max|master - weight| X; step loss L; global_steps G

and exits 1 when a master differs from its weight (what --refresh-fp32 promises) or the loss is not finite.

usage: launch.py --world N -- ulysses_load_check.py CKPT --sp 2 [--stage 1] [--dtype bf16] [--seed 1]
"""
import argparse
import math
import sys

import torch
import deepspeed
import deepspeed.comm as dist

import ds_common as C


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--sp", type=int, default=2)
    ap.add_argument("--stage", type=int, default=1)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    C.cpu_gloo_patch()
    deepspeed.init_distributed(dist_backend="gloo")
    from deepspeed.runtime.sequence_parallel import parallel_state_sp
    parallel_state_sp.initialize_sequence_parallel(a.sp)
    torch.manual_seed(a.seed + 100)  # other initial weights than the saved ones: the load must set them all
    model = C.Net(C.SMALL_DIMS)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=C.param_groups(model),
                                           config=C.make_config(a.stage, a.dtype), mpu=parallel_state_sp)
    path, _ = engine.load_checkpoint(a.ckpt)
    assert path, f"load_checkpoint found nothing in {a.ckpt}"
    opt = engine.optimizer
    gap = torch.zeros(1)
    for i, master in enumerate(opt.single_partition_of_fp32_groups):
        lp = opt.parallel_partitioned_bit16_groups[i][dist.get_rank(group=opt.real_dp_process_group[i])]
        n = min(master.numel(), lp.numel())
        gap = torch.maximum(gap, (master[:n].float() - lp[:n].float()).abs().max().reshape(1))
    dist.all_reduce(gap, op=dist.ReduceOp.MAX)
    loss = C.train_steps(engine, C.SMALL_DIMS, a.dtype, 1, a.seed + 7)[0]["loss"]
    if dist.get_rank() == 0:
        print(f"ulysses load: max|master - weight| {gap.item():.6g}; step loss {loss:.6g}; "
              f"global_steps {engine.global_steps}", flush=True)
    dist.barrier()
    sys.exit(0 if gap.item() == 0 and math.isfinite(loss) else 1)


if __name__ == "__main__":
    main()
