#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): megatron_bucket_finetune_train.py's --finetune-style run (the
model's weights loaded from --load, the DistributedOptimizer's fp32 main params left at their initial values, no
reload_model_params, Megatron-LM #174; saved at iteration 0 before a step, torch's Adam state filled as a fresh
one's) saved with megatron_optim_train.py's own param_state_sharding_type "fully_reshardable": the
optimizer.state.param.<key> tensors hold stale mains.

usage: launch.py --world 2 -- megatron_distopt_finetune_train.py --mode finetune --optimizer distributed --load DIR
       (megatron_optim_train.py's other arguments)
"""
import megatron_bucket_finetune_train as bucket_finetune
import megatron_optim_train as trainer

if __name__ == "__main__":
    assert trainer.SHARDED_SD_METADATA["distrib_optim_sharding_type"] == "fully_reshardable"
    bucket_finetune.fresh_adam_state_before_save()
    trainer.main()
