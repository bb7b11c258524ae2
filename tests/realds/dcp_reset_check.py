"""Per-rank judge of `ckptdoc repair --reset-optimizer` on an FSDP2 DCP folder (started by the judges' launch.py
at the world size the folder was saved with): torch itself loads the folder, trains one step, and compares with a
fresh optimizer.

  A: Tiny sharded by FSDP2 (tests/fixtures/dcp/make_fsdp2_dcp.py's sharded_tiny) and its Adam, loaded from DIR as
     the fixtures resume (dcp.load of get_state_dict's shape, then set_state_dict: model and optimizer);
  B: the same model loaded from DIR by its model keys alone (get_model_state_dict / dcp.load /
     set_model_state_dict: what --drop-optimizer's refusal tells users to do) with a FRESH Adam (lr 1e-2, as A's
     saved param groups);
  both take one optimizer step on the same batch. Rank 0 prints JSON: whether every param's local shard is
  bit-identical between A and B after the step ("identical"), the largest difference, the steps A's optimizer
  loaded and holds after the step, and whether B's weights before the step were A's (the model-only load).

usage: launch.py --world 2 -- dcp_reset_check.py DIR [--json OUT]
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict, set_state_dict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "dcp"))
from make_fsdp2_dcp import OPTIONS, sharded_tiny, state_of  # noqa: E402


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def step_once(model, optim):
    gen = torch.Generator().manual_seed(101 + dist.get_rank())
    model(torch.randint(0, 37, (4, 7), generator=gen)).pow(2).mean().backward()
    optim.step()
    optim.zero_grad()


def main():
    source = sys.argv[1]
    json_out = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--json" else None
    dist.init_process_group("gloo")
    try:
        model_a, optim_a = sharded_tiny(seed=None)
        state = state_of(model_a, optim_a, 0, b"")
        model_sd = {k: v for k, v in state.items() if k not in ("optimizer", "train_state")}
        dcp.load(state, checkpoint_id=source)
        set_state_dict(model_a, optim_a, model_state_dict=model_sd, optim_state_dict=state["optimizer"],
                       options=OPTIONS)
        loaded_steps = sorted({float(s["step"]) for s in optim_a.state.values()})
        loaded_nonzero_moments = sum(int(torch.count_nonzero(local(s[k]))) for s in optim_a.state.values()
                                     for k in ("exp_avg", "exp_avg_sq"))

        model_b, _ = sharded_tiny(seed=12345)  # other initial values: every weight must come from the load
        model_only = get_model_state_dict(model_b)
        dcp.load(model_only, checkpoint_id=source)
        set_model_state_dict(model_b, model_only)
        optim_b = torch.optim.Adam(model_b.parameters(), lr=1e-2)
        same_before = all(torch.equal(local(a), local(b)) for a, b in zip(model_a.parameters(), model_b.parameters()))

        step_once(model_a, optim_a)
        step_once(model_b, optim_b)
        identical = True
        max_diff = 0.0
        for a, b in zip(model_a.parameters(), model_b.parameters()):
            la, lb = local(a).detach(), local(b).detach()
            identical &= torch.equal(la, lb) and la.dtype == lb.dtype
            if la.numel():
                max_diff = max(max_diff, float((la.double() - lb.double()).abs().max()))
        flags = torch.tensor([int(identical), int(same_before)])
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        diff = torch.tensor([max_diff], dtype=torch.float64)
        dist.all_reduce(diff, op=dist.ReduceOp.MAX)
        nonzero = torch.tensor([loaded_nonzero_moments])
        dist.all_reduce(nonzero)
        if dist.get_rank() == 0:
            report = json.dumps({
                "identical": bool(flags[0]),
                "weights_loaded_alike": bool(flags[1]),
                "max_abs_diff": float(diff[0]),
                "params": len(list(model_a.parameters())),
                "loaded_steps": loaded_steps,
                "loaded_nonzero_moment_elements": int(nonzero[0]),
                "steps_after": sorted({float(s["step"]) for s in optim_a.state.values()}),
                "fresh_steps_after": sorted({float(s["step"]) for s in optim_b.state.values()}),
                "torch": torch.__version__,
            })
            print(report)
            if json_out:
                with open(json_out, "w") as f:
                    f.write(report + "\n")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
