#!/usr/bin/python3
"""Per-rank driver: accelerate_reset_check.py with the FSDP plugin's state_dict_type FULL_STATE_DICT (as
accelerate_fsdp_full_train.py saved it), so that accelerator.load_state(DIR) reads pytorch_model_fsdp.bin and the
FQN-keyed optimizer.bin (Accelerate 1.16, utils/fsdp_utils.py load_fsdp_model / load_fsdp_optimizer). The plugin
is Accelerate's own; only its state_dict_type argument is replaced before the judge builds it.

usage: launch.py --world 2 -- accelerate_full_reset_check.py DIR --json OUT
"""
import os
import runpy
import sys

import accelerate

_Plugin = accelerate.FullyShardedDataParallelPlugin


class FullStateDictPlugin(_Plugin):
    def __init__(self, *args, **kwargs):
        kwargs["state_dict_type"] = "FULL_STATE_DICT"
        super().__init__(*args, **kwargs)


accelerate.FullyShardedDataParallelPlugin = FullStateDictPlugin
sys.argv[0] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "accelerate_reset_check.py")
runpy.run_path(sys.argv[0], run_name="__main__")
