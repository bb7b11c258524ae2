#!/usr/bin/python3
"""Edits a copy of a real DeepSpeed checkpoint into what a hostile or corrupted one looks like, with torch.load /
torch.save (run it through `realds.py py` so DeepSpeed's own classes unpickle and pickle as they are).

  hostile_edit.py SAVE_DIR ACTION

Actions:
  payload-model   the model-states file gains an entry whose unpickling calls os.system('true') (the classic
                  __reduce__ payload; Python pickles it as posix.system)
  huge-counts     every file claims dp_world_size and partition_count 2147483647
  drop-moment R K rank R's optimizer state loses key K in every group (other ranks keep it)
  shrink-moment R K  rank R's key K of group 0 becomes a 1-element tensor
  fp32-half R     rank R's fp32 master partitions saved as float16
  fp32-double R   rank R's fp32 master partitions saved as float64
  strided-fp32 R  rank R's fp32 master partitions saved as strided (non-contiguous) views, same values
  drop-weight N   the model file's module loses the weight N
"""
import glob
import os
import sys

import torch


class Payload:
    def __reduce__(self):
        return (os.system, ("true",))


def tag_dir(save_dir):
    with open(os.path.join(save_dir, "latest")) as f:
        return os.path.join(save_dir, f.read().strip())


def edit(path, fn):
    d = torch.load(path, map_location="cpu")
    fn(d)
    torch.save(d, path)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    save_dir, action = sys.argv[1], sys.argv[2]
    tag = tag_dir(save_dir)
    models = sorted(glob.glob(os.path.join(tag, "*model_states.pt")))
    optims = sorted(glob.glob(os.path.join(tag, "*optim_states.pt")))
    if action == "payload-model":
        edit(models[0], lambda d: d.__setitem__("ckptdoc_payload", Payload()))
    elif action == "huge-counts":
        huge = 2**31 - 1
        for m in models:
            edit(m, lambda d: d.__setitem__("dp_world_size", huge))
        for o in optims:
            def claim(d):
                osd = d["optimizer_state_dict"]
                pc = osd["partition_count"]
                osd["partition_count"] = [huge] * len(pc) if isinstance(pc, (list, tuple)) else huge
            edit(o, claim)
    elif action in ("drop-moment", "shrink-moment"):
        rank, key = int(sys.argv[3]), sys.argv[4]
        victim = [o for o in optims if f"zero_pp_rank_{rank}_" in os.path.basename(o)]
        if len(victim) != 1:
            sys.exit(f"hostile_edit.py: no optimizer file of rank {rank}")

        def state_of(d):
            osd = d["optimizer_state_dict"]
            inner = osd.get("base_optimizer_state", osd.get("optimizer_state_dict"))
            return inner["state"]

        def drop(d):
            for entry in state_of(d).values():
                entry.pop(key)

        def shrink(d):
            st = state_of(d)
            g0 = sorted(st.keys())[0]
            st[g0][key] = st[g0][key].flatten()[:1].clone()
        edit(victim[0], drop if action == "drop-moment" else shrink)
    elif action in ("fp32-half", "fp32-double", "strided-fp32"):
        rank = int(sys.argv[3])
        victim = [o for o in optims if f"zero_pp_rank_{rank}_" in os.path.basename(o)]

        def convert(t):
            if action == "fp32-half":
                return t.detach().half()
            if action == "fp32-double":
                return t.detach().double()
            wide = torch.stack([t.detach(), torch.zeros_like(t)], dim=1)  # every other element of a bigger storage
            return wide[:, 0]

        def masters(d):
            osd = d["optimizer_state_dict"]
            key = "single_partition_of_fp32_groups" if "single_partition_of_fp32_groups" in osd else "fp32_flat_groups"
            osd[key] = [convert(t) for t in osd[key]]
        edit(victim[0], masters)
    elif action == "drop-weight":
        edit(models[0], lambda d: d["module"].pop(sys.argv[3]))
    else:
        sys.exit(f"hostile_edit.py: unknown action {action}")


if __name__ == "__main__":
    main()
