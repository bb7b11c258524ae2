#!/usr/bin/env python3
"""The real Hugging Face Trainer resuming from a checkpoint-N/ folder (hf_trainer_train.py's recipe, the judge
venv) and training one more step: the acceptance test of a repaired Trainer folder. Start it per rank through
judge/launch.py.

Before that step (after Trainer's deepspeed_load_checkpoint), every param's full fp32 master, 16-bit weight and
Adam moments are gathered from the engine (deepspeed.utils.safe_get_full_*, collective calls); rank 0 saves
them with the step's loss:

  DUMP = {"fp32": {name: tensor}, "lp": {name: float32 tensor}, "exp_avg": {...}, "exp_avg_sq": {...},
          "global_step": int, "loss": float}

  launch.py --world 2 -- hf_trainer_resume_check.py --ckpt CKPT --out SCRATCH --dump DUMP --stage 2|3 [--gather]
                         [--tied]
"""
import argparse
import json
import math
import os

import torch
from transformers import TrainerCallback

import deepspeed
from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state
from hf_trainer_train import finish, trainer


class Snapshot(TrainerCallback):
    """Gathers the engine's state at the first step's beginning (the state the load produced) and the loss
    of that step."""

    def __init__(self, dump):
        self.dump, self.state = dump, None

    def on_step_begin(self, args, state, control, model=None, **kw):
        if self.state is not None:
            return
        out = {k: {} for k in ("fp32", "lp", "exp_avg", "exp_avg_sq")}
        for name, p in model.named_parameters():
            out["fp32"][name] = safe_get_full_fp32_param(p).detach().clone()
            out["exp_avg"][name] = safe_get_full_optimizer_state(p, "exp_avg").detach().clone()
            out["exp_avg_sq"][name] = safe_get_full_optimizer_state(p, "exp_avg_sq").detach().clone()
            with deepspeed.zero.GatheredParameters([p], enabled=hasattr(p, "ds_id")):
                out["lp"][name] = p.detach().float().clone()
        out["global_step"] = state.global_step
        self.state = out

    def on_log(self, args, state, control, logs=None, **kw):
        if self.state is not None and logs and "loss" in logs and "loss" not in self.state:
            self.state["loss"] = float(logs["loss"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--stage", type=int, choices=(2, 3), required=True)
    ap.add_argument("--gather", action="store_true")
    ap.add_argument("--tied", action="store_true")
    a = ap.parse_args()
    with open(os.path.join(a.ckpt, "trainer_state.json")) as f:
        step = json.load(f)["global_step"]
    snap = Snapshot(a.dump)
    t = trainer(a.out, a.stage, step + 1, 1000, a.gather, a.tied, callbacks=[snap])
    t.train(resume_from_checkpoint=a.ckpt)
    s = snap.state
    if s is None or "loss" not in s:
        raise SystemExit("the resumed run took no step")
    if not math.isfinite(s["loss"]):
        raise SystemExit(f"the resumed step's loss is {s['loss']}")
    if int(os.environ.get("RANK", "0")) == 0:
        torch.save(s, a.dump + ".tmp")
        os.replace(a.dump + ".tmp", a.dump)
        print(f"resumed at step {s['global_step']}, one step taken, loss {s['loss']:.6f}")
    finish()


if __name__ == "__main__":
    main()
