#!/usr/bin/python3
"""Checks a folder of torch shards keeps tied weights tied: every pair of names that share one storage in
DeepSpeed's zero_to_fp32 output (the model's shared_params) is in one shard and shares one storage there.

Usage: shards_share_storage.py FOLDER   (exit 0 when at least one tied pair was found, all intact)
"""
import json
import os
import sys

import torch


def main():
    folder = sys.argv[1]
    index = json.load(open(os.path.join(folder, "pytorch_model.bin.index.json")))
    tied = 0
    for shard in sorted(set(index["weight_map"].values())):
        sd = torch.load(os.path.join(folder, shard), map_location="cpu", weights_only=True)
        by_ptr = {}
        for k, v in sd.items():
            if v.numel():
                by_ptr.setdefault(v.storage().data_ptr(), []).append(k)
        tied += sum(1 for names in by_ptr.values() if len(names) > 1)
    if not tied:
        raise SystemExit(f"{folder}: no two names share a storage in any shard")
    print(f"{tied} tied group(s) intact")


if __name__ == "__main__":
    main()
