#!/usr/bin/python3
"""What a universal checkpoint folder holds, as torch reads it: the reference for ckptdoc's inspect, diagnose and
export of the folder. Run with DeepSpeed importable (realds.py py --ds V -- universal_values.py ...).

  universal_values.py TAG_DIR --json OUT [--fp32 OUT.pt]

The JSON: {"params": {name: {"states": [...], "step": n|null, STATE: {"count", "min", "max", "nan", "zeros",
"bare"}}}, "trainable": [names from the model files' param_shapes], "optimizer_step": n|null}. "bare" says the
file holds a tensor rather than {'param': tensor} (ZeRO-3's files at tp 1). --fp32 writes {name: fp32 master in
the param's shape} for every trainable param, and the model file's buffers, to compare with `ckptdoc export`.
"""
import argparse
import glob
import json
import math
import os
import sys

import torch


def number(v):
    return float(v.item()) if torch.is_tensor(v) else float(v)


def trainable_shapes(tag):
    """name -> shape, from param_shapes of the model file(s) (a list of dicts, one per group or sub-group)."""
    files = sorted(glob.glob(os.path.join(tag, "mp_rank_*_model_states.pt")))
    files = files or sorted(glob.glob(os.path.join(tag, "zero_pp_rank_*_model_states.pt")))[:1]
    shapes = {}
    for f in files:
        ps = torch.load(f, map_location="cpu", weights_only=False).get("param_shapes") or []
        for group in (ps if isinstance(ps, list) else [ps]):
            for name, shape in group.items():
                shapes.setdefault(name, list(shape))
    return shapes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tag")
    ap.add_argument("--json", required=True)
    ap.add_argument("--fp32")
    a = ap.parse_args()
    zero = os.path.join(a.tag, "zero")
    shapes = trainable_shapes(a.tag)
    out = {"params": {}, "trainable": list(shapes), "optimizer_step": None}
    fp32 = {}
    for name in sorted(os.listdir(zero)):
        folder = os.path.join(zero, name)
        if not os.path.isdir(folder):
            continue
        p = {"states": [], "step": None}
        for f in sorted(os.listdir(folder)):
            if not f.endswith(".pt"):
                continue
            state = f[:-3]
            v = torch.load(os.path.join(folder, f), map_location="cpu", weights_only=False)
            if state == "step":
                p["step"] = number(v)
                continue
            p["states"].append(state)
            t = v if torch.is_tensor(v) else v["param"]
            x = t.detach().double().reshape(-1)
            finite = x[torch.isfinite(x)]
            p[state] = {"count": x.numel(), "nan": int(torch.isnan(x).sum()), "zeros": int((x == 0).sum()),
                        "min": float(finite.min()) if finite.numel() else None,
                        "max": float(finite.max()) if finite.numel() else None,
                        "bare": torch.is_tensor(v), "shape": list(t.shape)}
            if state == "fp32" and name in shapes and t.numel() == math.prod(shapes[name]):
                fp32[name] = t.detach().float().reshape(shapes[name]).clone()
        out["params"][name] = p
    # export writes the module's buffers beside the masters, as zero_to_fp32.py does: as the model file keeps them
    for f in sorted(glob.glob(os.path.join(a.tag, "*model_states.pt")))[:1]:
        sd = torch.load(f, map_location="cpu", weights_only=False)
        for name in sd.get("buffer_names") or []:
            fp32[name] = sd["module"][name]
    osd = torch.load(os.path.join(zero, "optimizer_state.pt"), map_location="cpu", weights_only=False)
    state = (osd.get("optimizer_state_dict") or {}).get("state") or {}
    if state and "step" in state.get(0, {}):
        out["optimizer_step"] = number(state[0]["step"])
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
    if a.fp32:
        torch.save(fp32, a.fp32)
    return 0


if __name__ == "__main__":
    sys.exit(main())
