#!/usr/bin/python3
"""Per-rank judge (started by the judges' launch.py at world = the save's tp x pp): ckptdoc's export
of a legacy Megatron save (megatron_legacy_train.py's) against torch's load of its rank files, merged the way
megatron-core itself declares each param split: the fresh model's params (megatron_legacy_train.build, the same
tp) carry megatron-core's tensor_model_parallel / partition_dim attributes (tensor_parallel/layers.py
set_tensor_model_parallel_attributes); a param that has them is the rank files' pieces concatenated along
partition_dim in rank order, any other is every rank's copy, which must be equal. With --pp, each pipeline
stage's rank files (mp_rank_TT_PPP) are judged by the tensor-rank-0 process of that stage against its own stage
of the model, and each of its layers is looked up in the export under megatron-core's own global number
(TransformerLayer.layer_number - 1, which get_transformer_layer_offset sets), not the file's; "layers" says
which global numbers each stage held.

Rank 0 prints (and writes to --json) {"tensors": N (the export's), "expected": M, "equal": [...],
"differ": [...], "missing": [...] (expected, not exported), "extra": [...] (exported, not expected),
"replicas_differ": [...]} and exits 1 unless every expected tensor is exported, bit for bit, and nothing else.

usage: launch.py --world TP*PP -- megatron_legacy_export_check.py --ckpt SAVE_DIR --tp TP [--pp PP] --export FILE
       --json OUT
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


def stage_files(save, tp, pp, stage):
    """The rank files of pipeline stage `stage`, in tensor-rank order (Megatron-LM's get_checkpoint_name)."""
    with open(os.path.join(save, "latest_checkpointed_iteration.txt")) as f:
        it = f.read().strip()
    folder = os.path.join(save, "release" if it == "release" else f"iter_{int(it):07d}")
    names = [f"mp_rank_{t:02d}" + (f"_{stage:03d}" if pp > 1 else "") for t in range(tp)]
    return [os.path.join(folder, n, "model_optim_rng.pt") for n in names]


def global_name(name, numbers):
    """`name` with its stage-local layer number replaced by megatron-core's global one."""
    prefix = "decoder.layers."
    if not name.startswith(prefix):
        return name
    local, rest = name[len(prefix):].split(".", 1)
    return f"{prefix}{numbers[int(local)]}.{rest}"


def judge_stage(gpt, a, stage, exported):
    out = dict(equal=[], differ=[], missing=[], replicas_differ=[], expected=[])
    models = [torch.load(f, map_location="cpu", weights_only=False)["model"]
              for f in stage_files(a.ckpt, a.tp, a.pp, stage)]
    numbers = [layer.layer_number - 1 for layer in gpt.decoder.layers]  # megatron-core's global numbering
    out["layers"] = numbers
    for name, param in gpt.named_parameters():
        pieces = [m[name] for m in models]
        if getattr(param, "tensor_model_parallel", False):
            assert getattr(param, "partition_stride", 1) == 1, (name, param.partition_stride)  # plain cuts only
            want = torch.cat(pieces, dim=param.partition_dim)
        else:
            want = pieces[0]
            if not all(torch.equal(p, want) for p in pieces):
                out["replicas_differ"].append(name)
        name = global_name(name, numbers)
        out["expected"].append(name)
        if name not in exported:
            out["missing"].append(name)
        elif exported[name].dtype == want.dtype and torch.equal(exported[name], want):
            out["equal"].append(name)
        else:
            out["differ"].append(name)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--export", required=True)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    mode = trainer.cpu_shims({})
    dist.init_process_group("gloo")
    gpt, _, _ = legacy.build(a.tp, a.pp)
    if mode is not None:
        mode.__exit__(None, None, None)
    from megatron.core import parallel_state
    from safetensors.torch import load_file
    exported = load_file(a.export)
    stage = parallel_state.get_pipeline_model_parallel_rank()
    mine = judge_stage(gpt, a, stage, exported) if parallel_state.get_tensor_model_parallel_rank() == 0 else None
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (stage, mine))
    rc = 0
    if dist.get_rank() == 0:
        stages = dict(g for g in gathered if g[1] is not None)
        out = dict(tensors=len(exported), layers={str(s): stages[s]["layers"] for s in sorted(stages)})
        for k in ("equal", "differ", "missing", "replicas_differ"):
            out[k] = [n for s in sorted(stages) for n in stages[s][k]]
        expected = [n for s in sorted(stages) for n in stages[s]["expected"]]
        out["expected"] = len(set(expected))
        out["duplicates"] = sorted({n for n in expected if expected.count(n) > 1})
        out["extra"] = sorted(set(exported) - set(expected))
        ok = (len(out["equal"]) == len(expected) == out["expected"] and not out["extra"]
              and not out["replicas_differ"])
        rc = 0 if ok else 1
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
        print(json.dumps(out))
    dist.barrier()
    sys.exit(rc)


if __name__ == "__main__":
    main()
