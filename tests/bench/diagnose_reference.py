#!/usr/bin/python3
"""The numpy/torch baseline for the diagnose benchmark: loads every rank file of a ZeRO-1/2 checkpoint with
torch and computes the statistics ckptdoc diagnose computes (lp vs fp32 exact fraction, max/mean |d|, rel L2,
ULP-distance and log|d| histograms; min/max/mean/rms/NaN/Inf/zero counts and log|v| histograms of lp, fp32,
exp_avg, exp_avg_sq), per param fragment. Prints JSON with bytes and seconds.

  diagnose_reference.py TAG_DIR
"""
import glob
import json
import os
import re
import sys
import time
import types

import numpy as np
import torch


def install_stand_ins():
    """DeepSpeed is not installed: minimal stand-ins for the classes its files name."""
    def module(name):
        m = types.ModuleType(name)
        sys.modules[name] = m
        return m
    for name in ["deepspeed", "deepspeed.runtime", "deepspeed.runtime.fp16", "deepspeed.runtime.zero",
                 "deepspeed.utils", "deepspeed.checkpoint"]:
        module(name)
    ls = module("deepspeed.runtime.fp16.loss_scaler")
    class LossScaler:
        pass
    class DynamicLossScaler(LossScaler):
        pass
    ls.LossScaler, ls.DynamicLossScaler = LossScaler, DynamicLossScaler
    import enum
    cfg = module("deepspeed.runtime.zero.config")
    class ZeroStageEnum(enum.IntEnum):
        disabled = 0
        optimizer_states = 1
        gradients = 2
        weights = 3
        max_stage = 3
    cfg.ZeroStageEnum = ZeroStageEnum
    tf = module("deepspeed.utils.tensor_fragment")
    class fragment_address:
        pass
    tf.fragment_address = fragment_address
    bo = module("deepspeed.runtime.bf16_optimizer")
    bo.fragment_address = fragment_address


def value_stats(x):
    x = x.float()
    finite = torch.isfinite(x)
    f = x[finite]
    a = f.abs()
    nz = a[a > 0]
    hist = torch.histc(torch.log2(nz), bins=256, min=-40, max=24) if nz.numel() else None
    return {"min": f.min().item() if f.numel() else None, "max": f.max().item() if f.numel() else None,
            "mean": f.double().mean().item() if f.numel() else None,
            "rms": f.double().pow(2).mean().sqrt().item() if f.numel() else None,
            "nan": int(torch.isnan(x).sum()), "inf": int(torch.isinf(x).sum()), "zeros": int((x == 0).sum()),
            "hist": int(hist.sum()) if hist is not None else 0}


def divergence(lp, fp32):
    rounded = fp32.to(lp.dtype)
    exact = (rounded.view(torch.int16) == lp.view(torch.int16)).sum().item()
    d = (fp32 - lp.float()).abs()
    ulp = (rounded.view(torch.int16).int() - lp.view(torch.int16).int()).abs()
    ulp_hist = torch.bincount(torch.clamp(torch.floor(torch.log2(ulp.float() + 1)).long(), max=17), minlength=18)
    nz = d[d > 0]
    hist = torch.histc(torch.log2(nz), bins=256, min=-40, max=24) if nz.numel() else None
    return {"exact": exact, "max_abs": d.max().item(), "mean_abs": d.double().mean().item(),
            "rel_l2": (d.double().norm() / lp.double().norm()).item(), "ulp": ulp_hist.tolist(),
            "hist": int(hist.sum()) if hist is not None else 0}


def main():
    tag_dir = sys.argv[1]
    install_stand_ins()
    start = time.perf_counter()
    nbytes = 0
    model = torch.load(os.path.join(tag_dir, "mp_rank_00_model_states.pt"), map_location="cpu")
    module = model["module"]
    shapes = model["param_shapes"]
    files = sorted(glob.glob(os.path.join(tag_dir, "*zero_pp_rank_*_optim_states.pt")),
                   key=lambda p: int(re.search(r"zero_pp_rank_(\d+)_", p).group(1)))
    dp = len(files)
    results = []
    for rank, path in enumerate(files):
        osd = torch.load(path, map_location="cpu")["optimizer_state_dict"]
        for g, group_shapes in enumerate(shapes):
            fp32 = osd["single_partition_of_fp32_groups"][g]
            state = osd["base_optimizer_state"]["state"][g]
            m, v = state["exp_avg"], state["exp_avg_sq"]
            n_total = sum(int(np.prod(s)) for s in group_shapes.values())
            P = m.numel()
            lo, hi = rank * P, rank * P + fp32.numel()
            off = 0
            for name, shape in group_shapes.items():
                n = int(np.prod(shape))
                a, b = max(off, lo), min(off + n, hi)
                if a < b:
                    lp = module[name].reshape(-1)[a - off:b - off]
                    f = fp32[a - lo:b - lo]
                    results.append({"param": name, "rank": rank, "div": divergence(lp, f), "lp": value_stats(lp),
                                    "fp32": value_stats(f), "exp_avg": value_stats(m[a - lo:b - lo]),
                                    "exp_avg_sq": value_stats(v[a - lo:b - lo])})
                    nbytes += (b - a) * (lp.element_size() + 4 + m.element_size() + v.element_size())
                off += n
            del n_total
    seconds = time.perf_counter() - start
    print(json.dumps({"bytes": nbytes, "seconds": seconds, "gb_per_s": nbytes / seconds / 1e9, "fragments": len(results),
                      "dp": dp}))


if __name__ == "__main__":
    main()
