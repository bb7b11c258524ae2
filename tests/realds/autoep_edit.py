#!/usr/bin/python3
"""Rewrites the expert placement that DeepSpeed 0.19's AutoEP records in every model file of a copied checkpoint
(ds_autoep_layers[*].expert_placement, and the same list under universal_checkpoint_info), for placements
that real runs of autoep_train.py do not make. A derived input: the real AutoEP run is matrix entry
v019_autoep_z3.

usage: autoep_edit.py SAVE_DIR --placement "0,1,2;2,3"   (per ep rank: its global expert ids, in local order)
"""
import argparse
import glob
import os

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("save_dir")
    ap.add_argument("--placement", required=True)
    a = ap.parse_args()
    ranks = [[int(x) for x in r.split(",") if x] for r in a.placement.split(";")]
    tag = open(os.path.join(a.save_dir, "latest")).read().strip()
    files = sorted(glob.glob(os.path.join(a.save_dir, tag, "zero_pp_rank_*_model_states.pt")))
    if not files:
        raise SystemExit(f"no model files in {a.save_dir}/{tag}")
    for f in files:
        sd = torch.load(f, map_location="cpu", weights_only=False)
        for layers in (sd["ds_autoep_layers"], (sd.get("universal_checkpoint_info") or {}).get("ds_autoep_layers")):
            for layer in layers or []:
                layer["expert_placement"]["ranks"] = [{"rank": r, "experts": e} for r, e in enumerate(ranks)]
        torch.save(sd, f)


if __name__ == "__main__":
    main()
