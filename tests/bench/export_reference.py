#!/usr/bin/python3
"""Python/torch consolidation of a DeepSpeed ZeRO checkpoint, doing what zero_to_fp32.py does (§5.4 of
deepspeed-format.md): load every rank file fully, concatenate the fp32 partitions, split them by
param_shapes, add buffers (float32), frozen params and shared aliases, and torch.save the OrderedDict.
The baseline for bench_export.sh, and a second opinion for tests on generated checkpoints.

Usage: export_reference.py TAG_DIR OUT_FILE
"""
import collections
import glob
import math
import os
import re
import sys
import types

import torch


def _stub(module, name):  # DeepSpeed's classes unpickle into plain objects
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    cls = type(name, (object,), {"__reduce__": object.__reduce__})
    if name == "ZeroStageEnum":
        import enum
        cls = enum.IntEnum("ZeroStageEnum", {"disabled": 0, "optimizer_states": 1, "gradients": 2, "weights": 3})
    setattr(sys.modules[module], name, cls)


for m, n in (("deepspeed.runtime.fp16.loss_scaler", "LossScaler"),
             ("deepspeed.runtime.fp16.loss_scaler", "DynamicLossScaler"),
             ("deepspeed.runtime.zero.config", "ZeroStageEnum"),
             ("deepspeed.utils.tensor_fragment", "fragment_address"),
             ("deepspeed.runtime.bf16_optimizer", "fragment_address")):
    _stub(m, n)


def natural(path):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", os.path.basename(path))]


def main():
    tag_dir, out = sys.argv[1], sys.argv[2]
    optim_files = sorted(glob.glob(os.path.join(tag_dir, "*_optim_states.pt")), key=natural)
    model_files = sorted(glob.glob(os.path.join(tag_dir, "*_model_states.pt")), key=natural)
    optims = [torch.load(f, map_location="cpu")["optimizer_state_dict"] for f in optim_files]
    models = [torch.load(f, map_location="cpu") for f in model_files]
    ws = len(optims)
    stage3 = "fp32_flat_groups" in optims[0]
    key = "fp32_flat_groups" if stage3 else "single_partition_of_fp32_groups"
    m0 = models[0]
    sd = collections.OrderedDict()
    for k in m0["buffer_names"]:
        sd[k] = m0["module"][k].float()
    if m0.get("frozen_param_shapes"):
        for name, shape in m0["frozen_param_shapes"].items():
            if stage3:
                sd[name] = torch.cat([m["frozen_param_fragments"][name] for m in models])[:math.prod(shape)].view(shape)
            else:
                sd[name] = m0["frozen_param_fragments"][name]
    if not stage3:
        for g, shapes in enumerate(m0["param_shapes"]):
            full = torch.cat([o[key][g] for o in optims])
            off = 0
            for name, shape in shapes.items():
                n = math.prod(shape)
                sd[name] = full[off:off + n].view(shape).clone()
                off += n
    else:
        flats = [torch.cat(list(o[key])) for o in optims]
        off = 0
        for shapes in m0["param_shapes"]:
            for name, shape in shapes.items():
                n = math.prod(shape)
                part = -(-n // ws)
                sd[name] = torch.cat([f[off:off + part] for f in flats])[:n].view(shape).clone()
                off += part
    for alias, owner in (m0.get("shared_params") or {}).items():
        if owner in sd:
            sd[alias] = sd[owner]
    del optims, models
    torch.save(sd, out)
    # Same durability as ckptdoc's writer (fsync of the file and its folder), so both do the same work.
    fd = os.open(out, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    dfd = os.open(os.path.dirname(os.path.abspath(out)), os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)


if __name__ == "__main__":
    main()
