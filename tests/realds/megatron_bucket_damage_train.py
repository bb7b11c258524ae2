#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): megatron_bucket_small_train.py's bucket-space save (tp 1 x dp 2,
overlap_grad_reduce, --bucket-size N: 10 buckets cut at the DP shards) with one fault that megatron-core itself writes
into one param's slice of the buckets (test_realds_megatron bucketSpaceFaultsNameTheParam):

--damage nan PARAM: the first element of PARAM's gradient (its DDP main_grad) is NaN before each step. bf16 without a
  loss scale has no grad scaler (megatron-core 0.16.1 optimizer/__init__.py:420-440), so nothing checks the
  gradients for inf/NaN, and the clip factor of a NaN norm is not < 1 (nothing is scaled): megatron-core's Adam
  carries the NaN into that element's fp32 main, exp_avg and exp_avg_sq, and its copy of the mains into the bf16
  weight. Every other element is the healthy run's.
--damage negative_sq PARAM: after the steps, just before the save, the first element of PARAM's exp_avg_sq is set
  to -1e-6 in the optimizer state of the DP rank whose shard holds it (DistributedOptimizer's
  _get_model_param_range_map): a value no Adam step writes (a running mean of squares), which megatron-core's
  dp_reshardable save then writes into that param's slice of the bucket's exp_avg_sq.

PARAM is a name of GPTModel.named_parameters() ("decoder.layers.1.mlp.linear_fc2.weight"). run.json (--json) gains
damage = {kind, param, ranks: the DP ranks whose shard held the damaged element}.

usage: launch.py --world 2 -- megatron_bucket_damage_train.py --damage nan|negative_sq PARAM --bucket-size N
       (megatron_optim_train.py's other arguments)
"""
import json
import sys

import torch
import torch.distributed as dist

import megatron_bucket_small_train as small
import megatron_optim_train as trainer

trainer.SHARDED_SD_METADATA = dict(trainer.SHARDED_SD_METADATA, distrib_optim_sharding_type="dp_reshardable")

DAMAGE = {}  # kind, param, and on this rank: whether its shard held the damaged element


def model_param(opt, name):
    """The model param named `name` (DDP's and Float16Module's "module." prefixes dropped)."""
    for chunk in opt.model_chunks:
        for n, p in chunk.named_parameters():
            while n.startswith("module."):
                n = n[len("module."):]
            if n == name:
                return p
    raise SystemExit(f"no param {name}")


def holds_first_element(opt, p):
    """Whether this DP rank's shard of `p` starts at the param's element 0."""
    if p not in opt.model_param_gbuf_map:
        return False
    r = opt._get_model_param_range_map(p)["param"]
    return r.start == 0 and r.size > 0


def nan_gradient():
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer
    plain = DistributedOptimizer.prepare_grads

    def prepare_grads(self):
        p = model_param(self, DAMAGE["param"])
        p.main_grad.view(-1)[0] = float("nan")  # every replica's gradient: the shard's owner steps on it
        DAMAGE["held"] = holds_first_element(self, p)
        return plain(self)
    DistributedOptimizer.prepare_grads = prepare_grads


def negative_exp_avg_sq():
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer
    plain = DistributedOptimizer.sharded_state_dict

    def sharded_state_dict(self, *args, **kwargs):
        p = model_param(self, DAMAGE["param"])
        DAMAGE["held"] = holds_first_element(self, p)
        if DAMAGE["held"]:
            for models, mains in zip(self.model_float16_groups, self.shard_fp32_from_float16_groups):
                for model, main in zip(models, mains):
                    if model is p:
                        self.optimizer.state[main]["exp_avg_sq"].view(-1)[0] = -1e-6
        return plain(self, *args, **kwargs)
    DistributedOptimizer.sharded_state_dict = sharded_state_dict


def record(run_json):
    """run.json's damage: which DP ranks held the damaged element (rank 0 wrote run.json in trainer.main)."""
    held = [None] * dist.get_world_size()
    dist.all_gather_object(held, bool(DAMAGE.get("held")))
    if dist.get_rank() == 0 and run_json:
        with open(run_json) as f:
            run = json.load(f)
        run["damage"] = dict(kind=DAMAGE["kind"], param=DAMAGE["param"], ranks=[r for r, h in enumerate(held) if h])
        with open(run_json, "w") as f:
            json.dump(run, f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    at = sys.argv.index("--damage")
    DAMAGE.update(kind=sys.argv[at + 1], param=sys.argv[at + 2])
    del sys.argv[at:at + 3]
    at = sys.argv.index("--bucket-size")
    small.small_buckets(int(sys.argv[at + 1]))
    del sys.argv[at:at + 2]
    {"nan": nan_gradient, "negative_sq": negative_exp_avg_sq}[DAMAGE["kind"]]()
    trainer.main()
    record(sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None)
