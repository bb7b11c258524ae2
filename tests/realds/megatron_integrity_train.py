#!/usr/bin/python3
"""Per-rank driver: megatron_train.py's save with verify_integrity=True, as Megatron-LM's --verify-integrity
passes it to dist_checkpointing.save (megatron/training/checkpointing.py), so megatron-core >= 0.18 writes
integrity.json (dist_checkpointing/validation.py save_integrity_manifest: rank 0, after every other file).
The megatron-core release comes from PYTHONPATH (realds.py's "mcore" entries, installed by
scripts/setup-judges.sh beside the judges' venv, which keeps its own 0.16.1).

usage: launch.py --world 2 -- megatron_integrity_train.py --out SAVE --tp 2 [--steps 2] [--json RUN_JSON]
"""
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from megatron.core import dist_checkpointing  # noqa: E402

import megatron_train  # noqa: E402

# megatron_train.main() looks the function up on the module at the call
dist_checkpointing.save = functools.partial(dist_checkpointing.save, verify_integrity=True)

if __name__ == "__main__":
    megatron_train.main()
