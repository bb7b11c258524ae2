#!/usr/bin/python3
"""Independent truth for ckptdoc's fp32-main-param comparison of a Megatron-core checkpoint: torch's own DCP
loader reads every tensor whole (no_dist) and, for each fp32 main (optimizer.state.fp32_param.<key> or
optimizer.state.param.<key>) beside a bf16/fp16 weight <key>, says whether every element of the weight is the
main rounded to the weight's dtype. Prints one JSON line: {"compared": N, "stale": [keys whose share of exact
elements is below 0.999], "exact": {key: share}}.

usage: check_megatron_mains.py ITERATION_DIR
"""
import json
import sys

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader

PREFIXES = ("optimizer.state.fp32_param.", "optimizer.state.param.")


def main():
    folder = sys.argv[1]
    md = FileSystemReader(folder).read_metadata()
    tensors = {k: v for k, v in md.state_dict_metadata.items() if hasattr(v, "size")}
    sd = {k: torch.empty(tuple(v.size), dtype=v.properties.dtype) for k, v in tensors.items()}
    dcp.load(sd, checkpoint_id=folder, no_dist=True)
    exact = {}
    for k, main in sd.items():
        for p in PREFIXES:
            weight = sd.get(k[len(p):]) if k.startswith(p) else None
            if weight is not None and main.dtype == torch.float32 and weight.dtype in (torch.bfloat16, torch.float16):
                exact[k[len(p):]] = (main.to(weight.dtype) == weight).float().mean().item()
    print(json.dumps({"compared": len(exact), "stale": sorted(k for k, v in exact.items() if v < 0.999),
                      "exact": exact}))


if __name__ == "__main__":
    main()
