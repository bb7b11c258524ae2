#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): trains a tiny MoE model under ZeRO-3 with DeepSpeed's own
AutoEP (the "expert_parallel" config, 0.19.3+), saves it with engine.save_checkpoint, proves that a fresh engine
of the same job loads it (engine.load_checkpoint), and records what DeepSpeed's zero_to_fp32.py makes of it:

  REF/run.json     losses, world, ep, the load's outcome, zero_to_fp32.py's exit code and last error line

AutoEP replaces every block matching `moe_layer_pattern` (router `gate`, fused 3-D experts `gate_up_proj` /
`down_proj`) by its own layer that keeps num_experts / ep of the experts on each rank. ZeRO-3 then partitions the
expert sub-group over the expert-data-parallel group only (world / ep ranks), the other sub-groups over all
ranks: the optimizer files record it in `ds_zero_partition_groups`, the model files in `ds_autoep_layers`.

The model is ours, not a transformers Mixtral: with transformers 5.x in the judge venv AutoEP's mixtral preset
fails in initialize() (auto_ep_presets/base.py calls `_CAN_RECORD_REGISTRY.get(key, default)`, which that
transformers' registry does not take), so the custom-pattern path is used.

usage: launch.py --world N -- autoep_train.py --out SAVE_DIR --ref REF [--ep 2] [--stage 3] [--dtype bf16]
       [--steps 2] [--seed 1]
"""
import argparse
import json
import os
import subprocess
import sys

import torch
import torch.nn as nn
import deepspeed
import deepspeed.comm as dist

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--ep", type=int, default=2)
    ap.add_argument("--stage", type=int, default=3)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
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
    dist.barrier()
    if dist.get_rank() == 0:
        os.makedirs(a.ref, exist_ok=True)
        import deepspeed.utils.zero_to_fp32 as z
        p = subprocess.run([sys.executable, "-P", z.__file__, a.out, os.path.join(a.ref, "zero_to_fp32")],
                           capture_output=True, text=True)
        lines = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
        with open(os.path.join(a.ref, "run.json"), "w") as f:
            json.dump({"kind": "autoep", "world": dist.get_world_size(), "ep": a.ep, "losses": losses,
                       "steps": a.steps, "loaded": loaded, "optimizer": type(engine.optimizer).__name__,
                       "zero_to_fp32_rc": p.returncode, "zero_to_fp32_error": lines[-1] if lines else "",
                       "versions": C.versions()}, f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
