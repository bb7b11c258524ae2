#!/usr/bin/python3
"""Per-rank driver: one model trained the same way by DeepSpeed and by FSDP2, each saved by its own framework, so
`ckptdoc diff` has a real pair of formats to compare (#28: "diff across formats").

Both runs start from the harness's model A (ds_common.Net, SMALL_DIMS, seed 1) and take the same 3 steps: each
rank's micro-batches of ds_common.batches, AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01 on the
matrices), gradient clipping 1.0, fp32, no schedule.
  OUT/deepspeed/  DeepSpeed ZeRO-2 (torch's AdamW inside it), engine.save_checkpoint
  OUT/fsdp2/      torch's fully_shard on each Linear and the model, torch's AdamW, dcp.save of
                  get_state_dict(..., flatten_optimizer_state_dict=True) laid out as torchtitan saves it
                  (model keys at the top level, optimizer.state.<fqn>.*)
Then rank 0 writes OUT/reference.json: each framework's own reading of its save (DeepSpeed's
get_fp32_state_dict_from_zero_checkpoint, torch's dcp_to_torch_save) and, per weight, what a comparison of the
two finds: numel, exact (elements equal), max_abs (max |a - b|, computed in float64); and the same per param
for Adam's exp_avg, as each framework holds it in memory at the save (DeepSpeed's
safe_get_full_optimizer_state, FSDP2's optimizer state gathered with full_tensor()).

usage: launch.py --world 2 -- cross_format_train.py --out OUT [--steps 3]
"""
import argparse
import json
import os

import torch
import torch.distributed as dist

import ds_common as C
import par_models as M

LR, BETAS, EPS, WD = 1e-3, (0.9, 0.999), 1e-8, 0.01
SEED = 1


def adamw_groups(model):
    return C.param_groups(model, wd=WD)


def deepspeed_run(out, steps):
    import deepspeed
    torch.manual_seed(SEED)
    model = C.Net(C.SMALL_DIMS)
    optimizer = torch.optim.AdamW(adamw_groups(model), lr=LR, betas=BETAS, eps=EPS)
    cfg = C.make_config(2, "fp32")
    del cfg["optimizer"], cfg["scheduler"]  # the client AdamW, a constant lr: what the FSDP2 run does
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=cfg)
    losses = C.train_steps(engine, C.SMALL_DIMS, "fp32", steps, SEED)
    engine.save_checkpoint(out)
    # DeepSpeed's own whole view of each param's moment (a collective: every rank asks)
    from deepspeed.utils import safe_get_full_optimizer_state
    # ZeRO-2 steps one param group at a time and links the moments to the params after the first group's step,
    # when torch's AdamW has made no state for the second group yet: link them again now that both have state
    engine.optimizer._hp_optimizer_states_linked = False
    engine.optimizer._lazy_init_hp_params_optimizer_state()
    moments = {name: safe_get_full_optimizer_state(p, "exp_avg").detach().clone()
               for name, p in engine.module.named_parameters()}
    return [step["loss"] for step in losses], moments


def fsdp2_run(out, steps):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    import torch.distributed.checkpoint as dcp
    torch.manual_seed(SEED)
    model = C.Net(C.SMALL_DIMS)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for name in model.order:
        fully_shard(getattr(model, name), mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(adamw_groups(model), lr=LR, betas=BETAS, eps=EPS)
    losses = []
    for x, y in C.batches(C.SMALL_DIMS, "fp32", steps, SEED, dist.get_rank()):
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), C.GRAD_CLIP)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.item()))
    msd, osd = get_state_dict(model, optimizer, options=StateDictOptions(flatten_optimizer_state_dict=True))
    dcp.save({**msd, "optimizer": osd}, checkpoint_id=out)
    moments = {name: optimizer.state[p]["exp_avg"].full_tensor() for name, p in model.named_parameters()}
    return losses, moments


def compared(a, b):
    """What comparing two tensors element by element finds (float64 differences)."""
    return dict(numel=a.numel(), exact=int((a == b).sum()), max_abs=float((a.double() - b.double()).abs().max()))


def reference(out, ds_moments, fsdp_moments):
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    ds = get_fp32_state_dict_from_zero_checkpoint(os.path.join(out, "deepspeed"))
    whole = os.path.join(out, "fsdp2_whole.pt")
    dcp_to_torch_save(os.path.join(out, "fsdp2"), whole)
    fsdp = torch.load(whole, weights_only=False)
    os.remove(whole)
    tensors = {}
    for name, a in ds.items():
        b = fsdp.get(name)
        if not torch.is_tensor(b):
            continue
        tensors[name] = compared(a, b)
    exp_avg = {name: compared(m, fsdp_moments[name]) for name, m in ds_moments.items()}
    return dict(tensors=tensors, exp_avg=exp_avg, only_deepspeed=sorted(set(ds) - set(tensors)),
                fsdp2_keys=sorted(k for k in fsdp if torch.is_tensor(fsdp[k])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    M.cpu_patches()
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo")
    ds_losses, ds_moments = deepspeed_run(os.path.join(a.out, "deepspeed"), a.steps)
    fsdp_losses, fsdp_moments = fsdp2_run(os.path.join(a.out, "fsdp2"), a.steps)
    dist.barrier()
    if dist.get_rank() == 0:
        ref = reference(a.out, ds_moments, fsdp_moments)
        ref.update(losses_deepspeed=ds_losses, losses_fsdp2=fsdp_losses, versions=C.versions())
        with open(os.path.join(a.out, "reference.json"), "w") as f:
            json.dump(ref, f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
