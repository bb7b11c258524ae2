#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): trains a tiny MoE model under ZeRO-3 with DeepSpeed's own
AutoEP (the "expert_parallel" config, 0.19.3+), saves it with engine.save_checkpoint, proves that a fresh engine
of the same job loads it (engine.load_checkpoint), records what DeepSpeed's zero_to_fp32.py makes of it, and
writes the full model as that loaded engine holds it (the reference of ckptdoc's export):

  REF/run.json        losses, world, ep, the load's outcome, zero_to_fp32.py's exit code and last error line,
                      ds_to_universal.py's exit code and whether its tensors equal fp32.pt / moments.pt
  REF/fp32.pt         {name: fp32 master}: every param gathered by the loaded engine itself
                      (safe_get_full_fp32_param over its partition group: the whole data-parallel group for a
                      dense param, the expert-data-parallel group for an expert one), each expert param then
                      all-gathered over the expert-parallel group and its rows put in global expert order by the
                      param's own placement (ds_autoep_uc_meta: each ep rank's local experts)
  REF/moments.pt      {"exp_avg": {name: tensor}, "exp_avg_sq": {...}} the same way
                      (safe_get_full_optimizer_state)

AutoEP replaces every block matching `moe_layer_pattern` (router `gate`, fused 3-D experts `gate_up_proj` /
`down_proj`) by its own layer that keeps num_experts / ep of the experts on each rank, under its own names: the
router `<block>.router.gate.weight`, the experts `<block>.experts.w1` / `w3` (gate_up_proj's halves) and `w2`
(down_proj), each [local experts, ...]. ZeRO-3 then partitions the
expert sub-group over the expert-data-parallel group only (world / ep ranks), the other sub-groups over all
ranks: the optimizer files record it in `ds_zero_partition_groups`, the model files in `ds_autoep_layers`.

The model is ours, not a transformers Mixtral: with transformers 5.x in the judge venv AutoEP's mixtral preset
fails in initialize() (auto_ep_presets/base.py calls `_CAN_RECORD_REGISTRY.get(key, default)`, which that
transformers' registry does not take), so the custom-pattern path is used.

usage: launch.py --world N -- autoep_train.py --out SAVE_DIR --ref REF [--ep 2] [--stage 3] [--dtype bf16]
       [--steps 2] [--seed 1] [--dims HIDDEN,FFN,EXPERTS]   (default 16,24,4)
"""
import argparse
import json
import os
import subprocess
import sys

import shutil
import tempfile

import torch
import torch.nn as nn
import deepspeed
import deepspeed.comm as dist
from deepspeed.checkpoint.constants import (AUTOEP_EXPERT_PLACEMENT, AUTOEP_PARAM_EP_RANK, DS_AUTOEP_UC_META,
                                            AUTOEP_PLACEMENT_EXPERTS, AUTOEP_PLACEMENT_RANK, AUTOEP_PLACEMENT_RANKS)
from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state

import ds_common as C

HIDDEN, FFN, EXPERTS, VOCAB, LAYERS, SEQ = 16, 24, 4, 32, 2, 8


class Experts(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.randn(EXPERTS, 2 * FFN, HIDDEN) * 0.1)
        self.down_proj = nn.Parameter(torch.randn(EXPERTS, HIDDEN, FFN) * 0.1)


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(HIDDEN, EXPERTS, bias=False)
        self.experts = Experts()

    def forward(self, x):  # never runs: AutoEP replaces the block
        raise RuntimeError("AutoEP did not replace this MoE block")


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.Linear(HIDDEN, HIDDEN)
        self.mlp = MoE()

    def forward(self, x):
        x = x + torch.tanh(self.attn(x))
        y = self.mlp(x)
        return x + (y[0] if isinstance(y, tuple) else y)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return nn.functional.cross_entropy(self.head(x).float().flatten(0, 1), ids.flatten())


def build(seed, ep, stage, dtype):
    torch.manual_seed(seed)  # every rank builds the same full model; AutoEP keeps each rank's experts
    model = Net().to(C.torch_dtype(dtype))
    ds = C.make_config(stage, dtype, micro_bs=2)
    # use_grouped_mm off: the per-expert loop runs anywhere; the grouped GEMM wants a GPU build
    ds["expert_parallel"] = {"enabled": True, "autoep_size": ep, "moe_layer_pattern": r"layers\.\d+\.mlp",
                             "top_k": 2, "use_grouped_mm": False}
    # AutoEP splits the client's param groups into expert and dense groups by name
    groups = [dict(g, name=n) for n, g in zip(("decay", "no_decay"), C.param_groups(model))]
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=groups, config=ds)
    return engine


def placed_rows(param):
    """Where the loaded engine's local expert rows go in the full tensor: {ep rank: [global expert ids]} from the
    param's own AutoEP placement, and this rank's ep rank."""
    meta = getattr(param, DS_AUTOEP_UC_META)
    placement = meta[AUTOEP_EXPERT_PLACEMENT]
    return ({e[AUTOEP_PLACEMENT_RANK]: list(e[AUTOEP_PLACEMENT_EXPERTS]) for e in placement[AUTOEP_PLACEMENT_RANKS]},
            meta[AUTOEP_PARAM_EP_RANK])


def full_tensor(param, local):
    """`local` (this rank's whole param, gathered over its ZeRO partition group) made global: an expert param's
    local experts of every ep rank, all-gathered over the expert-parallel group, rows in global expert order."""
    if getattr(param, "ds_zero_placement_family", None) != "autoep_expert":
        return local.detach().cpu().clone()
    from deepspeed.utils import groups
    group = groups._get_expert_parallel_group(param.ds_zero_partition_group_name)
    rows, ep_rank = placed_rows(param)
    parts = [None] * dist.get_world_size(group=group)
    dist.all_gather_object(parts, (ep_rank, local.detach().cpu().clone()), group=group)
    num_experts = sum(len(v) for v in rows.values())
    full = torch.empty((num_experts, ) + tuple(local.shape[1:]), dtype=local.dtype)
    filled = set()
    for rank, t in parts:
        for i, g in enumerate(rows[rank]):
            full[g] = t[i]
            filled.add(g)
    assert filled == set(range(num_experts)), f"experts {sorted(set(range(num_experts)) - filled)} not gathered"
    return full


def dump_reference(engine, ref):
    """Every param's fp32 master and Adam moments as the loaded engine holds them, whole and in global order;
    every rank takes part in the gathers, rank 0 saves."""
    fp32, moments = {}, {"exp_avg": {}, "exp_avg_sq": {}}
    for name, p in engine.module.named_parameters():
        fp32[name] = full_tensor(p, safe_get_full_fp32_param(p))
        for key in moments:
            moments[key][name] = full_tensor(p, safe_get_full_optimizer_state(p, key))
    if dist.get_rank() == 0:
        torch.save(fp32, os.path.join(ref, "fp32.pt"))
        torch.save(moments, os.path.join(ref, "moments.pt"))
    return fp32, moments


def universal_agrees(save_dir, fp32, moments):
    """0.19's ds_to_universal.py (expert-aware) on the same save: its exit code, and whether each of its tensors
    equals what the loaded engine gathered (a second DeepSpeed path to the global expert order)."""
    import deepspeed.checkpoint.ds_to_universal as u
    tmp = tempfile.mkdtemp(prefix="autoep-universal-")  # it writes latest_universal beside its output folder
    out = os.path.join(tmp, "universal")
    tag = open(os.path.join(save_dir, "latest")).read().strip()
    p = subprocess.run([sys.executable, "-P", u.__file__, "--input_folder", os.path.join(save_dir, tag),
                        "--output_folder", out, "--num_extract_workers", "1", "--num_merge_workers", "1"],
                       capture_output=True, text=True)
    if p.returncode:
        shutil.rmtree(tmp, ignore_errors=True)
        return p.returncode, (p.stdout + p.stderr)[-2000:], None
    differ = []
    for state, table in [("fp32", fp32), ("exp_avg", moments["exp_avg"]), ("exp_avg_sq", moments["exp_avg_sq"])]:
        for name, want in table.items():
            got = torch.load(os.path.join(out, "zero", name, f"{state}.pt"), map_location="cpu", weights_only=False)
            got = got["param"] if isinstance(got, dict) else got  # an expert's is a dict with its cat dim
            # its ZeRO-3 dense tensors are flat (bare tensors at tp 1); the experts have their logical shape
            if got.numel() != want.numel() or not torch.equal(got.flatten(), want.flatten()):
                differ.append(f"{name}/{state}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0, "", differ


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--ep", type=int, default=2)
    ap.add_argument("--stage", type=int, default=3)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dims", default="16,24,4", help="HIDDEN,FFN,EXPERTS")
    a = ap.parse_args()
    global HIDDEN, FFN, EXPERTS
    HIDDEN, FFN, EXPERTS = (int(x) for x in a.dims.split(","))
    deepspeed.init_distributed(dist_backend="gloo")
    engine = build(a.seed, a.ep, a.stage, a.dtype)
    losses = []
    for step in range(a.steps):
        g = torch.Generator().manual_seed(a.seed * 1000 + step * 10 + dist.get_rank())
        ids = torch.randint(0, VOCAB, (2, SEQ), generator=g)
        loss = engine(ids)
        engine.backward(loss)
        engine.step()
        losses.append(float(loss.detach()))
    engine.save_checkpoint(a.out)
    dist.barrier()
    # DeepSpeed's own reader: a fresh engine of the same job loads what was saved, optimizer states included
    fresh = build(a.seed + 1, a.ep, a.stage, a.dtype)
    path, _ = fresh.load_checkpoint(a.out)
    loaded = path is not None and fresh.global_steps == a.steps
    os.makedirs(a.ref, exist_ok=True)
    dist.barrier()
    fp32, moments = dump_reference(fresh, a.ref)
    dist.barrier()
    if dist.get_rank() == 0:
        import deepspeed.utils.zero_to_fp32 as z
        p = subprocess.run([sys.executable, "-P", z.__file__, a.out, os.path.join(a.ref, "zero_to_fp32")],
                           capture_output=True, text=True)
        lines = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
        urc, uerr, udiffer = universal_agrees(a.out, fp32, moments)
        with open(os.path.join(a.ref, "run.json"), "w") as f:
            json.dump({"kind": "autoep", "world": dist.get_world_size(), "ep": a.ep, "losses": losses,
                       "steps": a.steps, "loaded": loaded, "optimizer": type(engine.optimizer).__name__,
                       "zero_to_fp32_rc": p.returncode, "zero_to_fp32_error": lines[-1] if lines else "",
                       "universal_rc": urc, "universal_error": uerr, "universal_differ": udiffer,
                       "full_shapes": {k: list(v.shape) for k, v in fp32.items()},
                       "versions": C.versions()}, f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
