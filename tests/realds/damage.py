#!/usr/bin/python3
"""Damages a copy of a real DeepSpeed checkpoint the way real failures do, with torch.load / torch.save (run it
through `realds.py py` so DeepSpeed's own classes unpickle and pickle as they are).

  damage.py SAVE_DIR ACTION [ARG]

Actions (every optimizer file of the tag folder unless a rank is given):
  zero-moments          exp_avg and exp_avg_sq all zero, step kept (moments lost, step >= 2)
  zero-exp-avg-sq       exp_avg_sq alone all zero, step kept
  negative-exp-avg-sq R one element of group 0's exp_avg_sq of rank R made negative
  nan-exp-avg R         a NaN in group 0's exp_avg of rank R
  step-zero             every Adam step set to 0, moments kept
  drift-fp32 R          1 of every 50 elements of rank R's fp32 masters moved by 2 ULPs of the lp dtype
  stale-fp32 R          rank R's fp32 masters replaced by fresh random values (one rank of #762)
  nan-fp32 R            rank R's fp32 masters all NaN (a diverged run saved)
  stale-unfused-fp32    FP16_UnfusedOptimizer (ZeRO stage 0): every fp32 master in the model file's optimizer
                        replaced by fresh random values
  unfused-split-groups  FP16_UnfusedOptimizer: group 1's first master (a [301] bias) moved to group 0 behind
                        fc1.weight, its state with it, as a client's own grouping could: three [301] params now
                        fit either group
  stale-fused-fp32      FP16_Optimizer (ZeRO stage 0): every flat fp32 master in the model file's optimizer replaced
                        by fresh random values
  fused-split-groups    FP16_Optimizer: group 1's first 301 elements (the fc1.bias master) moved into group 0 behind
                        fc1.weight, the moments with them, as a client's own grouping could: three [301] params now
                        fit either group
  loss-scale-floor      the dynamic loss scaler at its minimum scale
  dp-world-size N       the model file(s) claim dp_world_size N
  module-shape          the module's fc1.bias saved one element short (model file and param_shapes disagree)
  short-fp32 R          rank R's first fp32 partition saved 5 elements short
  group-paddings R      rank R's group_paddings[0] off by 3
"""
import glob
import os
import sys

import torch


def optim_files(tag_dir, rank=None):
    out = []
    for f in sorted(glob.glob(os.path.join(tag_dir, "*zero_pp_rank_*_optim_states.pt"))):
        r = int(os.path.basename(f).split("zero_pp_rank_")[1].split("_")[0])
        if rank is None or r == rank:
            out.append(f)
    if not out:
        sys.exit(f"damage.py: no optimizer file{'' if rank is None else f' for rank {rank}'} in {tag_dir}")
    return out


def inner_state(osd):
    holder = osd.get("base_optimizer_state", osd.get("optimizer_state_dict"))
    return holder["state"]


def fp32_groups(osd):
    return osd.get("single_partition_of_fp32_groups", osd.get("fp32_flat_groups"))


def lp_dtype(ckpt_root):
    cfg = ckpt_root.get("ds_config", {})
    return torch.bfloat16 if cfg.get("bf16", {}).get("enabled") else torch.float16


