#!/usr/bin/python3
"""Checks a `ckptdoc repair --repartition --target` output against its input and template, with DeepSpeed's own
zero_to_fp32.py outputs of all three and torch.load of their model files (run through `realds.py py`).

  check_graft.py OUT_FP32 IN_FP32 TMPL_FP32 OUT_MODEL IN_MODEL TMPL_MODEL

Every trainable param of the template: where the input has a param of that name and shape, the output's fp32
master and 16-bit weight are the input's, bit for bit; otherwise (a new param, or a changed shape kept with
--allow-shape-change) the template's. Buffers come from the template. Prints OK or the first difference.
"""
import sys

import torch


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def main():
    out_fp32, in_fp32, tmpl_fp32 = (torch.load(p, map_location="cpu") for p in sys.argv[1:4])
    out_m, in_m, tmpl_m = (torch.load(p, map_location="cpu") for p in sys.argv[4:7])
    buffers = set(tmpl_m.get("buffer_names", []))
    carried = new = 0
    for name, t in tmpl_fp32.items():
        if name in buffers:
            want, want_lp = t, tmpl_m["module"][name]
        elif name in in_fp32 and in_fp32[name].shape == t.shape:
            want, want_lp = in_fp32[name], in_m["module"][name]
            carried += 1
        else:
            want, want_lp = t, tmpl_m["module"][name]
            new += 1
        if name not in out_fp32 or not same(out_fp32[name], want):
            print(f"FAIL: fp32 of {name} is not the {'template' if want is t else 'input'}'s")
            return 1
        if not same(out_m["module"][name], want_lp):
            print(f"FAIL: 16-bit weight of {name} is not the {'template' if want is t else 'input'}'s")
            return 1
    print(f"OK {carried} carried, {new} from the template")
    return 0


if __name__ == "__main__":
    sys.exit(main())
