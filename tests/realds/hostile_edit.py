#!/usr/bin/python3
"""Edits a copy of a real DeepSpeed checkpoint into what a hostile or corrupted one looks like, with torch.load /
torch.save (run it through `realds.py py` so DeepSpeed's own classes unpickle and pickle as they are).

  hostile_edit.py SAVE_DIR ACTION

Actions:
  payload-model   the model-states file gains an entry whose unpickling calls os.system('true') (the classic
                  __reduce__ payload; Python pickles it as posix.system)
  huge-counts     every file claims dp_world_size and partition_count 2147483647
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
    if len(sys.argv) != 3:
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
    else:
        sys.exit(f"hostile_edit.py: unknown action {action}")


if __name__ == "__main__":
    main()
