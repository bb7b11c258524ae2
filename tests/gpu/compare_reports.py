#!/usr/bin/env python3
"""Compare two ckptdoc JSON reports (diagnose or repair --json) from different devices.

Every key, string, bool and integer must be identical; floats must agree within --rel (relative; NaN/None
equal to themselves). Keys named with --ignore (anywhere in the tree) are dropped first: the backend
description and timings legitimately differ between devices. Prints one line per difference (at most 20)
and exits 1 when there is any, 0 when the reports agree.
usage: compare_reports.py A.json B.json [--rel 1e-9] [--ignore KEY ...]
"""
import argparse
import json
import math
import sys


def walk(a, b, path, rel, ignore, out):
    if isinstance(a, dict) and isinstance(b, dict):
        ka = {k for k in a if k not in ignore}
        kb = {k for k in b if k not in ignore}
        for k in sorted(ka ^ kb):
            out.append(f"{path}/{k}: only in {'A' if k in ka else 'B'}")
        for k in sorted(ka & kb):
            walk(a[k], b[k], f"{path}/{k}", rel, ignore, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} vs {len(b)} items")
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}[{i}]", rel, ignore, out)
    elif isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        if a != b or type(a) is not type(b):
            out.append(f"{path}: {a!r} vs {b!r}")
    elif isinstance(a, int) and isinstance(b, int):
        if a != b:
            out.append(f"{path}: {a} vs {b} (count)")
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        x, y = float(a), float(b)
        same = x == y or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= rel * max(abs(x), abs(y))
        if not same:
            out.append(f"{path}: {x!r} vs {y!r} (relative {abs(x - y) / max(abs(x), abs(y)):.3g})")
    elif a != b:
        out.append(f"{path}: {a!r} vs {b!r}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rel", type=float, default=1e-9)
    p.add_argument("--ignore", action="append", default=[])
    args = p.parse_args()
    with open(args.a) as f:
        a = json.load(f)
    with open(args.b) as f:
        b = json.load(f)
    out = []
    walk(a, b, "", args.rel, set(args.ignore), out)
    for line in out[:20]:
        print("  differs: " + line)
    if len(out) > 20:
        print(f"  ... {len(out) - 20} more differences")
    if not out:
        n = [0]

        def count(v):
            n[0] += 1
            if isinstance(v, dict):
                for k, x in v.items():
                    if k not in args.ignore:
                        count(x)
            elif isinstance(v, list):
                for x in v:
                    count(x)

        count(a)
        print(f"  same: {n[0]} values agree (ignoring {', '.join(sorted(args.ignore)) or 'nothing'})")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
