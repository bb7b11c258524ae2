#!/usr/bin/python3
"""Compare a sharded export folder with the one DeepSpeed's zero_to_fp32.py wrote (run with the judges' python).

Usage: compare_shard_folders.py ACTUAL EXPECTED

Both folders must hold the same files: the same shard names (and so count) and the same index file. The two
indexes must parse to the same JSON (weight_map and metadata.total_size) and be the same bytes. Each shard must
hold the same tensors with the same dtypes, shapes and bits (read with torch.load(weights_only=True) or the
safetensors package); torch shards in the same order. Safetensors shards must be the same bytes as well (header
order, {"format": "pt"}, padding). Torch shards cannot be: torch.save writes a random .data/serialization_id
into every zip, and zero_to_fp32.py's ZeRO-2 shards each store the whole flat fp32 group their views sit on.
Exit 0 when equal (one line saying what was compared), 1 naming the first difference.
"""
import json
import os
import struct
import sys

import torch
from safetensors.torch import load_file


def fail(msg):
    print(msg)
    sys.exit(1)


def bits(t):
    t = t.contiguous().reshape(-1)
    return t.view(torch.uint8) if t.numel() else t


def header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return f.read(n)


def main():
    actual, expected = sys.argv[1], sys.argv[2]
    fa, fe = sorted(os.listdir(actual)), sorted(os.listdir(expected))
    if fa != fe:
        fail(f"files differ:\n  actual   {fa}\n  expected {fe}")
    index = [f for f in fe if f.endswith(".index.json")]
    shards = [f for f in fe if f.endswith(".safetensors") or f.endswith(".bin")]
    if len(index) != 1 or len(shards) + 1 != len(fe):
        fail(f"expected shards and one index, found {fe}")
    ia, ie = (open(os.path.join(d, index[0]), "rb").read() for d in (actual, expected))
    ja, je = json.loads(ia), json.loads(ie)
    if ja != je:
        fail(f"{index[0]} differs:\n  actual   {ja}\n  expected {je}")
    if ia != ie:
        fail(f"{index[0]}: the same JSON in other bytes:\n  actual   {ia!r}\n  expected {ie!r}")
    if sorted(set(je["weight_map"].values())) != shards:
        fail(f"the index names {sorted(set(je['weight_map'].values()))}, the folder holds {shards}")
    tensors = 0
    for shard in shards:
        pa, pe = os.path.join(actual, shard), os.path.join(expected, shard)
        if shard.endswith(".safetensors"):
            sa, se = load_file(pa), load_file(pe)
        else:
            sa, se = (torch.load(p, map_location="cpu", weights_only=True) for p in (pa, pe))
        ka, ke = list(sa), list(se)
        if (ka if shard.endswith(".bin") else sorted(ka)) != (ke if shard.endswith(".bin") else sorted(ke)):
            fail(f"{shard}: tensors differ:\n  actual   {ka}\n  expected {ke}")
        for k in ke:
            a, e = sa[k], se[k]
            if a.dtype != e.dtype or tuple(a.shape) != tuple(e.shape):
                fail(f"{shard}: {k}: actual {a.dtype} {tuple(a.shape)}, expected {e.dtype} {tuple(e.shape)}")
            if not torch.equal(bits(a), bits(e)):
                fail(f"{shard}: {k}: values differ")
        tensors += len(ke)
        if shard.endswith(".safetensors") and open(pa, "rb").read() != open(pe, "rb").read():
            fail(f"{shard}: equal tensors in other bytes; headers:\n  actual   {header(pa)!r}\n"
                 f"  expected {header(pe)!r}")
    how = "byte-identical" if shards[0].endswith(".safetensors") else "equal tensors, in order"
    print(f"equal: {len(shards)} shards ({how}), {tensors} tensors, {index[0]} byte-identical")


if __name__ == "__main__":
    main()
