#!/usr/bin/python3
"""Checks ckptdoc's fp32 export of an FP16_UnfusedOptimizer or FP16_Optimizer checkpoint (ZeRO stage 0) against the
masters the file holds, named the way the training run grouped them: the harness's own Net and param_groups() (the
decay group, then the others, each in named_parameters() order) give each fp32_groups[g][i] its name, or each
piece of the flat fp32_groups_flat[g] (cut by those params' sizes, as FP16_Optimizer flattened them), not ckptdoc.

  check_unfused_export.py MODEL_STATES_PT EXPORTED_BIN DIMS   (DIMS as the entry's model: 96,301,173,13)

Exit 0 when every trainable param of the export equals its master bit for bit and nothing is missing or extra.
"""
import os
import sys

import torch

HARNESS = os.environ.get("CKPTDOC_HARNESS", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                                          "deepspeed", "harness"))
sys.path.insert(0, HARNESS)
import ds_common as C  # noqa: E402


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    model_file, exported, dims = sys.argv[1], sys.argv[2], [int(v) for v in sys.argv[3].split(",")]
    saved = torch.load(model_file, map_location="cpu", weights_only=False)
    model = C.Net(dims)
    name_of = {id(p): n for n, p in model.named_parameters()}
    groups = [[name_of[id(p)] for p in g["params"]] for g in C.param_groups(model)]
    opt = saved["optimizer"]
    if "fp32_groups_flat" in opt:  # FP16_Optimizer: the group's params concatenated, no padding
        sizes = [[p.numel() for p in g["params"]] for g in C.param_groups(model)]
        assert [sum(s) for s in sizes] == [t.numel() for t in opt["fp32_groups_flat"]], sizes
        masters = [list(torch.split(flat, s)) for flat, s in zip(opt["fp32_groups_flat"], sizes)]
    else:
        masters = opt["fp32_groups"]
    assert [len(g) for g in groups] == [len(g) for g in masters], (groups, [len(g) for g in masters])
    expect = {n: t for names, ts in zip(groups, masters) for n, t in zip(names, ts)}
    got = torch.load(exported, map_location="cpu", weights_only=True)
    buffers = set(saved.get("buffer_names") or [])
    trainable = {k: v for k, v in got.items() if k not in buffers}
    bad = sorted(set(expect) ^ set(trainable))
    bad += [n for n in expect if n in trainable and not torch.equal(trainable[n].flatten(), expect[n].float().flatten())]
    if bad:
        sys.exit(f"check_unfused_export.py: differ or missing: {bad}")
    print(f"check_unfused_export.py: {len(expect)} params equal their masters")


if __name__ == "__main__":
    main()
