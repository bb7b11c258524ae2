#!/usr/bin/python3
"""Compares the layout of two DeepSpeed checkpoints (save folders) field by field: REAL, written by DeepSpeed, and
SYNTH, written by `ckptdoc synth` of the same recipe. Values differ (random weights, another run's hyperparameters);
the layout must not: the tag folder's file names, every file's keys in order, tensors' dtype, shape, stride,
storage size and offset (where the 16-bit weights sit in their flat buffer), requires_grad and attributes (ZeRO-3's
ds_id), every integer, string and name that places data (param_shapes, shared_params, buffer_names, group_paddings,
partition_count, param_slice_mappings, zero_stage, dp_world_size, the optimizer's param group ids), and the classes of
pickled objects. Run-specific values (configs, hyperparameters, step counts, loss scales, versions) are not compared.
Prints one line per difference and exits 1 when there is any; exit 0 prints how many fields matched.

usage: realds.py py --ds 0.19 -- compare_synth_layout.py REAL SYNTH [--known PATTERN]...
--known: a difference whose path matches PATTERN (fnmatch, e.g. '*/fp32_flat_groups/*#attrs') is printed as known
and not counted (what ckptdoc's writer cannot write, said by the test that passes it).
"""
import argparse
import fnmatch
import os
import sys

import torch

# Keys whose subtrees are run settings, not layout: their values (and for configs, their keys) are not compared.
SETTINGS = {"ds_config", "lr_scheduler", "ds_version", "global_steps", "global_samples", "skipped_steps",
            "data_sampler", "random_ltd", "sparse_tensor_module_names", "clip_grad", "overflow", "dynamic_loss_scale"}
# Inside these, only the keys are compared (the loss scaler's state, Adam's hyperparameters).
KEYS_ONLY = {"loss_scaler"}


def skeleton(v, path, out):
    """Appends (path, description) for v and everything under it."""
    last = path.rsplit("/", 1)[-1]
    if last in SETTINGS:
        out.append((path, "setting"))
        return
    if isinstance(v, torch.Tensor):
        st = v.untyped_storage()
        attrs = sorted(k for k in getattr(v, "__dict__", {}) if not k.startswith("_"))
        out.append((path, f"tensor {v.dtype} shape={tuple(v.shape)} stride={v.stride()} "
                          f"storage={st.nbytes() // max(1, v.element_size())} offset={v.storage_offset()} "
                          f"requires_grad={v.requires_grad}"))
        if attrs:  # python attributes pickled with the tensor (torch._tensor._rebuild_from_type_v2)
            out.append((path + "#attrs", str(attrs)))
        return
    if isinstance(v, dict):
        keys = list(v.keys())
        out.append((path, f"{type(v).__name__} keys={[str(k) for k in keys]}"))
        meta = getattr(v, "_metadata", None)
        if meta is not None:
            out.append((path + "/._metadata", f"modules={list(meta.keys())}"))
        for k in keys:
            skeleton(v[k], f"{path}/{k}", out)
        return
    if isinstance(v, (list, tuple)):
        if isinstance(v, torch.Size):
            out.append((path, f"Size{tuple(v)}"))
            return
        out.append((path, f"{type(v).__name__} len={len(v)}"))
        for i, x in enumerate(v):
            skeleton(x, f"{path}/{i}", out)
        return
    if isinstance(v, (bool, int, str)) or v is None:
        out.append((path, f"{type(v).__name__} {v!r}"))
        return
    if isinstance(v, float):
        out.append((path, "float"))
        return
    if isinstance(v, set):
        out.append((path, f"set {sorted(map(str, v))}"))
        return
    d = getattr(v, "__dict__", None)
    name = type(v).__name__
    if last in KEYS_ONLY:
        out.append((path, f"object {name} fields={sorted(d or {})}"))
        return
    if d is not None:
        out.append((path, f"object {name} fields={sorted(d)}"))
        for k in sorted(d):
            skeleton(d[k], f"{path}.{k}", out)
        return
    out.append((path, f"object {name} {v!r}"))


def param_group_hyperparameters(entries):
    """param_groups' keys other than "params" depend on torch's version: only their presence of "params" counts."""
    kept = []
    for path, desc in entries:
        parts = path.split("/")
        if "param_groups" in parts:
            i = parts.index("param_groups")
            rest = parts[i + 1:]
            if len(rest) == 1 and desc.startswith("dict keys="):
                desc = "dict keys=[...params]" if "'params'" in desc else desc
            elif len(rest) >= 2 and rest[1] != "params":
                continue
        kept.append((path, desc))
    return kept


def load_folder(save_dir):
    tag = open(os.path.join(save_dir, "latest")).read().strip()
    folder = os.path.join(save_dir, tag)
    files = sorted(os.listdir(folder))
    out = [("files", str(files))]
    for f in files:
        sd = torch.load(os.path.join(folder, f), map_location="cpu", weights_only=False)
        skeleton(sd, f, out)
    return param_group_hyperparameters(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("real")
    ap.add_argument("synth")
    ap.add_argument("--known", action="append", default=[])
    a = ap.parse_args()
    real, synth = load_folder(a.real), load_folder(a.synth)
    rd, sd = dict(real), dict(synth)
    diffs = 0

    def report(path, text):
        nonlocal diffs
        known = any(fnmatch.fnmatchcase(path, k) for k in a.known)
        print(("known, " if known else "") + text)
        diffs += not known

    for path, desc in real:
        if path not in sd:
            report(path, f"only in DeepSpeed's: {path}: {desc}")
        elif sd[path] != desc:
            report(path, f"differs: {path}\n  DeepSpeed: {desc}\n  synth:     {sd[path]}")
    for path, desc in synth:
        if path not in rd:
            report(path, f"only in synth's: {path}: {desc}")
    if diffs:
        print(f"{diffs} differences")
        return 1
    print(f"layouts match: {len(real)} fields")
    return 0


if __name__ == "__main__":
    sys.exit(main())
