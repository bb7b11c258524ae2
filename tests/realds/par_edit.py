#!/usr/bin/python3
"""Test-side edits and comparisons of the tensor/pipeline/expert-parallel fixtures, with torch (run through
`realds.py py`, so DeepSpeed's classes unpickle). Our code; it damages copies the way real failures damage files.

  par_edit.py perturb FILE KEY DELTA [--module]   add DELTA to tensor KEY (of root['module'] with --module)
  par_edit.py drop-key FILE... --key KEY          delete a top-level key of each file
  par_edit.py perturb-master FILE... --param NAME DELTA
                                                  add DELTA to NAME's fp32 master fragment in each ZeRO-1/2
                                                  optimizer file holding one (param_slice_mappings)
  par_edit.py set FILE KEY JSON                   set a top-level key to a JSON value
  par_edit.py set-uci FILE... --key KEY JSON      set universal_checkpoint_info[KEY] of each file to a JSON value
  par_edit.py equal GOT REF                       every tensor of REF in GOT, bit for bit as float32, nothing more
  par_edit.py slice-of GOT REF TP RANK            GOT holds tensor rank RANK's slices of REF's merged tensors
  par_edit.py mean-of GOT REF NAME TP             GOT[NAME] == sum(REF[NAME].chunk(TP)) / TP in float32
Exit 0 when the check holds, 1 (with the differences on stdout) when not.
"""
import json
import sys

import torch


def load(path):
    return torch.load(path, map_location="cpu")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "perturb":
        path, key, delta = args[0], args[1], float(args[2])
        root = load(path)
        d = root["module"] if "--module" in args else root
        d[key].add_(delta)
        torch.save(root, path)
        return 0
    if cmd == "drop-key":
        key = args[args.index("--key") + 1]
        for path in args[:args.index("--key")]:
            root = load(path)
            root.pop(key, None)
            torch.save(root, path)
        return 0
    if cmd == "perturb-master":
        i = args.index("--param")
        name, delta, hits = args[i + 1], float(args[i + 2]), 0
        for path in args[:i]:
            root = load(path)
            osd = root["optimizer_state_dict"]
            for g, mapping in enumerate(osd["param_slice_mappings"]):
                if name in mapping:
                    frag = mapping[name]
                    with torch.no_grad():  # the saved partition is a leaf that requires grad
                        osd["single_partition_of_fp32_groups"][g].narrow(0, frag.start, frag.numel).add_(delta)
                    hits += 1
            torch.save(root, path)
        if not hits:
            print(f"{name} is in no param_slice_mappings of {args[:i]}")
        return 0 if hits else 1
    if cmd == "set":
        path, key, value = args
        root = load(path)
        root[key] = json.loads(value)
        torch.save(root, path)
        return 0
    if cmd == "set-uci":
        i = args.index("--key")
        key, value = args[i + 1], json.loads(args[i + 2])
        for path in args[:i]:
            root = load(path)
            root["universal_checkpoint_info"][key] = value
            torch.save(root, path)
        return 0
    if cmd == "equal":
        got, ref = torch.load(args[0], weights_only=True), load(args[1])
        bad = {n: "missing" for n in ref if n not in got}
        bad.update({n: "extra" for n in got if n not in ref})
        for n in set(got) & set(ref):
            g, r = got[n].float(), ref[n].float()
            if g.shape != r.shape:
                bad[n] = f"shape {list(g.shape)} vs {list(r.shape)}"
            elif not torch.equal(g, r):
                bad[n] = f"max |diff| {float((g - r).abs().max())}"
        print(json.dumps(bad, indent=1) if bad else f"{len(ref)} tensors equal")
        return 1 if bad else 0
    if cmd == "slice-of":
        got, ref, tp, rank = torch.load(args[0], weights_only=True), load(args[1]), int(args[2]), int(args[3])
        bad = {n: "missing" for n in ref if n not in got}
        for n, g in got.items():
            if n not in ref:
                bad[n] = "extra"
                continue
            r = ref[n].float()
            g = g.float()
            dims = [d for d in range(g.dim()) if g.shape[d] != r.shape[d]]
            if not dims:
                ok = torch.equal(g, r)  # replicated
            elif len(dims) == 1:
                d = dims[0]
                lo = rank * g.shape[d]
                hi = min(lo + g.shape[d], r.shape[d])  # vocabulary params: the merged one lost the padding rows
                ok = hi > lo and torch.equal(g.narrow(d, 0, hi - lo), r.narrow(d, lo, hi - lo))
            else:
                ok = False
            if not ok:
                bad[n] = f"not slice {rank} of {list(r.shape)} (got {list(g.shape)})"
        print(json.dumps(bad, indent=1) if bad else f"{len(got)} tensors are tensor rank {rank}'s slices")
        return 1 if bad else 0
    if cmd == "mean-of":
        got, ref, name, tp = torch.load(args[0], weights_only=True), load(args[1]), args[2], int(args[3])
        want = sum(ref[name].float().chunk(tp)) / tp
        ok = torch.equal(got[name].float(), want)
        print("mean holds" if ok else f"{name}: max |diff| {float((got[name].float() - want).abs().max())}")
        return 0 if ok else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
