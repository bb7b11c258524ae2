#!/usr/bin/python3
"""The oracle for `ckptdoc diff`: two torch state dicts (e.g. DeepSpeed's own zero_to_fp32.py outputs) compared
in torch. Prints JSON {"differ": {name: max_abs_diff}, "only_a": [...], "only_b": [...]}; NaN equals NaN at the
same place.

Usage: state_dict_diff.py A B
"""
import json
import sys

import torch


def main():
    a = torch.load(sys.argv[1], map_location="cpu")
    b = torch.load(sys.argv[2], map_location="cpu")
    differ = {}
    for k in a:
        if k not in b:
            continue
        x, y = a[k].double(), b[k].double()
        same = (x == y) | (torch.isnan(x) & torch.isnan(y))
        if not bool(same.all()):
            differ[k] = float((x - y).abs()[~same].max())
    print(json.dumps({"differ": differ, "only_a": sorted(set(a) - set(b)), "only_b": sorted(set(b) - set(a))}))


if __name__ == "__main__":
    main()
