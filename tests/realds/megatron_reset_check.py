#!/usr/bin/python3
"""Judge of `ckptdoc repair --reset-optimizer` of a Megatron-core save, with torch alone (for the
DistributedOptimizer save, which megatron-core 0.16.1 cannot load with torch's Adam: megatron_load_check.py says
why). Reads the input and output iteration folders with torch: every DCP tensor through
torch.distributed.checkpoint's dcp_to_torch_save, common.pt with torch.load (the framework's own file: its args are
an argparse.Namespace). Then, per param, a torch Adam given the output's state the way megatron-core's
DistributedOptimizer.load_state_dict hands it over (distrib_optimizer.py:817-825 without Apex/TE: the param
groups' step as a float tensor in every param's state, the moments from optimizer.state.exp_avg.<key> /
exp_avg_sq.<key>) steps the main optimizer.state.param.<key> with a seeded gradient, and a fresh Adam (the same
hyperparameters, no state) steps the same main: fresh_equal counts bit-identical results.

usage: megatron_reset_check.py IN_ITERATION_DIR OUT_ITERATION_DIR   (prints JSON)
"""
import json
import os
import sys
import tempfile

import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save


def tensors(folder):
    with tempfile.TemporaryDirectory() as tmp:
        dcp_to_torch_save(folder, os.path.join(tmp, "all.pt"))
        return torch.load(os.path.join(tmp, "all.pt"), weights_only=False)


def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


def steps_of(common):
    inner = common["optimizer"]["optimizer"]
    if "common_step" in inner.get("state", {}):
        return [float(inner["state"]["common_step"])]
    return [float(g["step"]) for g in inner["param_groups"]]


def without_steps(common):
    inner = common["optimizer"]["optimizer"]
    inner.get("state", {}).pop("common_step", None)
    for g in inner["param_groups"]:
        g.pop("step", None)
    return repr(common)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    a, b = flat(tensors(src)), flat(tensors(dst))
    moments = [k for k in b if k.startswith(("optimizer.state.exp_avg.", "optimizer.state.exp_avg_sq."))]
    moved = [k for k in a if k not in moments and
             not (torch.is_tensor(a[k]) and torch.equal(a[k], b[k]) or not torch.is_tensor(a[k]) and a[k] == b[k])]
    ca = torch.load(os.path.join(src, "common.pt"), weights_only=False)
    cb = torch.load(os.path.join(dst, "common.pt"), weights_only=False)
    out = dict(keys_equal=sorted(a) == sorted(b), moments=len(moments),
               moments_nonzero_in=sum(int(a[k].count_nonzero()) > 0 for k in moments),
               moments_nonzero_out=sum(int(b[k].count_nonzero()) > 0 for k in moments),
               other_tensors_changed=moved, steps_in=steps_of(ca), steps_out=steps_of(cb),
               common_rest_equal=without_steps(ca) == without_steps(cb))
    group = cb["optimizer"]["optimizer"]["param_groups"][0]
    hyper = dict(lr=group["lr"], betas=group["betas"], eps=group["eps"], weight_decay=group["weight_decay"],
                 decoupled_weight_decay=group.get("decoupled_weight_decay", False))
    equal = differ = 0
    step = torch.tensor(out["steps_out"][0], dtype=torch.float)
    for k in sorted(b):
        if not k.startswith("optimizer.state.param."):
            continue
        key = k[len("optimizer.state.param."):]
        grad = torch.randn(b[k].shape, generator=torch.Generator().manual_seed(7)) * 1e-2
        loaded, fresh = b[k].clone().requires_grad_(True), b[k].clone().requires_grad_(True)
        loaded.grad, fresh.grad = grad.clone(), grad.clone()
        opt = torch.optim.Adam([loaded], **hyper)
        opt.load_state_dict(dict(state={0: dict(step=step.clone(), exp_avg=b["optimizer.state.exp_avg." + key],
                                                exp_avg_sq=b["optimizer.state.exp_avg_sq." + key])},
                                 param_groups=[dict(opt.state_dict()["param_groups"][0])]))
        opt.step()
        torch.optim.Adam([fresh], **hyper).step()
        if torch.equal(loaded.detach(), fresh.detach()):
            equal += 1
        else:
            differ += 1
    out.update(fresh_equal=equal, fresh_differ=differ)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
