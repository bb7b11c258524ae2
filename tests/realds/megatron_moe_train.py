#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): megatron_optim_train.py's run with mixture-of-experts MLPs
(megatron-core's MoELayer from get_gpt_layer_local_spec(num_experts=N): a TopKRouter and SequentialMLP experts) and
--ep expert-parallel ranks, its DistributedOptimizer's state saved in bucket space (dp_reshardable, Megatron-LM's
default). megatron-core makes the dense params and the experts two DistributedOptimizers in a ChainedOptimizer.
Only the model, optimizer and save are built: the forward needs CUDA (megatron_optim_train.py), so the gradients
are synthetic there too. With --mode finetune --load DIR: megatron_bucket_finetune_train.py's stale save.

The keys of megatron-core's own model.sharded_state_dict() (its ShardedTensors: what a weight export holds) are
written to model_keys.json beside --out by rank 0, as megatron-core's truth of which saved tensors are the model.

usage: launch.py --world W -- megatron_moe_train.py --experts N --ep E [--bucket-size N] (megatron_optim_train.py's
       arguments)
"""
import sys

import megatron_bucket_finetune_train as finetune
import megatron_optim_train as trainer

trainer.SHARDED_SD_METADATA = dict(trainer.SHARDED_SD_METADATA, distrib_optim_sharding_type="dp_reshardable")


def take(flag, default=None):
    if flag not in sys.argv:
        return default
    at = sys.argv.index(flag)
    value = sys.argv[at + 1]
    del sys.argv[at:at + 2]
    return int(value)


def with_experts(experts, ep, bucket_size):
    import megatron.core.distributed as mcd
    import megatron.core.models.gpt.gpt_layer_specs as specs
    import megatron.core.transformer.transformer_config as tc
    from megatron.core import parallel_state
    plain_init, plain_cfg, plain_spec = parallel_state.initialize_model_parallel, tc.TransformerConfig, \
        specs.get_gpt_layer_local_spec
    parallel_state.initialize_model_parallel = lambda **kw: plain_init(**kw, expert_model_parallel_size=ep)
    # the expert parallel size in the config too, else the experts are not marked expert-parallel (one optimizer);
    # the allgather dispatcher: alltoall's makes a CUDA stream (moe/token_dispatcher.py:445)
    tc.TransformerConfig = lambda **kw: plain_cfg(**kw, num_moe_experts=experts, moe_router_topk=2,
                                                  expert_model_parallel_size=ep, moe_token_dispatcher_type="allgather")
    specs.get_gpt_layer_local_spec = lambda **kw: plain_spec(**kw, num_experts=experts)
    if bucket_size:
        plain = mcd.DistributedDataParallelConfig
        mcd.DistributedDataParallelConfig = lambda **kw: plain(**kw, overlap_grad_reduce=True, bucket_size=bucket_size)


def model_keys_beside(out):
    """dist_checkpointing.save, first writing the model's ShardedTensor keys to <out>/../model_keys.json."""
    import json
    import os

    import megatron.core.dist_checkpointing as dc
    import torch.distributed as dist
    from megatron.core.dist_checkpointing.mapping import ShardedTensor
    plain_save = dc.save

    def keys(tree):
        items = tree.values() if isinstance(tree, dict) else tree if isinstance(tree, list) else []
        for v in items:
            if isinstance(v, ShardedTensor):
                yield v.key
            else:
                yield from keys(v)

    def save(state, *args, **kwargs):
        if dist.get_rank() == 0:
            with open(os.path.join(os.path.dirname(os.path.abspath(out)), "model_keys.json"), "w") as f:
                json.dump(sorted(set(keys(state["model"]))), f, indent=1)
        return plain_save(state, *args, **kwargs)
    dc.save = save


if __name__ == "__main__":
    with_experts(take("--experts", 4), take("--ep", 1), take("--bucket-size"))
    model_keys_beside(sys.argv[sys.argv.index("--out") + 1])
    if "finetune" in sys.argv:
        finetune.fresh_adam_state_before_save()
    trainer.main()
