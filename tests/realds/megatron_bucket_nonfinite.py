#!/usr/bin/python3
"""torch's count of the NaN/Inf in each bucket tensor of a Megatron-core bucket-space iteration folder
(dp_reshardable: ...optimizer.distributed.dp_group_idx_<i>.gbuf_idx_<g>.dtype_(...).bucket_idx_<b>.<state>, a
ChainedOptimizer's chained_<i>. prefix included) and in each model weight, read with torch's own
dcp_to_torch_save. Prints one JSON object: {"buckets": {key: count}, "weights": {key: count}}, nonzero counts
only.

usage: megatron_bucket_nonfinite.py ITER_DIR   (the judges' venv python: torch)
"""
import json
import os
import sys
import tempfile

import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save


def flat(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flat(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "all.pt")
        dcp_to_torch_save(sys.argv[1], path)
        sd = torch.load(path, weights_only=False)  # megatron-core's own save: its objects are plain values
    out = {"buckets": {}, "weights": {}}
    for key, v in flat(sd):
        if not torch.is_tensor(v) or not v.is_floating_point():
            continue
        n = int((~torch.isfinite(v.float())).sum())
        if n == 0:
            continue
        if ".bucket_idx_" in key and "optimizer.distributed." in key:
            out["buckets"][key] = n
        elif "optimizer." not in key:
            out["weights"][key] = n
    print(json.dumps(out))


if __name__ == "__main__":
    main()
