# The baseline of bench_dcp_diagnose.sh: torch reads every item of a DCP checkpoint in one process (the load
# half of format_utils.dcp_to_torch_save, without its write) and counts NaN/Inf, as ckptdoc diagnose does.
#   dcp_read_reference.py DIR
import sys
import time

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.format_utils import _EmptyStateDictLoadPlanner
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

start = time.time()
state = {}
_load_state_dict(state, storage_reader=dcp.FileSystemReader(sys.argv[1]), planner=_EmptyStateDictLoadPlanner(),
                 no_dist=True)
non_finite, work = 0, [state]
while work:
    x = work.pop()
    if isinstance(x, dict):
        work.extend(x.values())
    elif isinstance(x, torch.Tensor) and x.is_floating_point():
        non_finite += int((~torch.isfinite(x)).sum())
print(f"torch read {time.time() - start:.2f} s, {non_finite} non-finite")
