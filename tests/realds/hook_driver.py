"""Per-rank training script that uses resources/python/ckptdoc_hook.py on real DeepSpeed (start it through
../shared/deepspeed/harness/launch.py). Our code; the model, config and CPU adjustments come from the harness's
ds_common.py. Subcommands:

  train   N steps, then at that step: a snapshot and engine.save_checkpoint (same state), a snapshot with
          gradients between backward() and step(), one after the step (no gradients); every dump is checked
          not to change training state (weights, fp32 masters, moments, grads, counters, RNG). --json: facts.
  guard   a fresh engine loads a trained checkpoint (--mode seedbug: load_optimizer_states=False, the #762
          state; --mode healthy: everything) and calls ckptdoc_hook.guard; records whether it raised, then
          trains a step when it did not.
  every   trains N steps calling ckptdoc_hook.every(...) after each step (watch tests: --pause-file makes
          rank 0 wait before each step until the file is gone... see --gate).
"""
import argparse
import hashlib
import json
import os
import random
import sys
import time

import numpy as np
import torch

import deepspeed
import deepspeed.comm as dist

import ds_common as C

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "resources", "python"))
import ckptdoc_hook  # noqa: E402


def init():
    C.cpu_gloo_patch()
    C.cpu_grad_bucketing_patch()
    deepspeed.init_distributed(dist_backend="gloo")


def build(a, seed=None):
    dims = [int(v) for v in a.dims.split(",")]
    engine, _ = C.build_engine(dims, a.stage, a.dtype, a.seed if seed is None else seed,
                               bf16_fp32_accum=a.bf16_optimizer, edge=a.model == "edge",
                               zero_extra=json.loads(a.zero_extra) if a.zero_extra else None)
    return engine, dims


def _h(t):
    return C.sha256_tensor(t) if t.numel() else "empty"


def fingerprint(engine):
    """Hashes of everything training state is made of, on this rank."""
    opt = engine.optimizer
    fp = {}
    for name, p in engine.module.named_parameters():
        fp[f"param/{name}"] = _h(p.data)
        fp[f"param/{name}/shape"] = list(p.data.shape)
        if p.grad is not None:
            fp[f"grad/{name}"] = _h(p.grad)
    for name, b in engine.module.named_buffers():
        fp[f"buffer/{name}"] = _h(b)
    for i, (fp32, b16, _) in enumerate(C.master_partitions(opt)):
        fp[f"fp32/{i}"] = _h(fp32)
        fp[f"bit16/{i}"] = _h(b16)
    base = opt.optimizer
    for gi, g in enumerate(base.param_groups):
        fp[f"group/{gi}"] = {k: v for k, v in g.items() if k != "params"}
        fp[f"group/{gi}/params"] = len(g["params"])
    for si, (p, st) in enumerate(base.state.items()):
        for k, v in st.items():
            fp[f"state/{si}/{k}"] = _h(v) if torch.is_tensor(v) else v
    ag = getattr(opt, "averaged_gradients", None)
    if isinstance(ag, dict):
        for i, lst in ag.items():
            fp[f"avg_grad/{i}"] = None if lst is None else [_h(t) for t in lst]
    if hasattr(opt, "fp32_groups_gradients_flat"):
        for i, t in enumerate(opt.fp32_groups_gradients_flat):
            fp[f"hp_grad/{i}"] = _h(t)
    fp["rng/torch"] = hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest()
    fp["rng/python"] = hashlib.sha256(repr(random.getstate()).encode()).hexdigest()
    fp["rng/numpy"] = hashlib.sha256(repr(np.random.get_state()).encode()).hexdigest()
    for k in ("global_steps", "global_samples", "skipped_steps", "micro_steps"):
        fp[k] = int(getattr(engine, k))
    fp["loss_scale"] = float(getattr(opt, "cur_scale", 0) or 0) if engine.fp16_enabled() else None
    fp["overflow"] = getattr(opt, "overflow", None)
    fp["lr_scheduler"] = repr(engine.lr_scheduler.state_dict()) if engine.lr_scheduler else None
    return fp


def changed(before, after):
    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k) != after.get(k))


def checked_dump(engine, out, facts, name, **kw):
    before = fingerprint(engine)
    folder = ckptdoc_hook.dump(engine, out, **kw)
    after = fingerprint(engine)
    facts["dumps"][name] = {"folder": folder, "changed": changed(before, after)}
    return folder


def partition_grad_norm(engine):
    """L2 norm, over all ranks, of the gradient partitions each rank's optimizer step will consume, divided by
    the loss scale; read here straight from DeepSpeed's own attributes (not through the hook). For ZeRO this is
    DeepSpeed's global grad norm of the step. v0.12.6's BF16_Optimizer on a non-pipeline engine copies each rank's
    local gradients into its fp32 gradients before the engine all-reduces the bf16 ones, so there the ranks step
    with different, unreduced gradients and DeepSpeed's norm is each rank's own."""
    opt = engine.optimizer
    if type(opt).__name__ == "BF16_Optimizer":
        parts = [p for i, p in enumerate(opt.fp32_groups_gradient_flat_partition) if any(opt.fp32_groups_has_gradients[i])]
    else:
        parts = [g for lst in opt.averaged_gradients.values() if lst for g in lst]
    sq = torch.zeros(1, dtype=torch.float64)
    for t in parts:
        sq += t.double().pow(2).sum()
    torch.distributed.all_reduce(sq)
    scale = float(engine.optimizer.cur_scale) if engine.fp16_enabled() else 1.0
    return float(sq.sqrt()) / scale


