#!/usr/bin/env python3
"""The shared harness's ds_load_check.py, run by a judge venv's python (DeepSpeed 0.19 on torch 2).

usage: <venv>/bin/python load_check.py ARGS   (ARGS as for ds_load_check.py; $CKPTDOC_HARNESS = the harness)

ds_load_check.py starts its ranks through the launch.py beside it, which runs them with Debian's python and
DeepSpeed from $DS_SRC. This wrapper imports it unchanged and points it at judge/launch.py instead (same
environment, the venv's python, DeepSpeed from the venv). The ranks then run ds_load_check.py itself.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
harness = os.environ.get("CKPTDOC_HARNESS", "")
if not os.path.isfile(os.path.join(harness, "ds_load_check.py")):
    sys.exit(f"load_check.py: CKPTDOC_HARNESS={harness!r} does not hold ds_load_check.py")
sys.path.insert(0, harness)
import ds_load_check  # noqa: E402

ds_load_check.HERE = HERE  # where it looks for launch.py
sys.exit(ds_load_check.main())
