#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): megatron_bucket_train.py's bucket-space save
(param_state_sharding_type "dp_reshardable") of megatron_optim_train.py's --mode finetune run: the model's weights
loaded from --load, the DistributedOptimizer's fp32 main params left at their initial values (no
reload_model_params, Megatron-LM #174), saved at iteration 0 before a step: the `param` buckets hold stale mains.

torch's Adam (no Apex/TE on the CPU) has no state before a step, and DistributedOptimizer.state_dict asserts one
(megatron-core 0.16.1 optimizer/distrib_optimizer.py:642). The state is filled as a fresh Adam's (step 0, zero
moments) just before the save, without touching the mains (tests/realds/megatron_bucket_map_probe.py --train does
the same for its save B).

usage: launch.py --world 2 -- megatron_bucket_finetune_train.py --mode finetune --load DIR (megatron_optim_train.py's
       other arguments)
"""
import torch

import megatron_optim_train as trainer


def fresh_adam_state_before_save():
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer
    plain_state_dict = DistributedOptimizer.state_dict

    def state_dict(self):
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                if not self.optimizer.state[p]:
                    self.optimizer.state[p] = dict(step=torch.tensor(0.0), exp_avg=torch.zeros_like(p),
                                                   exp_avg_sq=torch.zeros_like(p))
        return plain_state_dict(self)
    DistributedOptimizer.state_dict = state_dict


if __name__ == "__main__":
    # set here, not on import: megatron_distopt_finetune_train.py imports fresh_adam_state_before_save and keeps
    # megatron_optim_train.py's fully_reshardable
    trainer.SHARDED_SD_METADATA = dict(trainer.SHARDED_SD_METADATA, distrib_optim_sharding_type="dp_reshardable")
    fresh_adam_state_before_save()
    trainer.main()
