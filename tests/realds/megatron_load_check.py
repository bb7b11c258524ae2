#!/usr/bin/python3
"""Per-rank judge (started by the judges' launch.py): megatron-core's own load of a Megatron-core save into a fresh
bf16 model and its non-distributed optimizer (Float16OptimizerWithFloat16Params, megatron_optim_train.py's CPU
shims), as a resume that loads the optimizer does: dist_checkpointing.load of model.sharded_state_dict() and
optimizer.sharded_state_dict(is_loading=True), then load_state_dict on both. Then it says, per param, whether the
fp32 main the optimizer now holds rounds to its bf16 weight (mains_equal_weights) or is its exact upcast
(mains_upcast, what ckptdoc repair --refresh-fp32 writes), and takes one optimizer step (synthetic
gradients, as the forward needs CUDA).

Per load it also says what the optimizer's torch Adam state holds (adam_state: the moments' largest |value|, the
step values), and with --fresh-step-check the one step is judged against a fresh torch Adam: every main param of
the inner torch optimizer is cloned before the step, and a new torch.optim.Adam with the group's own
hyperparameters and no state (step 0, zero moments) steps the clone with the gradient megatron-core's step used;
fresh_step says how many results are bit-identical (what a reset to a fresh optimizer's state gives, a resume
does not). megatron-core's optimizer steps on the CPU here (cpu_shims); only the forward needs CUDA.

Only the non-distributed optimizer is loaded: megatron-core 0.16.1's DistributedOptimizer cannot load a
fully_reshardable save with torch's Adam (no Apex/TE, as here): a new one has no torch state and its state_dict()
asserts one step (distrib_optimizer.py:641); filled first with its own _init_optimizer_states_with_dummy_values,
the load then raises KeyError 'step' (_set_main_param_and_optimizer_states, distrib_optimizer.py:940, copies every
state key, step included, from the loaded moments; 0.18.0 the same). megatron_bucket_load_check.py --sharding
fully_reshardable loads it with one shim for that.

The optimizer's keys the save does not hold are left out of the request and said in "absent" (a save made before a
first step has no optimizer.state.exp_avg.<key> / exp_avg_sq: megatron-core's load would raise KeyError for them;
Adam starts those at zero anyway). The save's mains must be optimizer.state.fp32_param.<key> (this optimizer's
layout).

usage: launch.py --world 2 -- megatron_load_check.py --ckpt ITERATION_DIR [--ckpt ...] [--tp 2] --json OUT
(the step follows the last load; "loads" in the JSON maps each folder to what its load left)
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_optim_train as trainer  # noqa: E402 - its CPU shims and the model it saves


def drop_absent(node, present, absent):
    """Removes the ShardedTensors whose key the save does not hold, in place; their keys go to `absent`."""
    from megatron.core.dist_checkpointing.mapping import ShardedTensor
    items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
    for k, v in reversed(items):
        if isinstance(v, ShardedTensor) and v.key not in present:
            absent.add(v.key)
            del node[k]
        elif isinstance(v, (dict, list)):
            drop_absent(v, present, absent)


def inner_optimizers(opt):
    return [o.optimizer for o in getattr(opt, "chained_optimizers", [opt])]


def adam_state(opt):
    """What the torch Adam state megatron-core's load left holds: the moments' largest |value|, the steps."""
    moments, steps, params = 0.0, set(), 0
    for inner in inner_optimizers(opt):
        for group in inner.param_groups:
            for p in group["params"]:
                st = inner.state.get(p, {})
                params += 1
                for k in ("exp_avg", "exp_avg_sq"):
                    if k in st:
                        moments = max(moments, float(st[k].abs().max()))
                if "step" in st:
                    steps.add(float(st["step"]))
    return dict(params=params, moments_max_abs=moments, steps=sorted(steps))


def mains_before_step(opt):
    return [[[p.detach().clone() for p in g["params"]] for g in inner.param_groups] for inner in inner_optimizers(opt)]


def fresh_step_check(opt, before):
    """A fresh torch Adam (the group's hyperparameters, no state) steps each main from its value before
    megatron-core's step with the gradient that step used; compared bit for bit with megatron-core's result."""
    import inspect
    accepted = set(inspect.signature(torch.optim.Adam.__init__).parameters) - {"self", "params"}
    equal = differ = 0
    for inner, groups in zip(inner_optimizers(opt), before):
        for group, mains in zip(inner.param_groups, groups):
            for p, main in zip(group["params"], mains):
                if p.grad is None:
                    continue
                clone = main.clone().requires_grad_(True)
                clone.grad = p.grad.detach().clone()
                fresh = torch.optim.Adam([clone], **{k: v for k, v in group.items() if k in accepted})
                fresh.step()
                if torch.equal(clone.detach(), p.detach()):
                    equal += 1
                else:
                    differ += 1
    return dict(equal=equal, differ=differ)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True, action="append", help="an iteration folder; again for more, loaded "
                    "in turn into the same model and optimizer")
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--fresh-step-check", action="store_true")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    notes = {}
    mode = trainer.cpu_shims(notes)
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    from megatron.core import dist_checkpointing, parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig
    from torch.distributed.checkpoint import FileSystemReader

    parallel_state.initialize_model_parallel(tensor_model_parallel_size=a.tp)
    torch.manual_seed(5)  # not the save's seed: nothing may match by chance
    cfg = TransformerConfig(num_layers=2, hidden_size=16, num_attention_heads=4, ffn_hidden_size=32,
                            use_cpu_initialization=True, params_dtype=torch.bfloat16, bf16=True,
                            perform_initialization=True)
    gpt = GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=64,
                   max_sequence_length=8)
    ddp = DistributedDataParallel(cfg, DistributedDataParallelConfig(grad_reduce_in_fp32=True),
                                  Float16Module(cfg, gpt))
    opt = get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True), [ddp])

    names = {p: n for n, p in gpt.named_parameters()}
    results = {}
    for ckpt in a.ckpt:
        model_sd = gpt.sharded_state_dict()
        request = {"model": model_sd, "optimizer": opt.sharded_state_dict(model_sd, is_loading=True)}
        present = set(FileSystemReader(ckpt).read_metadata().state_dict_metadata)
        absent = set()
        drop_absent(request, present, absent)
        if mode is not None:  # the load's reader may spawn: nothing of the mode in the way
            mode.__exit__(None, None, None)
        loaded = dist_checkpointing.load(request, ckpt)
        if mode is not None:
            mode.__enter__()
        gpt.load_state_dict(loaded["model"])
        opt.load_state_dict(loaded["optimizer"])
        equal, differ, upcast = [], [], []
        for o in getattr(opt, "chained_optimizers", [opt]):
            for model_group, main_group in zip(o.float16_groups, o.fp32_from_float16_groups):
                for p, main in zip(model_group, main_group):
                    # healthy: the bf16 weight is the main's rounding (the main keeps more bits than the weight)
                    (equal if torch.equal(main.to(p.dtype), p.detach()) else differ).append(names[p])
                    if torch.equal(main, p.detach().float()):  # what a refresh from the weights leaves
                        upcast.append(names[p])
        results[ckpt] = dict(absent=sorted(absent), mains_equal_weights=sorted(equal), mains_differ=sorted(differ),
                             mains_upcast=sorted(upcast), adam_state=adam_state(opt))
    for p in gpt.parameters():
        p.main_grad.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(300)) * 1e-2)
    before = mains_before_step(opt)
    step = opt.step()
    fresh = fresh_step_check(opt, before) if a.fresh_step_check else None
    if rank == 0:
        import megatron.core
        with open(a.json, "w") as f:
            json.dump(dict(notes, megatron_core=megatron.core.__version__, loads=results, step=repr(step),
                           step_ok=bool(step[0]), fresh_step=fresh), f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
