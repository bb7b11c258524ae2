#!/usr/bin/python3
"""Adds DeepSpeed 0.19.3+'s ZeRO-3 `ds_zero_partition_groups` to every optimizer file of a copied checkpoint, as
stage3.py's _zero3_partition_group_metadata writes it (one entry per sub-group: sub_group, partition_count,
partition_rank, partition_ranks, families, group_names), with the partition counts given (the last sub-group named the expert one). A derived input: the
real AutoEP run is matrix entry v019_autoep_z3; this one keeps a plain job's files and varies only the counts.

usage: partition_groups_edit.py SAVE_DIR --counts N[,N...]   (one count per sub-group; the last repeats)
"""
import argparse
import glob
import os

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("save_dir")
    ap.add_argument("--counts", required=True)
    a = ap.parse_args()
    counts = [int(c) for c in a.counts.split(",")]
    tag = open(os.path.join(a.save_dir, "latest")).read().strip()
    files = sorted(glob.glob(os.path.join(a.save_dir, tag, "*zero_pp_rank_*_optim_states.pt")))
    if not files:
        raise SystemExit(f"no optimizer files in {a.save_dir}/{tag}")
    for f in files:
        rank = int(os.path.basename(f).split("zero_pp_rank_")[1].split("_")[0])
        sd = torch.load(f, map_location="cpu", weights_only=False)
        osd = sd["optimizer_state_dict"]
        groups = []
        for g in range(len(osd["fp32_flat_groups"])):
            n = counts[min(g, len(counts) - 1)]
            expert = g == len(osd["fp32_flat_groups"]) - 1  # DeepSpeed writes the key only with an expert family
            first = rank // n * n if n else 0
            groups.append({"sub_group": g, "partition_count": n, "partition_rank": rank % n if n else 0,
                           "partition_ranks": list(range(first, first + n)),
                           "families": ["autoep_expert" if expert else "replicated"],
                           "group_names": ["ep_size_2" if expert else "replicated"]})
        osd["ds_zero_partition_groups"] = groups
        torch.save(sd, f)


if __name__ == "__main__":
    main()
