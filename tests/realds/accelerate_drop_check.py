#!/usr/bin/python3
"""Per-rank check of what Accelerate does with an FSDP save_state folder without its optimizer_0/ (OUT: the
test's copy of IN without it), the reason `ckptdoc repair --drop-optimizer` refuses such folders (started by the
judges' launch.py at the world size it was saved with). Under FSDP2 Accelerate prepares a model and its optimizer
together (prepare() raises "an optimizer must be passed together with its model" otherwise), and load_state reads
optimizer_<i>/ for every prepared optimizer (Accelerator.load_state -> load_fsdp_optimizer,
accelerate/accelerator.py and utils/fsdp_utils.py).

The model and a fresh AdamW are built and prepared as accelerate_fsdp_train.py built them (same config, plugin and
CPU override); load_fsdp_model(IN) and the params' local shards kept; every param overwritten with noise;
load_fsdp_model(OUT) and each local shard compared with the kept one bit for bit (the check reads OUT: it is not
blind). The fresh AdamW then takes one step on a fixed batch (its state was empty: it ends at step 1), and
accelerator.load_state(OUT) is tried, what a user resuming does; its error is reported. Rank 0 writes JSON.

usage: launch.py --world 2 -- accelerate_drop_check.py IN OUT --json RESULT
"""
import argparse
import json

import torch
import torch.distributed as dist


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()

    from accelerate import Accelerator, FullyShardedDataParallelPlugin
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType, set_seed
    from transformers import GPT2Config, GPT2LMHeadModel

    set_seed(7)
    cfg = GPT2Config(vocab_size=101, n_positions=32, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg)
    plugin = FullyShardedDataParallelPlugin(fsdp_version=2, state_dict_type="SHARDED_STATE_DICT",
                                            auto_wrap_policy="transformer_based_wrap",
                                            transformer_cls_names_to_wrap=["GPT2Block"],
                                            reshard_after_forward=True, cpu_ram_efficient_loading=False)
    acc = Accelerator(fsdp_plugin=plugin, cpu=True)
    state = acc.state
    if state.distributed_type == DistributedType.MULTI_CPU:  # as accelerate_fsdp_train.py (see there why)
        state.distributed_type = DistributedType.FSDP
        state.fsdp_plugin = plugin
        PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    from accelerate.utils import load_fsdp_model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    model, opt = acc.prepare(model, opt)
    params = list(model.parameters())
    load_fsdp_model(acc.state.fsdp_plugin, acc, model, a.src)
    kept = [local(p).detach().clone() for p in params]
    with torch.no_grad():
        for i, p in enumerate(params):
            local(p).copy_(torch.randn(local(p).shape, generator=torch.Generator().manual_seed(1000 + i)))
    load_fsdp_model(acc.state.fsdp_plugin, acc, model, a.out)
    same = torch.tensor([sum(int(torch.equal(local(p), k)) for p, k in zip(params, kept))])
    dist.all_reduce(same, op=dist.ReduceOp.MIN)

    ids = torch.randint(0, cfg.vocab_size, (2, 16), generator=torch.Generator().manual_seed(99 + acc.process_index))
    out = model(input_ids=ids, labels=ids)
    acc.backward(out.loss)
    opt.step()
    inner = opt.optimizer if hasattr(opt, "optimizer") else opt
    steps = sorted({float(s["step"]) for s in inner.state.values()})
    moved = torch.tensor([sum(int(not torch.equal(local(p), k)) for p, k in zip(params, kept))])
    dist.all_reduce(moved, op=dist.ReduceOp.MIN)
    resume_error = None
    try:
        acc.load_state(a.out)
    except BaseException as e:  # noqa: BLE001 - torch's CheckpointException is a BaseException; its words reported
        resume_error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300]}"
    if acc.is_main_process:
        with open(a.json, "w") as f:
            json.dump({"params": len(params), "params_equal_to_input": int(same[0]), "fresh_steps": steps,
                       "params_moved_by_step": int(moved[0]), "loss": float(out.loss),
                       "resume_with_optimizer_error": resume_error, "torch": torch.__version__}, f)
    dist.barrier()


if __name__ == "__main__":
    main()
