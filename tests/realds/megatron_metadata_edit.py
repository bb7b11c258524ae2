#!/usr/bin/python3
"""Damages a COPY of a Megatron-core iteration folder for test_realds_megatron by rewriting its `.metadata` alone
(torch's own classes, pickled back; no .distcp byte changes, so every item's CRC stays intact):

--swap-layers A B: the model weights of decoder layers A and B swapped, the optimizer's fp32 mains left where they
  were: for every layer-stacked key (decoder.layers.*, axis 0 = layer) the storage items of layer A's and layer B's
  chunks trade places, so each layer's chunk reads the other layer's bytes (same shape and dtype). A reader that
  maps the bucket-space mains by order cannot tell this from a wrong guess of the layers' order: each mismatching
  main rounds exactly to another same-sized param's weight (docs/megatron-bucket-layout.md, check 4).
--drop KEY: KEY and its storage items removed from the metadata, as if the model had no such param while the
  optimizer's buckets still hold its main (the bucket map's walk can no longer close its buckets).
--move-key KEY OTHER: KEY moved right after OTHER in state_dict_metadata's stored order (the order the bucket map
  reads the params in), as a writer that plans its keys in another order would store them; nothing else changes.
--split-gbuf N: every dp group's bucket tensors of gbuf_idx_0 from bucket_idx_N on renamed to gbuf_idx_1 (bucket
  N -> 0, ...), keys and storage index alike: a second grad buffer, as a virtual pipeline chunk or another param
  dtype makes one (per_bucket_numel[_unpadded] left as they were).
--swap-items KEY1 KEY2: the storage items of two bytes keys (ShardedObjects) trade places, so each key reads the
  other's object.
--set-bucket-size KEY B N: the per_bucket_numel[_unpadded] object KEY (megatron-core's own, read with torch.load)
  with bucket B's size set to N, torch.save'd into a new storage file __edit_0.distcp that KEY's item then names
  (the one edit that writes bytes: a new file, every existing file untouched).
--drop-last-layer: the last decoder layer's chunks of every layer-stacked key (decoder.layers.*, axis 0 = layer)
  removed and the keys one layer shorter, as if the model had one layer fewer (its stage's buckets still hold that
  layer's mains): with 2 layers over 2 pipeline stages, 1 layer that does not split evenly over them.
--prefix-keys PREFIX: every optimizer.* key (and its storage index) renamed PREFIX + key, as a ChainedOptimizer of
  several optimizers names its first optimizer's keys under dp_reshardable (PREFIX "chained_0.").

Prints how many storage items were swapped or dropped.

usage: megatron_metadata_edit.py ITER_DIR (--swap-layers A B | --drop KEY | --move-key KEY OTHER | --split-gbuf N |
       --swap-items KEY1 KEY2 | --set-bucket-size KEY B N | --drop-last-layer | --prefix-keys PREFIX)
       (the judges' venv python: torch)
"""
import argparse
import dataclasses
import os
import pickle
import re


def swap_layers(md, la, lb):
    swapped = 0
    by_index = {(i.fqn, tuple(i.offset)): i for i in md.storage_data if i.offset is not None}
    for index in list(by_index.values()):
        if not index.fqn.startswith("decoder.layers.") or index.offset[0] != la:
            continue
        other = by_index.get((index.fqn, (lb,) + tuple(index.offset[1:])))
        if other is None:
            continue
        md.storage_data[index], md.storage_data[other] = md.storage_data[other], md.storage_data[index]
        swapped += 1
    return swapped


def drop(md, key):
    del md.state_dict_metadata[key]
    gone = [i for i in md.storage_data if i.fqn == key]
    for i in gone:
        del md.storage_data[i]
    return len(gone)


def move_key(md, key, other):
    items = [(k, v) for k, v in md.state_dict_metadata.items() if k != key]
    at = [k for k, _ in items].index(other) + 1
    items.insert(at, (key, md.state_dict_metadata[key]))
    md.state_dict_metadata = dict(items)
    return 1


