#!/usr/bin/python3
"""Per-rank judge of `ckptdoc repair --reset-optimizer` on an Accelerate FSDP save_state folder (started by the
judges' launch.py at the world size it was saved with): Accelerate itself loads it, and one step from the loaded
optimizer is compared with one step from a FRESH AdamW.

The model, optimizer and scheduler are built and prepared as accelerate_fsdp_train.py built them (same config,
plugin and CPU override), then accelerator.load_state(DIR). The loaded params' local shards are kept; A: one step
of the loaded optimizer on a fixed batch; then the params are put back to the kept shards and B: one step of a new
torch.optim.AdamW over the same params (lr as the loaded param group holds it after the scheduler, weight_decay
0.01 as saved) on the same batch. Rank 0 writes JSON: whether every local shard after A equals B's bit for bit, the
largest difference, the steps the loaded optimizer held and holds after its step, and its non-zero moment count.

usage: launch.py --world 2 -- accelerate_reset_check.py DIR --json OUT
"""
import argparse
import json

import torch
import torch.distributed as dist


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
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
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    model, opt, sched = acc.prepare(model, opt, sched)
    acc.load_state(a.dir)
    inner = opt.optimizer if hasattr(opt, "optimizer") else opt
    loaded_steps = sorted({float(s["step"]) for s in inner.state.values()})
    nonzero = sum(int(torch.count_nonzero(local(s[k]))) for s in inner.state.values() for k in ("exp_avg", "exp_avg_sq"))
    lr = inner.param_groups[0]["lr"]
    params = list(model.parameters())
    kept = [local(p).detach().clone() for p in params]
    ids = torch.randint(0, cfg.vocab_size, (2, 16), generator=torch.Generator().manual_seed(99 + acc.process_index))

    def step(optimizer):
        out = model(input_ids=ids, labels=ids)
        acc.backward(out.loss)
        optimizer.step()
        optimizer.zero_grad()
        return [local(p).detach().clone() for p in params]

    after_a = step(opt)
    steps_after = sorted({float(s["step"]) for s in inner.state.values()})
    with torch.no_grad():
        for p, k in zip(params, kept):
            local(p).copy_(k)
    fresh = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    after_b = step(fresh)
    identical = all(torch.equal(x, y) for x, y in zip(after_a, after_b))
    diff = max([float((x.double() - y.double()).abs().max()) for x, y in zip(after_a, after_b) if x.numel()] + [0.0])
    flags = torch.tensor([int(identical)])
    dist.all_reduce(flags, op=dist.ReduceOp.MIN)
    d = torch.tensor([diff], dtype=torch.float64)
    dist.all_reduce(d, op=dist.ReduceOp.MAX)
    n = torch.tensor([nonzero])
    dist.all_reduce(n)
    if acc.is_main_process:
        with open(a.json, "w") as f:
            json.dump({"identical": bool(flags[0]), "max_abs_diff": float(d[0]), "params": len(params), "lr": lr,
                       "loaded_steps": loaded_steps, "steps_after": steps_after,
                       "loaded_nonzero_moment_elements": int(n[0]), "torch": torch.__version__}, f)
    acc.end_training()


if __name__ == "__main__":
    main()
