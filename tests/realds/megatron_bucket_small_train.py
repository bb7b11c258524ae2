#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): megatron_bucket_train.py's bucket-space save
(param_state_sharding_type "dp_reshardable") with DistributedDataParallelConfig's overlap_grad_reduce on and a small
bucket_size (--bucket-size N elements), so that the tiny model's params spread over many buckets, each bucket
split over the DP ranks (world 2 at --tp 1: dp 2). With --mode finetune --load DIR: megatron_bucket_finetune_train.py's
stale save (the model loaded, the fp32 mains left at their initial values, saved before a step).

usage: launch.py --world 2 -- megatron_bucket_small_train.py --bucket-size N (megatron_optim_train.py's arguments)
"""
import sys

import megatron_bucket_finetune_train as finetune
import megatron_optim_train as trainer

trainer.SHARDED_SD_METADATA = dict(trainer.SHARDED_SD_METADATA, distrib_optim_sharding_type="dp_reshardable")


def small_buckets(bucket_size):
    import megatron.core.distributed as mcd
    plain = mcd.DistributedDataParallelConfig

    def config(**kw):
        return plain(**kw, overlap_grad_reduce=True, bucket_size=bucket_size)
    mcd.DistributedDataParallelConfig = config


if __name__ == "__main__":
    at = sys.argv.index("--bucket-size")
    small_buckets(int(sys.argv[at + 1]))
    del sys.argv[at:at + 2]
    if "finetune" in sys.argv:
        finetune.fresh_adam_state_before_save()
    trainer.main()
