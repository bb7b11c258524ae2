#!/usr/bin/python3
"""Checks a `ckptdoc repair --repartition --target` output against its input and template, with DeepSpeed's own
zero_to_fp32 consolidation of all three (get_fp32_state_dict_from_zero_checkpoint, what zero_to_fp32.py runs)
and torch.load of their model files (run through `realds.py py`).

  check_graft.py OUT_DIR IN_DIR TMPL_DIR      (save folders holding `latest`)

Every trainable param of the template: where the input has a param of that name and shape, the output's fp32
master and 16-bit weight are the input's, bit for bit; otherwise (a new param, or a changed shape kept with
--allow-shape-change) the template's. Buffers come from the template. Prints OK or the first difference.
"""
import glob
import os
import sys

import torch
from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def model_file(save_dir):
    with open(os.path.join(save_dir, "latest")) as f:
        tag = f.read().strip()
    return torch.load(glob.glob(os.path.join(save_dir, tag, "*model_states.pt"))[0], map_location="cpu")


def main():
    out_fp32, in_fp32, tmpl_fp32 = (get_fp32_state_dict_from_zero_checkpoint(d) for d in sys.argv[1:4])
    out_m, in_m, tmpl_m = (model_file(d) for d in sys.argv[1:4])
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