def split_gbuf(md, first):
    pattern = re.compile(r"^(optimizer\.distributed\.dp_group_idx_\d+\.)gbuf_idx_0(\.dtype_\(.*\)\.bucket_idx_)(\d+)(\..*)$")

    def renamed(key):
        m = pattern.match(key)
        if not m or int(m.group(3)) < first:
            return key
        return f"{m.group(1)}gbuf_idx_1{m.group(2)}{int(m.group(3)) - first}{m.group(4)}"
    md.state_dict_metadata = {renamed(k): v for k, v in md.state_dict_metadata.items()}
    moved = 0
    for index in list(md.storage_data):
        new = renamed(index.fqn)
        if new != index.fqn:
            md.storage_data[dataclasses.replace(index, fqn=new)] = md.storage_data.pop(index)
            moved += 1
    return moved


def swap_items(md, a, b):
    ia = next(i for i in md.storage_data if i.fqn == a)
    ib = next(i for i in md.storage_data if i.fqn == b)
    md.storage_data[ia], md.storage_data[ib] = md.storage_data[ib], md.storage_data[ia]
    return 2


def set_bucket_size(md, iter_dir, key, bucket, n):
    import io
    import torch
    index = next(i for i in md.storage_data if i.fqn == key)
    info = md.storage_data[index]
    with open(os.path.join(iter_dir, info.relative_path), "rb") as f:
        f.seek(info.offset)
        obj = torch.load(io.BytesIO(f.read(info.length)), weights_only=False)
    sizes = obj[0][0] if isinstance(obj, list) and isinstance(obj[0], list) else obj[0]
    for pair in sizes:
        sizes[pair][bucket] = n
    buf = io.BytesIO()
    torch.save(obj, buf)
    name = "__edit_0.distcp"
    with open(os.path.join(iter_dir, name), "wb") as f:
        f.write(buf.getvalue())
    md.storage_data[index] = dataclasses.replace(info, relative_path=name, offset=0, length=len(buf.getvalue()))
    return 1


def drop_last_layer(md):
    import torch
    dropped = 0
    for key, meta in md.state_dict_metadata.items():
        if not key.startswith("decoder.layers.") or not hasattr(meta, "chunks"):
            continue
        last = meta.size[0] - 1
        meta.chunks = [c for c in meta.chunks if c.offsets[0] != last]
        meta.size = torch.Size([last] + list(meta.size[1:]))
        for index in [i for i in md.storage_data if i.fqn == key and i.offset is not None and i.offset[0] == last]:
            del md.storage_data[index]
            dropped += 1
    return dropped


def prefix_keys(md, prefix):
    def renamed(key):
        return prefix + key if key.startswith("optimizer.") else key
    md.state_dict_metadata = {renamed(k): v for k, v in md.state_dict_metadata.items()}
    moved = 0
    for index in list(md.storage_data):
        new = renamed(index.fqn)
        if new != index.fqn:
            md.storage_data[dataclasses.replace(index, fqn=new)] = md.storage_data.pop(index)
            moved += 1
    return moved


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("iter_dir")
    ap.add_argument("--swap-layers", type=int, nargs=2)
    ap.add_argument("--drop")
    ap.add_argument("--move-key", nargs=2)
    ap.add_argument("--split-gbuf", type=int)
    ap.add_argument("--swap-items", nargs=2)
    ap.add_argument("--set-bucket-size", nargs=3)
    ap.add_argument("--prefix-keys")
    ap.add_argument("--drop-last-layer", action="store_true")
    a = ap.parse_args()
    import torch.distributed.checkpoint as dcp  # noqa: F401 - the classes .metadata pickles
    path = os.path.join(a.iter_dir, ".metadata")
    with open(path, "rb") as f:
        md = pickle.load(f)
    if a.swap_layers:
        n = swap_layers(md, *a.swap_layers)
    elif a.move_key:
        n = move_key(md, *a.move_key)
    elif a.split_gbuf is not None:
        n = split_gbuf(md, a.split_gbuf)
    elif a.swap_items:
        n = swap_items(md, *a.swap_items)
    elif a.set_bucket_size:
        key, bucket, size = a.set_bucket_size
        n = set_bucket_size(md, a.iter_dir, key, int(bucket), int(size))
    elif a.prefix_keys:
        n = prefix_keys(md, a.prefix_keys)
    elif a.drop_last_layer:
        n = drop_last_layer(md)
    else:
        n = drop(md, a.drop)
    with open(path + ".tmp", "wb") as f:
        pickle.dump(md, f)
    os.replace(path + ".tmp", path)
    print(n)


if __name__ == "__main__":
    main()