def edit(path, fn):
    d = torch.load(path, map_location="cpu")
    with torch.no_grad():  # the fp32 partitions are saved as leaves that require grad
        fn(d)
    torch.save(d, path)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    save_dir, action = sys.argv[1], sys.argv[2]
    arg = int(sys.argv[3]) if len(sys.argv) > 3 else None
    tag_dir = os.path.join(save_dir, open(os.path.join(save_dir, "latest")).read().strip())

    if action in ("zero-moments", "zero-exp-avg-sq", "step-zero"):
        def f(d):
            for st in inner_state(d["optimizer_state_dict"]).values():
                if action == "step-zero":
                    st["step"] = torch.zeros_like(st["step"]) if torch.is_tensor(st["step"]) else 0
                    continue
                st["exp_avg_sq"].zero_()
                if action == "zero-moments":
                    st["exp_avg"].zero_()
        for p in optim_files(tag_dir):
            edit(p, f)
    elif action in ("negative-exp-avg-sq", "nan-exp-avg"):
        def f(d):
            st = inner_state(d["optimizer_state_dict"])[0]
            if action == "nan-exp-avg":
                st["exp_avg"][7] = float("nan")
            else:
                st["exp_avg_sq"][7] = -abs(float(st["exp_avg_sq"][7])) - 1e-6
        edit(optim_files(tag_dir, arg)[0], f)
    elif action in ("drift-fp32", "stale-fp32", "nan-fp32"):
        def f(d):
            g = torch.Generator().manual_seed(11)
            dt = lp_dtype(d)
            for t in fp32_groups(d["optimizer_state_dict"]):
                if action == "nan-fp32":
                    t.fill_(float("nan"))
                    continue
                if action == "stale-fp32":
                    t.copy_(torch.randn(t.shape, generator=g) * 0.05)
                    continue
                idx = torch.arange(0, t.numel(), 50)
                lp = t[idx].to(dt)
                ulp = (lp.float().abs().clamp_min(1e-3) * (2.0 ** (-7 if dt == torch.bfloat16 else -10)))
                t[idx] = (lp.float() + 2 * ulp).to(torch.float32)
        edit(optim_files(tag_dir, arg)[0], f)
    elif action == "stale-unfused-fp32":
        def f(d):
            g = torch.Generator().manual_seed(11)
            for group in d["optimizer"]["fp32_groups"]:
                for t in group:
                    t.copy_(torch.randn(t.shape, generator=g) * 0.05)
        edit(os.path.join(tag_dir, "mp_rank_00_model_states.pt"), f)
    elif action == "unfused-split-groups":
        def f(d):
            opt = d["optimizer"]
            g0, g1 = opt["fp32_groups"]
            g0.insert(1, g1.pop(0))
            inner = opt["optimizer_state_dict"]
            n0 = len(g0) - 1
            order = [0, n0] + list(range(1, n0)) + list(range(n0 + 1, n0 + 1 + len(g1)))  # new index -> old
            inner["state"] = {new: inner["state"][old] for new, old in enumerate(order) if old in inner["state"]}
            pg0, pg1 = inner["param_groups"]
            pg0["params"] = list(range(len(g0)))
            pg1["params"] = list(range(len(g0), len(g0) + len(g1)))
        edit(os.path.join(tag_dir, "mp_rank_00_model_states.pt"), f)
    elif action == "stale-fused-fp32":
        def f(d):
            g = torch.Generator().manual_seed(11)
            for t in d["optimizer"]["fp32_groups_flat"]:
                t.copy_(torch.randn(t.shape, generator=g) * 0.05)
        edit(os.path.join(tag_dir, "mp_rank_00_model_states.pt"), f)
    elif action == "fused-split-groups":
        def move(g0, g1, head=28896, n=301):  # fc1.weight's length in group 0 (model A), fc1.bias's in group 1
            return torch.cat([g0[:head], g1[:n], g0[head:]]), g1[n:].clone()

        def f(d):
            opt = d["optimizer"]
            opt["fp32_groups_flat"] = list(move(*opt["fp32_groups_flat"]))
            state = opt["optimizer_state_dict"]["state"]
            for key in ("exp_avg", "exp_avg_sq"):
                state[0][key], state[1][key] = move(state[0][key], state[1][key])
        edit(os.path.join(tag_dir, "mp_rank_00_model_states.pt"), f)
    elif action == "loss-scale-floor":
        def f(d):
            ls = d["optimizer_state_dict"]["loss_scaler"]
            ls.cur_scale = float(getattr(ls, "min_scale", 1.0))
        for p in optim_files(tag_dir):
            edit(p, f)
    elif action == "dp-world-size":
        for p in glob.glob(os.path.join(tag_dir, "*model_states.pt")):
            edit(p, lambda d: d.__setitem__("dp_world_size", arg))
    elif action == "short-fp32":
        def f(d):
            groups = fp32_groups(d["optimizer_state_dict"])
            groups[0] = groups[0][:-5].clone()
        edit(optim_files(tag_dir, arg)[0], f)
    elif action == "group-paddings":
        def f(d):
            d["optimizer_state_dict"]["group_paddings"][0] += 3
        edit(optim_files(tag_dir, arg)[0], f)
    elif action == "module-shape":
        for p in glob.glob(os.path.join(tag_dir, "*model_states.pt")):
            edit(p, lambda d: d["module"].__setitem__("fc1.bias", d["module"]["fc1.bias"][:-1].clone()))
    else:
        sys.exit(f"damage.py: unknown action {action!r}\n{__doc__}")
    print(f"damage.py: {action} applied to {tag_dir}")


if __name__ == "__main__":
    main()
