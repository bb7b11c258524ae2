#!/usr/bin/python3
"""Does a (repaired) tensor-, pipeline- or expert-parallel checkpoint load and keep training in real DeepSpeed?
The counterpart of the shared harness's ds_load_check.py (data-parallel jobs only) for par_models.py's jobs.

usage:
  par_load_check.py --ckpt DIR --kind pipe3d|tp|moe|tp_z3 --world N [--load-optimizer-states 0|1] [--load-module-only]
                    [--expect-fp32 FILE] [--expect-lp FILE] [--expect-moments FILE] [--dump-fp32 FILE]
                    [--dump-moments FILE] [--universal] [--tp N]
                    [--json OUT] [--strict]

Starts N local gloo ranks of itself through the harness's launch.py, each building the job of --kind at world N
(model seed --seed, default 777, so nothing matches the checkpoint by accident) and calling

    engine.load_checkpoint(DIR, load_optimizer_states=..., load_lr_scheduler_states=True[, load_module_only=True])

then measures, per rank and flat group, |fp32 master - float(lp)| over the real elements (within half an lp ulp?),
the Adam state (present, step), consolidates the whole model's fp32 masters and Adam moments exactly as DeepSpeed
holds them (par_models.gather_full: DeepSpeed's safe_get_full_* over data parallel, then tensor / pipeline /
expert merge) and compares them bit for bit with --expect-* files ({name: tensor} and {"exp_avg": {...},
"exp_avg_sq": {...}}, torch files), and runs ONE more training step (loss must be finite; no lp weight may move by
more than --max-step-delta). --expect-lp compares the 16-bit weights DeepSpeed loaded (as float32).

The JSON report has the verdict keys ds_load_check.py has: load_ok, step_ok, fp32_lp_consistent,
lp_stable_after_step, expect_fp32_match, expect_moments_match (and expect_lp_match), ok, strict_ok, exit_code. Exit 0 = loaded and
stepped on every rank (with --strict: and every check held), 1 = not, 2 = bad arguments / internal error.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--kind", required=True, choices=["pipe3d", "tp", "moe", "tp_z3"])
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--harness", default=os.environ.get("CKPTDOC_HARNESS",
                                                        os.path.join(HERE, "..", "..", "..", "shared", "deepspeed",
                                                                     "harness")))
    ap.add_argument("--launcher", default=None,
                    help="script that starts the ranks (default: the harness's launch.py; the judges' venv has its own)")
    ap.add_argument("--load-optimizer-states", type=int, choices=[0, 1], default=1)
    ap.add_argument("--load-module-only", action="store_true")
    ap.add_argument("--universal", action="store_true",
                    help='load latest_universal with "checkpoint": {"load_universal": true}')
    ap.add_argument("--tp", type=int, help="tensor-parallel size to build the job at (default: the kind's)")
    ap.add_argument("--seed", type=int, default=777)
    ap.add_argument("--expect-fp32")
    ap.add_argument("--expect-lp")
    ap.add_argument("--expect-moments")
    ap.add_argument("--dump-fp32")
    ap.add_argument("--dump-moments")
    ap.add_argument("--max-step-delta", type=float, default=0.01)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--_rank-workdir", dest="rank_workdir", help=argparse.SUPPRESS)
    return ap


# ============================================================================ rank side
def rank_main(a):
    import datetime
    import torch
    import deepspeed
    import deepspeed.comm as dist
    import ds_common as C
    import par_models as M

    rank = int(os.environ["RANK"])
    rep = {"rank": rank, "phase": "init"}
    out = os.path.join(a.rank_workdir, f"rank{rank}.json")

    def flush():
        with open(out + ".tmp", "w") as f:
            json.dump(rep, f, indent=1)
        os.replace(out + ".tmp", out)

    flush()
    M.cpu_patches()
    deepspeed.init_distributed(dist_backend="gloo", timeout=datetime.timedelta(seconds=max(60, int(a.timeout))))
    job = M.build(a.kind, a.seed, tp=a.tp, universal=a.universal)
    opt = job.engine.optimizer
    cls = type(opt).__name__
    half_ulp = 2.0 ** -11 if M.KINDS[a.kind]["dtype"] == "fp16" else 2.0 ** -8
    rep.update(deepspeed=deepspeed.__version__, optimizer_class=cls, coords={"stage": job.stage, "tp": job.tp_rank, "dp": job.dp_rank})

    def optimizer_params():
        """The fp32 tensors the wrapped optimizer steps (its state is keyed by these objects), per flat group."""
        if cls == "DeepSpeedZeroOptimizer":
            return list(opt.single_partition_of_fp32_groups)
        if cls == "BF16_Optimizer":
            return list(opt.fp32_groups_flat_partition)
        return list(opt.fp32_partitioned_groups_flat)

    def measure():
        groups = []
        # (fp32 partition, lp partition, real element ranges) per flat group: the harness's own reading
        for i, ((fp32, lp, ranges), owner) in enumerate(zip(C.master_partitions(opt), optimizer_params())):
            f, l = C.real_part(fp32, ranges).double(), C.real_part(lp, ranges).double()
            n = f.numel()
            d = (f - l).abs()
            st = opt.optimizer.state.get(owner, {})
            step = st.get("step")
            groups.append({"group": i, "real_numel": n, "fp32_vs_lp_max_abs": float(d.max()) if n else 0.0,
                           "within_half_ulp": bool((d <= l.abs() * half_ulp + 1e-7).all()),
                           "adam_state": bool(st), "adam_step": None if step is None else float(step)})
        return groups

    rep["phase"] = "load"
    flush()
    kw = dict(load_optimizer_states=bool(a.load_optimizer_states), load_lr_scheduler_states=True)
    if a.load_module_only:
        kw["load_module_only"] = True
    rep["load_checkpoint_kwargs"] = dict(kw)
    t0 = time.time()
    try:
        path, _ = job.engine.load_checkpoint(a.ckpt, **kw)
        rep["load"] = {"ok": path is not None, "wall_s": time.time() - t0}
    except Exception as e:  # noqa: BLE001 - report what DeepSpeed raised
        rep["load"] = {"ok": False, "exception_type": type(e).__name__, "exception_text": str(e)[:3000],
                       "traceback_tail": traceback.format_exc().splitlines()[-12:]}
    if not rep["load"]["ok"]:
        rep["phase"] = "load_failed"
        flush()
        sys.stdout.flush()
        os._exit(3)  # peers may wait in a collective; launch.py stops them

    rep["phase"] = "measure"
    flush()
    rep["after_load"] = measure()
    # Moments exist for every param of a rank or for none (a reset or never-stepped optimizer); all ranks agree
    # before the collective gathers start.
    has = torch.tensor([1.0 if all(g["adam_state"] for g in rep["after_load"]) else 0.0])
    dist.all_reduce(has, op=dist.ReduceOp.MIN)
    full = {"fp32": M.gather_full(job, "fp32"), "lp": M.gather_full(job, "lp")}
    if has.item() > 0:
        for k in ("exp_avg", "exp_avg_sq"):
            full[k] = M.gather_full(job, k)
    if rank == 0:
        torch.save(full, os.path.join(a.rank_workdir, "full.pt"))

    rep["phase"] = "step"
    flush()
    before = full["lp"]  # the whole model's 16-bit weights (ZeRO-3 holds only slices of them on a rank)
    try:
        loss = M.train_step(job, M.batches(job, 4, 99))
        rep["step"] = {"ok": math.isfinite(loss), "loss": loss}
    except Exception as e:  # noqa: BLE001
        rep["step"] = {"ok": False, "exception_type": type(e).__name__, "exception_text": str(e)[:3000],
                       "traceback_tail": traceback.format_exc().splitlines()[-12:]}
        rep["phase"] = "step_failed"
        flush()
        sys.stdout.flush()
        os._exit(4)
    after = M.gather_full(job, "lp")
    delta = {n: float((t - before[n]).abs().max()) if t.numel() else 0.0 for n, t in after.items()}
    rep["lp_step_delta_max"] = max(delta.values()) if delta else 0.0
    rep["phase"] = "done"
    flush()
    dist.barrier()


# ============================================================================ parent side
def compare(got, want):
    """Exact float32 comparison per name; {match, missing, extra, differing: {name: max_abs}}."""
    import torch
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    differing = {}
    for n in sorted(set(got) & set(want)):
        g, w = got[n].float(), want[n].float()
        if g.shape != w.shape:
            differing[n] = f"shape {list(g.shape)} vs {list(w.shape)}"
        elif not torch.equal(g, w):
            differing[n] = float((g - w).abs().max())
    return {"match": not missing and not extra and not differing, "missing": missing, "extra": extra,
            "differing": differing}


def parent_main(a, argv):
    import torch
    t0 = time.time()
    workdir = tempfile.mkdtemp(prefix="par-load-check.")
    report = {"tool": "par_load_check", "args": {k: v for k, v in vars(a).items() if k != "rank_workdir"}}
    try:
        launcher = a.launcher or os.path.join(os.path.abspath(a.harness), "launch.py")
        python = sys.executable if a.launcher else "/usr/bin/python3"
        cmd = [python, launcher, "--world", str(a.world),
               "--timeout", str(a.timeout), "--logdir", os.path.join(workdir, "logs"), "--",
               os.path.abspath(__file__)] + list(argv) + ["--_rank-workdir", workdir, "--ckpt", os.path.abspath(a.ckpt)]
        env = dict(os.environ)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        report["launch"] = {"returncode": p.returncode, "output_tail": p.stdout[-4000:] if p.returncode else ""}
        ranks = []
        for r in range(a.world):
            f = os.path.join(workdir, f"rank{r}.json")
            ranks.append(json.load(open(f)) if os.path.exists(f) else {"rank": r, "phase": "no report"})
        report["ranks"] = ranks
        load_ok = all(r.get("load", {}).get("ok") for r in ranks)
        failed = [r for r in ranks if r.get("load", {}).get("exception_type")]
        report["load"] = {"ok": load_ok, "first_exception": {k: failed[0]["load"].get(k) for k in
                                                             ("exception_type", "exception_text")} if failed else None}
        groups = [g for r in ranks for g in r.get("after_load", [])]
        consistent = load_ok and bool(groups) and all(g["within_half_ulp"] for g in groups)
        steps = sorted({g["adam_step"] for g in groups if g["adam_step"] is not None})
        step_ok = load_ok and all(r.get("step", {}).get("ok") for r in ranks)
        delta = max((r.get("lp_step_delta_max", 0.0) for r in ranks), default=None)
        lp_stable = step_ok and delta is not None and delta <= a.max_step_delta
        verdict = {"load_ok": load_ok, "step_ok": step_ok, "fp32_lp_consistent": consistent,
                   "lp_stable_after_step": lp_stable, "adam_state_present": bool(groups) and
                   all(g["adam_state"] for g in groups), "adam_steps": steps,
                   "losses": [r.get("step", {}).get("loss") for r in ranks], "lp_step_delta_max": delta}
        full_path = os.path.join(workdir, "full.pt")
        full = torch.load(full_path) if load_ok and os.path.exists(full_path) else None
        if full is not None:
            if a.dump_fp32:
                torch.save(full["fp32"], a.dump_fp32)
            if a.dump_moments and "exp_avg" in full:
                torch.save({k: full[k] for k in ("exp_avg", "exp_avg_sq")}, a.dump_moments)
            if a.expect_fp32:
                c = compare(full["fp32"], torch.load(a.expect_fp32))
                report["expect_fp32"] = c
                verdict["expect_fp32_match"] = c["match"]
            if a.expect_lp:
                c = compare(full["lp"], torch.load(a.expect_lp))
                report["expect_lp"] = c
                verdict["expect_lp_match"] = c["match"]
            if a.expect_moments:
                want = torch.load(a.expect_moments)
                ok = "exp_avg" in full
                report["expect_moments"] = {}
                for k in ("exp_avg", "exp_avg_sq"):
                    c = compare(full.get(k, {}), want[k])
                    report["expect_moments"][k] = c
                    ok = ok and c["match"]
                verdict["expect_moments_match"] = ok
        else:  # nothing was consolidated: every expectation fails
            for flag, key in ((a.expect_fp32, "expect_fp32_match"), (a.expect_lp, "expect_lp_match"),
                              (a.expect_moments, "expect_moments_match")):
                if flag:
                    verdict[key] = False
        ok = load_ok and step_ok
        strict_ok = ok and consistent and lp_stable and verdict.get("expect_fp32_match", True) and \
            verdict.get("expect_moments_match", True) and verdict.get("expect_lp_match", True)
        verdict.update(ok=ok, strict_ok=strict_ok, exit_code=0 if (strict_ok if a.strict else ok) else 1)
        report["verdict"] = verdict
        if verdict["exit_code"]:
            logs = {}
            for r in range(a.world):
                f = os.path.join(workdir, "logs", f"rank{r}.log")
                if os.path.exists(f):
                    logs[str(r)] = open(f, errors="replace").read()[-2500:]
            report["rank_log_tails"] = logs
    finally:
        report["wall_s"] = round(time.time() - t0, 2)
        shutil.rmtree(workdir, ignore_errors=True)
    text = json.dumps(report, indent=1)
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    v = report["verdict"]
    print(f"par_load_check: {a.kind} world {a.world}: load_ok={v['load_ok']} step_ok={v['step_ok']} "
          f"fp32_lp_consistent={v['fp32_lp_consistent']} adam_steps={v['adam_steps']} "
          f"expect_fp32={v.get('expect_fp32_match')} expect_moments={v.get('expect_moments_match')} "
          f"exit={v['exit_code']} ({report['wall_s']}s)", file=sys.stderr)
    return v["exit_code"]


def main():
    argv = sys.argv[1:]
    a = parser().parse_args(argv)
    if a.rank_workdir:
        rank_main(a)
        return 0
    try:
        return parent_main(a, argv)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 2


if __name__ == "__main__":
    sys.exit(main())
