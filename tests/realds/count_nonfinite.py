#!/usr/bin/python3
"""Prints, as JSON, the NaN and Inf counts of every tensor of a torch.save state dict (loaded weights_only):
{"name": {"nan": N, "inf": M, "numel": K}, ...}. The reference an export's own count is held against.

  count_nonfinite.py FILE
"""
import json
import sys

import torch

sd = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
print(json.dumps({k: {"nan": int(torch.isnan(t).sum()), "inf": int(torch.isinf(t).sum()), "numel": t.numel()}
                  for k, t in sd.items()}))
