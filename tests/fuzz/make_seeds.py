#!/usr/bin/python3
"""Seed corpora for the fuzz harnesses, from real data: the DeepSpeed fixtures, pickles inside them, small
torch.save files (zip and legacy) and safetensors files.  make_seeds.py FIXTURES_DIR OUT_DIR"""
import glob
import json
import os
import struct
import sys
import zipfile

import torch


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    for sub in ["zip", "unpickler", "torch_file", "safetensors", "deepspeed_catalog", "dcp_metadata"]:
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    n = 0
    for path in sorted(glob.glob(os.path.join(fixtures, "deepspeed", "*", "checkpoint", "*", "*.pt"))):
        data = open(path, "rb").read()
        name = f"{n:03d}.pt"
        n += 1
        if len(data) < 200_000:
            for sub in ["zip", "torch_file"]:
                open(os.path.join(out, sub, name), "wb").write(data)
        with zipfile.ZipFile(path) as z:
            pkl = [i for i in z.namelist() if i.endswith("data.pkl")][0]
            blob = z.read(pkl)
            open(os.path.join(out, "unpickler", name + ".pkl"), "wb").write(blob)
        if "optim_states" in path and len(data) < 600_000:
            open(os.path.join(out, "deepspeed_catalog", name), "wb").write(data)
    # the .metadata pickles torch's dcp.save wrote for the DCP fixtures (the harness pairs them with fsdp2_ws2's
    # .distcp files; the others name files it lacks, which is input too)
    for path in sorted(glob.glob(os.path.join(fixtures, "dcp", "*", ".metadata"))):
        name = os.path.basename(os.path.dirname(path)) + ".metadata"
        open(os.path.join(out, "dcp_metadata", name), "wb").write(open(path, "rb").read())
    small = {"w": torch.arange(6, dtype=torch.float16).view(2, 3), "b": torch.ones(3), "n": [1, "x", (2, 3)]}
    torch.save(small, os.path.join(out, "torch_file", "small_zip.pt"))
    torch.save(small, os.path.join(out, "torch_file", "small_legacy.pt"), _use_new_zipfile_serialization=False)
    torch.save(small, os.path.join(out, "zip", "small_zip.pt"))
    for proto in [2, 4, 5]:
        import pickle
        open(os.path.join(out, "unpickler", f"plain_p{proto}.pkl"), "wb").write(
            pickle.dumps({"a": [1, 2.5, "s", None, True, (1, 2)], "b": {1, 2}, "c": b"xy", "d": 2**70}, protocol=proto))
    header = {"w": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 12]},
              "b": {"dtype": "F32", "shape": [3], "data_offsets": [12, 24]}, "__metadata__": {"format": "pt"}}
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(os.path.join(out, "safetensors", "small.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + bytes(24))


if __name__ == "__main__":
    main()
