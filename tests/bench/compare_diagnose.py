#!/usr/bin/env python3
"""Runs `diagnose --json` of two ckptdoc binaries on every checkpoint under the given folders and says whether
the reports are equal, ignoring the time each took ("seconds"). For changes that must not move a result (the
scan's speed work): every number, histogram and finding has to come out the same.

A checkpoint is a folder holding `latest` (DeepSpeed), a `.metadata` file (PyTorch DCP), or a global_step*
folder without a `latest` beside it.

With --text it compares the text reports instead, byte for byte but for the time in the "scanned ... in N s"
line.

usage: compare_diagnose.py BASELINE_CKPTDOC OURS_CKPTDOC ROOT... [--extra ARG]... [--text]
prints one line per checkpoint that differs and a count; exit 1 when any differs."""
import argparse
import json
import os
import re
import subprocess
import sys


def checkpoints(root):
    for d, dirs, files in os.walk(root):
        dirs.sort()
        if "latest" in files or ".metadata" in files:
            yield d
            dirs[:] = []  # its tags are part of it
        elif os.path.basename(d).startswith("global_step") and not os.path.exists(os.path.join(d, "..", "latest")):
            yield d
            dirs[:] = []


def run(binary, path, extra, as_text=False):
    if as_text:
        p = subprocess.run([binary, "diagnose", *extra, path], capture_output=True, text=True)
        return p.returncode, {"text": re.sub(r" in [0-9.]+ s\b", " in - s", p.stdout)}, p.stderr
    p = subprocess.run([binary, "diagnose", "--json", *extra, path], capture_output=True, text=True)
    try:
        report = json.loads(p.stdout)
    except ValueError:
        report = {"not json": p.stdout}
    if isinstance(report, dict):
        report.pop("seconds", None)
    return p.returncode, report, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("baseline")
    ap.add_argument("ours")
    ap.add_argument("roots", nargs="+")
    ap.add_argument("--extra", action="append", default=[], help="an argument passed to both diagnose runs")
    ap.add_argument("--text", action="store_true", help="compare the text reports (the time masked)")
    a = ap.parse_args()
    same = differ = 0
    for root in a.roots:
        for path in checkpoints(root):
            rb, jb, eb = run(a.baseline, path, a.extra, a.text)
            ro, jo, eo = run(a.ours, path, a.extra, a.text)
            if rb == ro and jb == jo and eb == eo:
                same += 1
                continue
            differ += 1
            keys = sorted(k for k in set(jb) | set(jo) if jb.get(k) != jo.get(k)) if isinstance(jb, dict) else []
            print(f"DIFFERS {path}: exit {rb} vs {ro}; keys {keys}; stderr equal: {eb == eo}")
    print(f"{same} equal, {differ} different")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
