#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): megatron_optim_train.py's run, its optimizer state saved with
Megatron-LM's default param_state_sharding_type "dp_reshardable" (get_sharded_sd_metadata in
megatron/training/checkpointing.py without --dist-ckpt-optim-fully-reshardable): the DistributedOptimizer's state in
bucket space, 1-D optimizer.distributed.dp_group_idx_<i>.gbuf_idx_<g>.dtype_(...).bucket_idx_<b>.{param,exp_avg,
exp_avg_sq}, each dp group's param groups (their float step) in a ShardedObject
optimizer.distributed.dp_group_idx_<i>.optimizer. megatron-core 0.16.1 writes it on the CPU with the same shims.

usage: launch.py --world 2 -- megatron_bucket_train.py (megatron_optim_train.py's arguments)
"""
import megatron_optim_train as trainer

trainer.SHARDED_SD_METADATA = dict(trainer.SHARDED_SD_METADATA, distrib_optim_sharding_type="dp_reshardable")

if __name__ == "__main__":
    trainer.main()
