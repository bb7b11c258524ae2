# A large FSDP2 Distributed Checkpoint for bench_dcp_diagnose.sh: LAYERS Linear(4096, 4096) fp32 sharded with
# fully_shard over 2 CPU processes (gloo), one Adam step, saved with dcp.save (weights + exp_avg + exp_avg_sq:
# 5 layers ~ 1 GB). Run under torch.distributed.run --nproc_per_node 2.
#   dcp_bench_checkpoint.py OUT_DIR [LAYERS]
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")
torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 5)])
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
for layer in model:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
optim = torch.optim.Adam(model.parameters(), lr=1e-4)
model(torch.randn(2, 4096)).pow(2).mean().backward()
optim.step()
model_sd, optim_sd = get_state_dict(model, optim, options=StateDictOptions(flatten_optimizer_state_dict=True))
state = dict(model_sd)
state["optimizer"] = optim_sd
dcp.save(state, checkpoint_id=sys.argv[1])
dist.destroy_process_group()
