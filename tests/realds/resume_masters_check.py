#!/usr/bin/python3
"""What a resume does to the fp32 masters: builds a fresh bf16 ZeRO stage 0 engine (another seed than the run's),
loads SAVE_DIR with engine.load_checkpoint and prints, per rank, how far the masters are from the loaded bf16
weights and how far the first training step moves the weights. Measures the DeepSpeed 0.17.6-0.18.4 resume
(tests/fixtures/deepspeed/README.md); it checks nothing itself: test_realds_v0184_no_optimizer.cpp reads its line.

  realds.py launch --world 2 --ds 0.18.4 -- resume_masters_check.py /abs/SAVE_DIR [--module-only]
"""
import argparse
import os
import sys

import deepspeed

sys.path.insert(0, os.environ["CKPTDOC_HARNESS"])
import ds_common as C  # noqa: E402

DIMS = [96, 301, 173, 13]  # the harness's model A


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("save_dir")
    ap.add_argument("--module-only", action="store_true", help="load_checkpoint(..., load_module_only=True)")
    a = ap.parse_args()
    C.cpu_gloo_patch()
    deepspeed.init_distributed(dist_backend="gloo")
    engine, _ = C.build_engine(DIMS, 0, "bf16", seed=12345)
    opt = engine.optimizer
    save_dir = os.path.abspath(a.save_dir)
    if a.module_only:
        path, _ = engine.load_checkpoint(save_dir, load_module_only=True)
    else:
        path, _ = engine.load_checkpoint(save_dir, load_optimizer_states=True, load_lr_scheduler_states=True)
    if path is None:  # DeepSpeed only warns when it finds nothing to load
        sys.exit(f"load_checkpoint found no checkpoint in {save_dir}")
    lp = [p for g in opt.fp16_groups for p in g]
    hp = [p for g in opt.fp32_groups for p in g]
    before = [p.detach().float().clone() for p in lp]
    gap = max((h.detach() - w.detach().float()).abs().max().item() for h, w in zip(hp, lp))
    log = C.train_steps(engine, DIMS, "bf16", 1, 99)
    moved = max((w.detach().float() - b).abs().max().item() for w, b in zip(lp, before))
    print(f"deepspeed {deepspeed.__version__} {type(opt).__name__} module_only={a.module_only}: "
          f"max|master - bf16 weight| after load {gap:.6g}; first step: lr {log[0]['lr']:.3g}, "
          f"max|weight change| {moved:.6g}")


if __name__ == "__main__":
    main()
