#!/usr/bin/env python3
"""`python run.py SCRIPT [ARGS...]` does what `python SCRIPT [ARGS...]` does, as a fork of a judge zygote
(zygote.py) that imported torch (and, for the Debian stack, DeepSpeed) once, so that a single-process judge script
(ds_load_check.py's parent, the tests' compare and probe scripts) does not pay those imports on each call. With
CKPTDOC_JUDGE_ZYGOTE=0, or when no zygote can start, the script runs in this process."""
import os
import sys

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    import zygote  # this folder is sys.path[0]

    if os.environ.get("CKPTDOC_JUDGE_ZYGOTE", "1") != "0":
        rc = zygote.call(sys.argv[1:], mode="script")
        if rc is not None:
            sys.exit(rc)
    zygote.run_script(sys.argv[1:])  # here, as the zygote's child would
