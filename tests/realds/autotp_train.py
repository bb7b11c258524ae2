#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): trains a tiny HuggingFace Llama with DeepSpeed's own
AutoTP (the "tensor_parallel": {"autotp_size": TP} config, 0.18.9+) under ZeRO, saves it with
engine.save_checkpoint, and writes what DeepSpeed itself makes of the whole model:

  REF/lp.pt        {name: 16-bit weight as float32}   the engine's consolidated 16-bit state dict (AutoTP's own
                                                       GatherReplacedLayerParams), taken right before the save
  REF/fp32.pt      {name: fp32 master}                 DeepSpeed's ds_to_universal.py on the saved checkpoint
  REF/moments.pt   {"exp_avg": {...}, "exp_avg_sq": {...}}   the same conversion's Adam moments
  REF/run.json     losses, optimizer, versions

AutoTP partitions the Linear layers on every rank (column-parallel q/k/v/gate/up, row-parallel o/down, the
vocabulary-parallel lm_head) and records the merge rules in the model files' universal_checkpoint_info.

usage: launch.py --world N -- autotp_train.py --out SAVE_DIR --ref REF [--tp 2] [--stage 1] [--dtype bf16]
       [--steps 3] [--seed 1]
"""
import argparse
import json
import os
import subprocess
import sys

import torch
import deepspeed
import deepspeed.comm as dist

import ds_common as C

VOCAB, HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, SEQ = 64, 32, 64, 2, 4, 2, 8


def build(seed, tp, stage, dtype, micro_bs=2):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=4 * SEQ,
                      tie_word_embeddings=False)
    torch.manual_seed(seed)  # every rank builds the same full model; AutoTP keeps each rank's slices
    model = LlamaForCausalLM(cfg).to(C.torch_dtype(dtype))
    ds = C.make_config(stage, dtype, micro_bs=micro_bs)
    ds["tensor_parallel"] = {"autotp_size": tp}
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=C.param_groups(model), config=ds)
    return engine


def batch(seed, step, dp_rank, micro_bs=2):
    # the same ids on every tensor rank of a data-parallel rank (AutoTP checks it)
    g = torch.Generator().manual_seed(seed * 1000 + step * 10 + dp_rank)
    return torch.randint(0, VOCAB, (micro_bs, SEQ), generator=g)


def universal_refs(save_dir, ref):
    """fp32 masters and moments as DeepSpeed's ds_to_universal.py merges them (its AutoTP rules)."""
    tag = open(os.path.join(save_dir, "latest")).read().strip()
    out = os.path.join(ref, "universal")
    subprocess.run([sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                    os.path.join(save_dir, tag), "--output_folder", out, "--num_extract_workers", "1",
                    "--num_merge_workers", "1"], check=True)
    got = {"fp32": {}, "exp_avg": {}, "exp_avg_sq": {}}
    zero = os.path.join(out, "zero")
    for name in sorted(os.listdir(zero)):
        if not os.path.isdir(os.path.join(zero, name)):
            continue  # optimizer_state.pt: the param groups
        for what in got:
            t = torch.load(os.path.join(zero, name, what + ".pt"), weights_only=False)
            got[what][name] = (t["param"] if isinstance(t, dict) else t).float()
    torch.save(got["fp32"], os.path.join(ref, "fp32.pt"))
    torch.save({"exp_avg": got["exp_avg"], "exp_avg_sq": got["exp_avg_sq"]}, os.path.join(ref, "moments.pt"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--stage", type=int, default=1)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    deepspeed.init_distributed(dist_backend="gloo")
    engine = build(a.seed, a.tp, a.stage, a.dtype)
    from deepspeed.utils import groups
    dp_rank = groups.get_data_parallel_rank()
    losses = []
    for step in range(a.steps):
        ids = batch(a.seed, step, dp_rank)
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        engine.step()
        losses.append(float(loss.detach()))
    lp = engine._consolidated_16bit_state_dict()  # collective; the full model on rank 0
    engine.save_checkpoint(a.out)
    dist.barrier()
    if dist.get_rank() == 0:
        os.makedirs(a.ref, exist_ok=True)
        torch.save({k: v.float() for k, v in lp.items()}, os.path.join(a.ref, "lp.pt"))
        universal_refs(a.out, a.ref)
        with open(os.path.join(a.ref, "run.json"), "w") as f:
            json.dump({"kind": "autotp", "world": dist.get_world_size(), "tp": a.tp, "losses": losses,
                       "steps": a.steps, "optimizer": type(engine.optimizer).__name__, "versions": C.versions()},
                      f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
