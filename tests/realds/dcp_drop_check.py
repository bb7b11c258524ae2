"""Per-rank judge of `ckptdoc repair --drop-optimizer` on an FSDP2 DCP folder (started by the judges' launch.py at
the world size the folder was saved with): torch itself reads the dropped folder beside its input.

  - torch's FileSystemReader reads the dropped folder's .metadata (a pickle ckptdoc wrote): its keys are the
    input's without the optimizer.* ones;
  - the model (tests/fixtures/dcp/make_fsdp2_dcp.py's sharded_tiny, other initial values) loaded from each folder
    by its model keys alone (get_model_state_dict / dcp.load / set_model_state_dict) and train_state with it:
    every local shard bit-identical between the two, train_state equal;
  - each model with a fresh Adam (lr 1e-2) takes one step on the same batch: bit-identical again;
  - dcp.load of the full resume state (model + optimizer, get_state_dict's shape) from the dropped folder must
    fail (the optimizer is gone), and from the input it loads.
Rank 0 writes JSON.

usage: launch.py --world 2 -- dcp_drop_check.py INPUT_DIR DROPPED_DIR --json OUT
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "dcp"))
from make_fsdp2_dcp import sharded_tiny, state_of  # noqa: E402


def local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def model_from(folder):
    model, _ = sharded_tiny(seed=12345)  # other initial values: every weight must come from the load
    sd = get_model_state_dict(model)
    sd["train_state"] = {"step": -1, "tag": b"none"}
    dcp.load(sd, checkpoint_id=folder)
    train_state = sd.pop("train_state")
    set_model_state_dict(model, sd)
    return model, train_state


def full_load_works(folder):
    model, optim = sharded_tiny(seed=None)
    try:
        dcp.load(state_of(model, optim, 0, b""), checkpoint_id=folder)
        return True
    except (Exception, CheckpointException):  # noqa: BLE001 - any failure of torch's load is the answer
        # (CheckpointException, what dcp.load raises on every rank, is a BaseException)
        return False


def main():
    src, dropped, json_out = sys.argv[1], sys.argv[2], sys.argv[4]
    dist.init_process_group("gloo")
    try:
        keys_in = set(FileSystemReader(src).read_metadata().state_dict_metadata)
        keys_out = set(FileSystemReader(dropped).read_metadata().state_dict_metadata)
        model_a, ts_a = model_from(src)
        model_b, ts_b = model_from(dropped)
        same = all(torch.equal(local(a), local(b)) for a, b in zip(model_a.parameters(), model_b.parameters()))
        optims = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (model_a, model_b)]
        for model, optim in zip((model_a, model_b), optims):
            gen = torch.Generator().manual_seed(101 + dist.get_rank())
            model(torch.randint(0, 37, (4, 7), generator=gen)).pow(2).mean().backward()
            optim.step()
        stepped = all(torch.equal(local(a), local(b)) for a, b in zip(model_a.parameters(), model_b.parameters()))
        flags = torch.tensor([int(same), int(stepped)])
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        full_in, full_out = full_load_works(src), full_load_works(dropped)
        if dist.get_rank() == 0:
            report = {"keys_in": len(keys_in), "keys_out": len(keys_out),
                      "keys_out_are_input_without_optimizer":
                          keys_out == {k for k in keys_in if not k.startswith("optimizer.")},
                      "weights_identical": bool(flags[0]), "fresh_step_identical": bool(flags[1]),
                      "train_state_equal": ts_a == ts_b, "train_state": repr(ts_b),
                      "full_load_input": full_in, "full_load_dropped": full_out, "torch": torch.__version__}
            with open(json_out, "w") as f:
                f.write(json.dumps(report) + "\n")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
