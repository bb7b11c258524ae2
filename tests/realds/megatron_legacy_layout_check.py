#!/usr/bin/python3
"""Per-rank judge (started by the judges' launch.py at the save's world) of ckptdoc's storage map of a legacy Megatron
save (the views' layout map): its global keys, their shapes and dtypes, and each rank file's chunk box of them, against
torch's load of the rank files placed the way megatron-core itself declares: the fresh model's params (megatron_legacy
_train.build, the same tp / pp / optimizer) carry tensor_model_parallel / partition_dim (a split param's pieces sit side
by side along partition_dim in tensor-rank order; any other is a full copy on every rank), and its layers'
layer_number - 1 is the global layer number (get_transformer_layer_offset). The fp32 mains and Adam moments are placed
by megatron-core's own optimizer: Float16OptimizerWithFloat16Params' fp32_from_float16_groups[g][i] is the main of
float16_groups[g][i] (model_optim_rng.pt's optimizer.fp32_from_fp16_params[g][i]) and torch's state numbering of its
param_groups gives the moments; with the distributed optimizer, the grad buffer's param_index_map and buckets
(numel_unpadded) give each param's run of distrib_optim.pt's coalesced "param", "exp_avg", "exp_avg_sq". Every chunk's
byte range in its file must be the bytes of torch's load of that piece.

Keys are megatron-core's torch_dist names: <param>, optimizer.state.fp32_param.<param>,
optimizer.state.exp_avg.<param>, optimizer.state.exp_avg_sq.<param>; a key with "/" is a rank file's own (not placed).

Rank 0 prints (and writes to --json) {"expected": N, "equal": [...], "differ": [...], "missing": [...], "extra": [...],
"bytes_differ": [...], "own_rank": [...]} and exits 1 unless every expected key is in the map with the same shape,
dtype and chunks, nothing else is placed, and every byte range holds its piece.

usage: launch.py --world W -- megatron_legacy_layout_check.py --ckpt SAVE_DIR --tp TP [--pp PP]
       [--optimizer local|distributed] --map MAP.json --json OUT
       (MAP: {"keys": [{"key", "dtype", "shape", "chunks": [{"file", "offsets", "sizes", "offset", "length"}]}]})
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
from megatron_legacy_export_check import global_name, stage_files  # noqa: E402


def raw_bytes(t):
    return t.detach().contiguous().view(torch.uint8).numpy().tobytes()


def dtype_text(t):
    return str(t.dtype).replace("torch.", "")


def coalesced_starts(ddp, names):
    """Each param's first element in get_parameter_state_dp_zero's coalesced buffer 0: its place in its bucket
    (param_index_map less the bucket's offset) after the unpadded elements of the buckets before it."""
    (buf,) = ddp.buffers
    before, at = [], 0
    for b in buf.buckets:
        before.append(at)
        at += b.numel_unpadded
    return {names[p]: start - buf.buckets[bucket].offset + before[bucket]
            for p, (start, _end, bucket) in buf.param_index_map.items()}


def judge_stage(gpt, ddp, opt, a, stage):
    files = stage_files(a.ckpt, a.tp, a.pp, stage)  # in tensor-rank order
    folder = os.path.dirname(os.path.dirname(files[0]))
    rank_names = [os.path.basename(os.path.dirname(f)) for f in files]
    saves = [torch.load(f, map_location="cpu", weights_only=False) for f in files]
    numbers = [layer.layer_number - 1 for layer in gpt.decoder.layers]
    names = {p: n for n, p in gpt.named_parameters()}
    boxes, shapes, expected = {}, {}, {}  # boxes: local name -> [(offsets, sizes)] per tensor rank; global shape

    def add(key, pieces, where, local):
        """`key`: each tensor rank's piece in its file, in the box of param `local`'s piece."""
        expected[key] = dict(shape=shapes[local], dtype=dtype_text(pieces[0]),
                             chunks=sorted([dict(file=f, offsets=o, sizes=s, bytes=raw_bytes(t))
                                            for f, t, (o, s) in zip(where, pieces, boxes[local])],
                                           key=lambda c: c["offsets"]))

    model_files = [f"{n}/model_optim_rng.pt" for n in rank_names]
    for local, param in gpt.named_parameters():
        pieces = [s["model"][local] for s in saves]
        if getattr(param, "tensor_model_parallel", False):
            assert getattr(param, "partition_stride", 1) == 1, (local, param.partition_stride)
            axis, at, out = param.partition_dim, 0, []
            for p in pieces:
                offsets = [0] * p.dim()
                offsets[axis] = at
                at += p.shape[axis]
                out.append((offsets, list(p.shape)))
            shape = list(torch.cat(pieces, dim=axis).shape)
        else:
            out, shape = [([0] * p.dim(), list(p.shape)) for p in pieces], list(pieces[0].shape)
        boxes[local], shapes[local] = out, shape
        add(global_name(local, numbers), pieces, model_files, local)
    inner = getattr(opt, "chained_optimizers", [opt])
    assert len(inner) == 1
    inner = inner[0]
    if a.optimizer == "local":
        flat = [p for g in inner.optimizer.param_groups for p in g["params"]]
        for g, (params, mains) in enumerate(zip(inner.float16_groups, inner.fp32_from_float16_groups)):
            for i, (param, main) in enumerate(zip(params, mains)):
                local = names[param]
                k = next(j for j, p in enumerate(flat) if p is main)  # torch's state numbering
                glob = global_name(local, numbers)
                add("optimizer.state.fp32_param." + glob,
                    [s["optimizer"]["fp32_from_fp16_params"][g][i] for s in saves], model_files, local)
                for field in ("exp_avg", "exp_avg_sq"):
                    add(f"optimizer.state.{field}.{glob}",
                        [s["optimizer"]["optimizer"]["state"][k][field] for s in saves], model_files, local)
    else:
        starts = coalesced_starts(ddp, names)
        opts = [torch.load(os.path.join(folder, n, "distrib_optim.pt"), map_location="cpu", weights_only=False)
                for n in rank_names]
        optim_files = [f"{n}/distrib_optim.pt" for n in rank_names]
        for local, param in gpt.named_parameters():
            glob = global_name(local, numbers)
            for field, prefix in (("param", "fp32_param"), ("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq")):
                pieces = []
                for o, (_offsets, sizes) in zip(opts, boxes[local]):
                    (state,) = o[0].values()
                    n = int(torch.Size(sizes).numel())
                    pieces.append(state[field][starts[local]:starts[local] + n].view(sizes))
                add(f"optimizer.state.{prefix}.{glob}", pieces, optim_files, local)
    return expected


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--optimizer", choices=("local", "distributed"), default="local")
    ap.add_argument("--map", required=True)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    mode = trainer.cpu_shims({})
    dist.init_process_group("gloo")
    gpt, ddp, opt = legacy.build(a.tp, a.pp, a.optimizer == "distributed")
    if mode is not None:
        mode.__exit__(None, None, None)
    from megatron.core import parallel_state
    lead = parallel_state.get_tensor_model_parallel_rank() == 0 and parallel_state.get_data_parallel_rank() == 0
    stage = parallel_state.get_pipeline_model_parallel_rank()
    mine = judge_stage(gpt, ddp, opt, a, stage) if lead else None
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    rc = 0
    if dist.get_rank() == 0:
        expected = {}
        for g in gathered:
            if g:
                expected.update(g)
        spec = json.load(open(a.map))
        save = os.path.dirname(os.path.dirname(stage_files(a.ckpt, a.tp, a.pp, 0)[0]))
        raw = {}

        def file_bytes(name):
            if name not in raw:
                raw[name] = open(os.path.join(save, name), "rb").read()
            return raw[name]

        out = dict(expected=len(expected), equal=[], differ=[], missing=[], extra=[], bytes_differ=[], own_rank=[])
        got = {}
        for k in spec["keys"]:
            (out["own_rank"] if "/" in k["key"] else []).append(k["key"])
            if "/" not in k["key"]:
                got[k["key"]] = k
        for key, want in expected.items():
            k = got.get(key)
            if k is None:
                out["missing"].append(key)
                continue
            chunks = sorted(k["chunks"], key=lambda c: c["offsets"])
            same = (k["shape"] == want["shape"] and k["dtype"] == want["dtype"]
                    and [(c["file"], c["offsets"], c["sizes"]) for c in chunks]
                    == [(c["file"], c["offsets"], c["sizes"]) for c in want["chunks"]])
            (out["equal"] if same else out["differ"]).append(key)
            for c, w in zip(chunks, want["chunks"]):
                if file_bytes(c["file"])[c["offset"]:c["offset"] + c["length"]] != w["bytes"]:
                    out["bytes_differ"].append(f"{key} in {c['file']}")
        out["extra"] = sorted(set(got) - set(expected))
        ok = (len(out["equal"]) == len(expected) > 0 and not out["extra"] and not out["bytes_differ"])
        rc = 0 if ok else 1
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
        print(json.dumps({k: (v if k in ("expected",) else len(v)) for k, v in out.items()}))
    dist.barrier()
    sys.exit(rc)


if __name__ == "__main__":
    main()
