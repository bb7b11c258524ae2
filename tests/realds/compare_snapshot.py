#!/usr/bin/python3
"""Checks that a ckptdoc snapshot holds exactly the files engine.save_checkpoint wrote at the same step: the
same file names, each file's pickle byte-identical to the zip's data.pkl and each storage dataset
byte-identical to its data/<key> record. Reads with h5py and zipfile only (independent of ckptdoc).

usage: compare_snapshot.py SNAPSHOT_DIR CHECKPOINT_TAG_DIR     (exit 0 = identical; differences on stderr)
"""
import json
import os
import sys
import zipfile

import h5py


def main():
    snap, tag_dir = sys.argv[1], sys.argv[2]
    m = json.load(open(os.path.join(snap, "manifest.json")))
    ckpt_files = sorted(f for f in os.listdir(tag_dir) if f.endswith(".pt"))
    bad = []
    if sorted(m["files"]) != ckpt_files:
        bad.append(f"files differ: snapshot {sorted(m['files'])} vs checkpoint {ckpt_files}")
    for name in sorted(set(m["files"]) & set(ckpt_files)):
        z = zipfile.ZipFile(os.path.join(tag_dir, name))
        pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        prefix = pkl[: -len("data.pkl")]
        records = sorted(n[len(prefix) + 5:] for n in z.namelist() if n.startswith(prefix + "data/"))
        with h5py.File(os.path.join(snap, m["files"][name]), "r") as f:
            g = f["files"][name]
            if bytes(g["pickle"][()]) != z.read(pkl):
                bad.append(f"{name}: pickle differs from data.pkl")
            keys = sorted(g["storages"].keys())
            if keys != records:
                bad.append(f"{name}: storages {keys} vs records {records}")
            for k in set(keys) & set(records):
                ds = g["storages"][k]
                if ds.chunks is not None or ds.compression is not None:
                    bad.append(f"{name}: storage {k} is not a contiguous, unfiltered dataset")
                if ds[()].tobytes() != z.read(prefix + "data/" + k):
                    bad.append(f"{name}: storage {k} differs from its record")
    for b in bad:
        print(b, file=sys.stderr)
    print(json.dumps({"files": sorted(m["files"]), "identical": not bad}))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
