#!/usr/bin/python3
"""megatron-core's own verdict on an iteration folder's integrity.json: verify_integrity_manifest, what
load(..., verify_integrity=True) runs first (megatron/core/dist_checkpointing/validation.py, >= 0.18). One
process, no torch.distributed. Prints JSON {"megatron_core", "ok", "error"} (the exception's text names each
failing file).

usage: realds.py py --ds 0.19 --mcore 0.18.0 -- megatron_integrity_verify.py ITERATION_DIR
"""
import json
import sys
import warnings

with warnings.catch_warnings():  # Transformer Engine and Apex are absent: not used
    warnings.simplefilter("ignore")
    import megatron.core
    from megatron.core.dist_checkpointing.core import CheckpointingException
    from megatron.core.dist_checkpointing.validation import verify_integrity_manifest

try:
    verify_integrity_manifest(sys.argv[1])
    out = dict(ok=True, error="")
except CheckpointingException as e:
    out = dict(ok=False, error=str(e))
except ValueError as e:  # json.JSONDecodeError: the manifest is not JSON
    out = dict(ok=False, error=f"{type(e).__name__}: {e}")
print(json.dumps(dict(out, megatron_core=megatron.core.__version__)))
