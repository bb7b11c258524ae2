#!/usr/bin/python3
"""Judge (one process) of the state a Megatron-core save keeps beside its sharded tensors, as megatron-core
itself reads it: dist_checkpointing.load_common_state_dict(ITERATION_DIR), which reads common.pt, or, from
megatron-core 0.19 on, the DCP's common_state item when there is no common.pt. Writes its top-level keys, its
iteration and the type of its args.

usage: realds.py py --ds 0.19 --mcore 0.19.2 -- megatron_common_check.py --ckpt ITERATION_DIR --json RESULT
"""
import argparse
import json

from megatron.core import dist_checkpointing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    state = dist_checkpointing.load_common_state_dict(a.ckpt)
    args = state.get("args")
    with open(a.json, "w") as f:
        json.dump(dict(keys=list(state), iteration=state.get("iteration"),
                       args_type=None if args is None else f"{type(args).__module__}.{type(args).__name__}"),
                  f, indent=1)


if __name__ == "__main__":
    main()
