#!/usr/bin/python3
"""Per-rank judge (started by the judges' launch.py at world = the save's tensor-parallel size): ckptdoc's export
of a legacy Megatron save (megatron_legacy_train.py's) against torch's load of its rank files, merged the way
megatron-core itself declares each param split: the fresh model's params (megatron_legacy_train.build, the same
tp) carry megatron-core's tensor_model_parallel / partition_dim attributes (tensor_parallel/layers.py
set_tensor_model_parallel_attributes); a param that has them is the rank files' pieces concatenated along
partition_dim in rank order, any other is every rank's copy, which must be equal.

Rank 0 prints (and writes to --json) {"tensors": N (the export's), "expected": M, "equal": [...],
"differ": [...], "missing": [...] (expected, not exported), "extra": [...] (exported, not expected),
"replicas_differ": [...]} and exits 1 unless every expected tensor is exported, bit for bit, and nothing else.

usage: launch.py --world TP -- megatron_legacy_export_check.py --ckpt SAVE_DIR --tp TP --export FILE --json OUT
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_legacy_train as legacy  # noqa: E402
import megatron_optim_train as trainer  # noqa: E402


def rank_files(save):
    with open(os.path.join(save, "latest_checkpointed_iteration.txt")) as f:
        it = f.read().strip()
    folder = os.path.join(save, "release" if it == "release" else f"iter_{int(it):07d}")
    return [os.path.join(folder, d, "model_optim_rng.pt") for d in sorted(os.listdir(folder))
            if d.startswith("mp_rank_")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--export", required=True)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    mode = trainer.cpu_shims({})
    dist.init_process_group("gloo")
    gpt, _, _ = legacy.build(a.tp)
    if mode is not None:
        mode.__exit__(None, None, None)
    rc = 0
    if dist.get_rank() == 0:
        from safetensors.torch import load_file
        files = rank_files(a.ckpt)
        assert len(files) == a.tp, files
        models = [torch.load(f, map_location="cpu", weights_only=False)["model"] for f in files]
        exported = load_file(a.export)
        out = dict(tensors=len(exported), expected=0, equal=[], differ=[], missing=[], replicas_differ=[])
        expected = set()
        for name, param in gpt.named_parameters():
            pieces = [m[name] for m in models]
            if getattr(param, "tensor_model_parallel", False):
                assert getattr(param, "partition_stride", 1) == 1, (name, param.partition_stride)  # plain cuts only
                want = torch.cat(pieces, dim=param.partition_dim)
            else:
                want = pieces[0]
                if not all(torch.equal(p, want) for p in pieces):
                    out["replicas_differ"].append(name)
            expected.add(name)
            if name not in exported:
                out["missing"].append(name)
            elif exported[name].dtype == want.dtype and torch.equal(exported[name], want):
                out["equal"].append(name)
            else:
                out["differ"].append(name)
        out["expected"] = len(expected)
        out["extra"] = sorted(set(exported) - expected)
        ok = len(out["equal"]) == len(expected) and not out["extra"] and not out["replicas_differ"]
        rc = 0 if ok else 1
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
        print(json.dumps(out))
    dist.barrier()
    sys.exit(rc)


if __name__ == "__main__":
    main()
