#!/usr/bin/python3
"""Judge of ckptdoc's storage map of a legacy Megatron save (the views' Storage tab): for every model tensor the map
places, the bytes at [offset, offset + length) of its rank file are torch's load of that tensor (its bytes, as
torch.load of model_optim_rng.pt gives them). Prints {"checked": N, "equal": N, "differ": [...]}; exit 1 unless all
are equal.

usage: python megatron_legacy_storage_check.py MAP.json   (MAP: {"dir": ITERATION_DIR, "items": [{"file", "key",
       "offset", "length"}, ...]} with keys "<mp_rank folder>/model.<name>")
"""
import json
import os
import sys

import torch


def main():
    spec = json.load(open(sys.argv[1]))
    loaded, out = {}, dict(checked=0, equal=0, differ=[])
    for item in spec["items"]:
        path = os.path.join(spec["dir"], item["file"])
        if path not in loaded:
            loaded[path] = (torch.load(path, map_location="cpu", weights_only=False)["model"], open(path, "rb").read())
        model, raw = loaded[path]
        name = item["key"].split("/model.", 1)[1]
        want = model[name].contiguous().view(torch.uint8).numpy().tobytes()
        got = raw[item["offset"]:item["offset"] + item["length"]]
        out["checked"] += 1
        if got == want:
            out["equal"] += 1
        else:
            out["differ"].append(item["key"])
    print(json.dumps(out))
    return 0 if out["checked"] and not out["differ"] else 1


if __name__ == "__main__":
    sys.exit(main())
