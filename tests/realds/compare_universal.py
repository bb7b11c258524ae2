#!/usr/bin/python3
"""Compares two universal checkpoint folders file by file, as torch loads them (run it with DeepSpeed importable:
`realds.py py --ds V -- compare_universal.py ...`, since optimizer_state.pt pickles DeepSpeed's classes).

  compare_universal.py THEIRS OURS --json OUT [--allowed-extra FILE:KEY ...]

THEIRS and OURS are tag folders (the ones holding zero/). Both must hold the same files; every file's loaded value
must be equal: the same dict keys in the same order, the same types, tensors with the same dtype, shape,
requires_grad and bits, objects (loss scalers, ZeroStageEnum) with equal attributes. --allowed-extra FILE:KEY
names a top-level dict key OURS may have in FILE that THEIRS lacks (e.g. mp_rank_00_model_states.pt:iteration).
Exit 0 when equal, 1 when not (the JSON lists every difference), 2 on errors.
"""
import argparse
import enum
import json
import os
import sys

import torch


def files_of(root):
    out = set()
    for d, _, fs in os.walk(root):
        for f in fs:
            out.add(os.path.relpath(os.path.join(d, f), root))
    return out


def same(a, b, path, diffs):
    if type(a) is not type(b):
        diffs.append({"path": path, "what": f"type {type(a).__name__} vs {type(b).__name__}"})
        return
    if torch.is_tensor(a):
        if a.dtype != b.dtype or a.shape != b.shape or a.requires_grad != b.requires_grad:
            diffs.append({"path": path, "what": f"tensor {a.dtype} {tuple(a.shape)} grad={a.requires_grad} vs "
                                                f"{b.dtype} {tuple(b.shape)} grad={b.requires_grad}"})
            return
        x, y = a.detach().contiguous(), b.detach().contiguous()
        if x.numel() and x.element_size() in (2, 4, 8):
            view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
            x, y = x.view(view), y.view(view)
        if not torch.equal(x, y):
            diffs.append({"path": path, "what": "tensor values differ"})
        return
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            diffs.append({"path": path, "what": f"keys {list(a.keys())} vs {list(b.keys())}"})
        for k in a:
            if k in b:
                same(a[k], b[k], f"{path}[{k!r}]", diffs)
        return
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            diffs.append({"path": path, "what": f"length {len(a)} vs {len(b)}"})
            return
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]", diffs)
        return
    if isinstance(a, enum.Enum) or isinstance(a, (int, float, str, bool, bytes, type(None), torch.dtype, torch.Size)):
        if a != b and not (isinstance(a, float) and a != a and b != b):
            diffs.append({"path": path, "what": f"{a!r} vs {b!r}"})
        return
    if hasattr(a, "__dict__"):
        same(vars(a), vars(b), path + ".__dict__", diffs)
        return
    if a != b:
        diffs.append({"path": path, "what": f"{a!r} vs {b!r}"})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("theirs")
    ap.add_argument("ours")
    ap.add_argument("--json", required=True)
    ap.add_argument("--allowed-extra", action="append", default=[])
    a = ap.parse_args()
    allowed = {}
    for spec in a.allowed_extra:
        f, k = spec.rsplit(":", 1)
        allowed.setdefault(f, set()).add(k)
    ft, fo = files_of(a.theirs), files_of(a.ours)
    report = {"only_theirs": sorted(ft - fo), "only_ours": sorted(fo - ft), "files": [], "allowed_extra": a.allowed_extra}
    for rel in sorted(ft & fo):
        t = torch.load(os.path.join(a.theirs, rel), map_location="cpu")
        o = torch.load(os.path.join(a.ours, rel), map_location="cpu")
        used = []
        if rel in allowed and isinstance(o, dict) and isinstance(t, dict):
            for k in allowed[rel]:
                if k in o and k not in t:
                    o = {kk: vv for kk, vv in o.items() if kk != k}
                    used.append(k)
        diffs = []
        same(t, o, rel, diffs)
        report["files"].append({"file": rel, "equal": not diffs, "differences": diffs[:20], "extra_keys_ours": used})
    report["compared"] = len(report["files"])
    report["ok"] = not report["only_theirs"] and not report["only_ours"] and all(f["equal"] for f in report["files"])
    with open(a.json, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({"ok": report["ok"], "compared": report["compared"], "only_theirs": report["only_theirs"],
                      "only_ours": report["only_ours"],
                      "unequal": [f["file"] for f in report["files"] if not f["equal"]][:20]}))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001
        print(f"compare_universal.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(2)
