#!/usr/bin/python3
"""Damages a universal checkpoint folder (a copy) the way real failures do, with torch.load/torch.save, for the
diagnose tests. Run with DeepSpeed importable (realds.py py -- damage_universal.py ...).

  damage_universal.py TAG_DIR ACTION [PARAM]

  remove-folder PARAM   delete zero/PARAM/ (an interrupted conversion or copy)
  nan PARAM             three NaNs in zero/PARAM/exp_avg_sq.pt
  shape PARAM           zero/PARAM/fp32.pt holds the tensor with one row less
  stale-fp32 PARAM      zero/PARAM/fp32.pt holds fresh random values (masters unrelated to the weights)
  drop-step             remove `iteration` from the model file and every step.pt (no loader can set the step)
  drop-zero3-step       remove the step from zero/optimizer_state.pt's optimizer_state_dict (where ZeRO-3's
                        loader reads it)
ZeRO-3's files at tp 1 hold bare tensors rather than {'param': tensor}: damaged the same way.
"""
import glob
import os
import shutil
import sys

import torch


def main():
    tag, action = sys.argv[1], sys.argv[2]
    param = sys.argv[3] if len(sys.argv) > 3 else None
    zero = os.path.join(tag, "zero")
    if action == "remove-folder":
        shutil.rmtree(os.path.join(zero, param))
    elif action in ("nan", "shape", "stale-fp32"):
        name = "exp_avg_sq.pt" if action == "nan" else "fp32.pt"
        path = os.path.join(zero, param, name)
        d = torch.load(path, map_location="cpu")
        bare = torch.is_tensor(d)
        t = d if bare else d["param"]
        if action == "nan":
            t.view(-1)[:3] = float("nan")
        elif action == "shape":
            t = t[:-1].clone()
        else:
            g = torch.Generator().manual_seed(5)
            t = torch.randn(t.shape, generator=g) * t.float().std()
        if not bare:
            d["param"] = t
        torch.save(t if bare else d, path)
    elif action == "drop-step":
        for f in glob.glob(os.path.join(zero, "*", "step.pt")):
            os.remove(f)
        model = os.path.join(tag, "mp_rank_00_model_states.pt")
        sd = torch.load(model, map_location="cpu")
        sd.pop("iteration", None)
        torch.save(sd, model)
    elif action == "drop-zero3-step":
        path = os.path.join(zero, "optimizer_state.pt")
        sd = torch.load(path, map_location="cpu")
        for st in sd["optimizer_state_dict"]["state"].values():
            st.pop("step", None)
        torch.save(sd, path)
    else:
        raise SystemExit(f"unknown action {action}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
