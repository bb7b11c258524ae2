#!/usr/bin/env python3
"""The real framework loading a weights folder's optimizer file after `ckptdoc repair --reset-optimizer` or
`--drop-optimizer` (the judges' venv, one CPU process), and training one step from it.

trainer: a Hugging Face Trainer built as hf_trainer_plain_train.py built it (the same tiny Llama, data and
TrainingArguments, max_steps one past the checkpoint's global_step) resumes with
trainer.train(resume_from_checkpoint=CKPT) and takes one step. A callback records the optimizer state as the
Trainer loaded it (at the first step's beginning) and after that step, and the scheduler's step count.

accelerate: the model, AdamW and StepLR of test_realds_accelerate.cpp's plain_save_state, prepared, then
accelerator.load_state(DIR) and one step.

Writes JSON: {"loaded": STATE, "after": STATE, "loss": float, "global_step": int, "scheduler_steps": int} with
STATE = {"params_with_state", "steps" (sorted distinct), "nonzero_moments"}.

  weights_folder_optimizer_check.py trainer|accelerate DIR --json OUT [--out SCRATCH]
"""
import argparse
import json
import math
import os

import torch


def describe(optimizer):
    inner = getattr(optimizer, "optimizer", optimizer)
    state = inner.state
    return {
        "params_with_state": len(state),
        "steps": sorted({float(s["step"]) for s in state.values() if "step" in s}),
        "nonzero_moments": sum(int(torch.count_nonzero(s[k])) for s in state.values()
                               for k in ("exp_avg", "exp_avg_sq") if k in s),
    }


def trainer_run(ckpt, scratch):
    from transformers import LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

    from hf_trainer_train import Tokens, model_config

    class Probe(TrainerCallback):
        def __init__(self):
            self.out = {}

        def on_step_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kw):
            if "loaded" not in self.out:
                self.out["loaded"] = describe(optimizer)
                self.out["global_step"] = state.global_step
                self.out["scheduler_steps"] = int(lr_scheduler.last_epoch)

        def on_step_end(self, args, state, control, optimizer=None, **kw):
            if "after" not in self.out:
                self.out["after"] = describe(optimizer)

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs and "loss" not in self.out:
                self.out["loss"] = float(logs["loss"])

    with open(os.path.join(ckpt, "trainer_state.json")) as f:
        step = json.load(f)["global_step"]
    torch.manual_seed(0)
    model = LlamaForCausalLM(model_config(tied=False))
    # hf_trainer_plain_train.py's arguments, max_steps one past the checkpoint
    args = TrainingArguments(output_dir=scratch, max_steps=step + 1, save_steps=1000,
                             per_device_train_batch_size=2, learning_rate=1e-3, weight_decay=0.01, use_cpu=True,
                             report_to=[], logging_steps=1, seed=0, lr_scheduler_type="constant",
                             optim="adamw_torch")
    probe = Probe()
    Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[probe]).train(resume_from_checkpoint=ckpt)
    return probe.out


def accelerate_run(folder):
    from accelerate import Accelerator

    acc = Accelerator(cpu=True)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    sch = torch.optim.lr_scheduler.StepLR(opt, 10)
    m, opt, sch = acc.prepare(m, opt, sch)
    acc.load_state(folder)
    out = {"loaded": describe(opt), "scheduler_steps": int(sch.scheduler.last_epoch)}
    loss = m(torch.randn(8, 16, generator=torch.Generator().manual_seed(1))).pow(2).mean()
    acc.backward(loss)
    opt.step()
    sch.step()
    opt.zero_grad()
    out["after"] = describe(opt)
    out["loss"] = float(loss)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("framework", choices=("trainer", "accelerate"))
    ap.add_argument("dir")
    ap.add_argument("--json", required=True)
    ap.add_argument("--out", help="the resumed Trainer's output_dir")
    a = ap.parse_args()
    out = trainer_run(a.dir, a.out) if a.framework == "trainer" else accelerate_run(a.dir)
    if "after" not in out or not math.isfinite(out.get("loss", float("nan"))):
        raise SystemExit(f"no finite step was taken: {out}")
    with open(a.json, "w") as f:
        json.dump(out, f)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
