#!/usr/bin/python3
"""Per-rank driver: accelerate_fsdp_train.py with the FSDP plugin's state_dict_type FULL_STATE_DICT, so that
accelerator.save_state writes pytorch_model_fsdp.bin (the full model state dict, torch.save) and optimizer.bin
(the full optimizer state dict keyed by the params' FQNs) beside scheduler.bin and random_states_<rank>.pkl
(Accelerate 1.16, utils/fsdp_utils.py save_fsdp_model / save_fsdp_optimizer).

The plugin is Accelerate's own; only its state_dict_type argument is replaced before the driver builds it, so
the two saves come from one training script.

usage: launch.py --world 2 -- accelerate_fsdp_full_train.py --out SAVE_DIR [accelerate_fsdp_train.py args]
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
sys.argv[0] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "accelerate_fsdp_train.py")
runpy.run_path(sys.argv[0], run_name="__main__")
