#!/usr/bin/python3
"""Judge of `ckptdoc export` of a Megatron-core iteration folder whose run recorded megatron-core's own model keys
(megatron_moe_train.py's model_keys.json: the ShardedTensor keys of model.sharded_state_dict()): the exported
safetensors must hold exactly those names, each tensor bit for bit what torch's dcp_to_torch_save reads for it.

  megatron_export_check.py EXPORTED.safetensors ITERATION_DIR MODEL_KEYS_JSON     (the judges' venv python)

Prints one JSON line {ok, tensors, missing, extra, differ}; exit 1 on any difference.
"""
import json
import os
import sys
import tempfile

import torch
from safetensors.torch import load_file
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save


def main():
    exported, iter_dir, keys_json = sys.argv[1:4]
    model = set(json.load(open(keys_json)))
    got = load_file(exported)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "all.pt")
        dcp_to_torch_save(iter_dir, path)
        ref = torch.load(path, weights_only=False)
    missing = sorted(model - set(got))
    extra = sorted(set(got) - model)
    differ = sorted(k for k in model & set(got) if not (got[k].dtype == ref[k].dtype and torch.equal(got[k], ref[k])))
    ok = not missing and not extra and not differ
    print(json.dumps(dict(ok=ok, tensors=len(got), model_keys=len(model), missing=missing, extra=extra[:5],
                          extra_count=len(extra), differ=differ)))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
