#!/usr/bin/python3
"""Prints, as JSON, what every optimizer file of a tag folder records about its partition: group_paddings,
partition_count and the length of each saved fp32 partition (run through `realds.py py`).

  paddings.py TAG_DIR   ->  {"0": {"group_paddings": [...], "partition_count": [...], "fp32_numel": [...]}, ...}
"""
import glob
import json
import os
import sys

import torch


def main():
    out = {}
    for f in sorted(glob.glob(os.path.join(sys.argv[1], "*zero_pp_rank_*_optim_states.pt"))):
        rank = int(os.path.basename(f).split("zero_pp_rank_")[1].split("_")[0])
        osd = torch.load(f, map_location="cpu")["optimizer_state_dict"]
        pads = osd.get("group_paddings", osd.get("groups_padding"))
        pc = osd.get("partition_count")
        out[str(rank)] = {"group_paddings": [int(x) for x in pads] if pads is not None else None,
                          "partition_count": [int(x) for x in pc] if isinstance(pc, (list, tuple)) else pc,
                          "fp32_numel": [t.numel() for t in osd["single_partition_of_fp32_groups"]]}
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
