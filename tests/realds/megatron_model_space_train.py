#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): megatron_optim_train.py's run with the DistributedOptimizer's
state saved as param_state_sharding_type "fully_sharded_model_space" (optimizer.state.fp32_param.<key> and the
moments, each rank's flattened range of every param). megatron-core up to 0.15 saves such ranges in an
"nd-flattened" layout and records each key's original shape in its MCoreMetadata's mcore_data
(nd_reformulated_orig_global_shape, dist_checkpointing/strategies/torch.py).

With --mode finetune --load DIR: megatron_bucket_finetune_train.py's stale save (the model loaded, the mains left at
their initial values, a fresh Adam state filled before the save).

usage: launch.py --world W -- megatron_model_space_train.py (megatron_optim_train.py's arguments)
"""
import sys

import megatron_bucket_finetune_train as bucket_finetune
import megatron_optim_train as trainer

trainer.SHARDED_SD_METADATA = dict(trainer.SHARDED_SD_METADATA, distrib_optim_sharding_type="fully_sharded_model_space")

if __name__ == "__main__":
    if "finetune" in sys.argv:
        bucket_finetune.fresh_adam_state_before_save()
    trainer.main()