def cmd_train(a):
    init()
    engine, dims = build(a)
    rank = dist.get_rank()
    facts = {"dumps": {}, "rank": rank}
    C.train_steps(engine, dims, a.dtype, a.steps, a.data_seed)
    tag = f"global_step{engine.global_steps}"
    checked_dump(engine, os.path.join(a.out, "snapshots"), facts, "at_step", tag=tag)
    engine.save_checkpoint(os.path.join(a.out, "checkpoint"), tag=tag)
    dist.barrier()
    # one more step: a snapshot with gradients between backward and step, one after it
    x, y = next(C.batches(dims, a.dtype, 1, a.data_seed + 100, rank))
    loss = engine(x, y)
    engine.backward(loss)
    facts["grad_norm_of_partitions"] = partition_grad_norm(engine)
    checked_dump(engine, os.path.join(a.out, "snapshots"), facts, "with_grads", tag="with_grads", grads=True)
    engine.step()
    facts["grad_norm_deepspeed"] = float(engine.get_global_grad_norm())
    facts["loss_scale_after"] = float(engine.optimizer.cur_scale) if engine.fp16_enabled() else None
    checked_dump(engine, os.path.join(a.out, "snapshots"), facts, "after_step", tag="after_step", grads=True)
    allf = [None] * dist.get_world_size()
    torch.distributed.all_gather_object(allf, facts)
    if rank == 0 and a.json:
        C.write_json(a.json, {"ranks": allf, "tag": tag, "steps": a.steps})


def cmd_guard(a):
    init()
    engine, dims = build(a, seed=1234)
    rank = dist.get_rank()
    kw = dict(load_optimizer_states=False, load_lr_scheduler_states=False) if a.mode == "seedbug" else {}
    engine.load_checkpoint(a.src, **kw)
    before = fingerprint(engine)
    out = {"rank": rank, "mode": a.mode}
    try:
        report = ckptdoc_hook.guard(engine, fail_on=a.fail_on, work_dir=a.work_dir, keep=a.keep)
        out["raised"] = False
        out["findings"] = [f["code"] for f in report.get("findings", [])]
        out["snapshot"] = report.get("snapshot")
    except RuntimeError as e:
        out["raised"] = True
        out["message"] = str(e)
    out["changed"] = changed(before, fingerprint(engine))
    if not out["raised"]:
        out["train_log"] = C.train_steps(engine, dims, a.dtype, 1, a.data_seed + 1)
    allr = [None] * dist.get_world_size()
    torch.distributed.all_gather_object(allr, out)
    if rank == 0:
        C.write_json(a.json, {"ranks": allr})


def cmd_every(a):
    init()
    engine, dims = build(a)
    rank = dist.get_rank()
    tick = ckptdoc_hook.every(engine, a.out, steps=a.every, keep=a.keep)
    written = []
    for i, (x, y) in enumerate(C.batches(dims, a.dtype, a.steps, a.data_seed, rank)):
        if a.gate:  # the test lets each step run by creating gate.<n>
            want = f"{a.gate}.{i}"
            while not os.path.exists(want):
                time.sleep(0.05)
        loss = engine(x, y)
        engine.backward(loss)
        engine.step()
        folder = tick()
        if folder:
            written.append(folder)
    if rank == 0 and a.json:
        C.write_json(a.json, {"written": written})


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("train", "guard", "every"):
        p = sub.add_parser(name)
        p.add_argument("--stage", type=int, required=True)
        p.add_argument("--dtype", choices=["fp16", "bf16", "fp32"], required=True)
        p.add_argument("--bf16-optimizer", action="store_true")
        p.add_argument("--model", choices=["A", "edge"], default="A")
        p.add_argument("--dims", default=",".join(map(str, C.SMALL_DIMS)))
        p.add_argument("--zero-extra", default=None)
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--data-seed", type=int, default=7)
        p.add_argument("--json", default=None)
    t = sub.choices["train"]
    t.add_argument("--out", required=True)
    t.add_argument("--steps", type=int, default=3)
    g = sub.choices["guard"]
    g.add_argument("--src", required=True)
    g.add_argument("--mode", choices=["seedbug", "healthy"], required=True)
    g.add_argument("--fail-on", default="error")
    g.add_argument("--work-dir", default=None)
    g.add_argument("--keep", action="store_true")
    e = sub.choices["every"]
    e.add_argument("--out", required=True)
    e.add_argument("--steps", type=int, default=4)
    e.add_argument("--every", type=int, default=1)
    e.add_argument("--keep", type=int, default=None)
    e.add_argument("--gate", default=None)
    a = ap.parse_args()
    {"train": cmd_train, "guard": cmd_guard, "every": cmd_every}[a.cmd](a)


if __name__ == "__main__":
    main()
