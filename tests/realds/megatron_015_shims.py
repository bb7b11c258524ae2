#!/usr/bin/python3
"""Runs a megatron-core judge script under megatron-core 0.15.3 with two shims for what that release assumes of
its machine and numpy (started by the judges' launch.py in place of the script); neither touches the checkpoint
path:
- torch's CUDA extension builds are off (CUDA_HOME None). 0.15.3 builds a CUDA memory-pool extension when it is
  imported (inference/unified_memory.py: load_inline with CUDA_HOME found), which on a machine with a CUDA toolkit
  and no GPU dies in torch's arch detection (IndexError, uncaught) before any checkpoint code runs. With CUDA_HOME
  None the build fails as 0.15.3 expects without CUDA (OSError, caught: "Failed to create unified memory mempool.").
- numpy.product, which numpy 2 removed, is numpy.prod: 0.15.3's flattened-range validation calls it
  (dist_checkpointing/validation.py:522), and the judges' venv has numpy 2.

usage: launch.py --world W -- megatron_015_shims.py SCRIPT [SCRIPT's arguments]
"""
import os
import runpy
import sys

import numpy
import torch.utils.cpp_extension

torch.utils.cpp_extension.CUDA_HOME = None
if not hasattr(numpy, "product"):
    numpy.product = numpy.prod

if __name__ == "__main__":
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
