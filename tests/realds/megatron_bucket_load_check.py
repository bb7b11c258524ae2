#!/usr/bin/python3
"""Per-rank judge (started by the judges' launch.py): megatron-core's own resume of a bucket-space (dp_reshardable)
Megatron-core save, as Megatron-LM's load_checkpoint does it with the DistributedOptimizer: a fresh bf16 model
(megatron_optim_train.py's, its CPU shims), DistributedDataParallel and DistributedOptimizer with torch's Adam;
dist_checkpointing.load of model.sharded_state_dict() and optimizer.sharded_state_dict(is_loading=True) with the
dp_reshardable metadata, then load_state_dict on both. A new DistributedOptimizer holds no torch state yet and its
state_dict() asserts one step (distrib_optimizer.py:642), so it is filled first with its own
_init_optimizer_states_with_dummy_values (what its load_parameter_state does, distrib_optimizer.py:1357).

Per folder it says what the load left in the inner torch Adam (adam_state: the moments' largest |value|, the
per-param step values), the steps of the param groups megatron-core read from the save (group_steps) and the fp32
main params, and which of them (every rank's, "tp<r>:<name>") round to their loaded bf16 weights (mains_equal_weights)
or not (mains_differ). Measured with 0.16.1 on the CPU (torch's Adam, no Apex/TE): the per-param step after this resume is
the dummy initialisation's 1.0 whatever the save's param groups hold (2.0 in the input), so the step is judged
in group_steps, and a fresh-step comparison (--fresh-step-check) cannot tell a reset from a resume here; with two folders (--ckpt IN --ckpt OUT) mains_equal counts the mains that are
bit-identical between the two loads (each folder loaded into its own fresh model and optimizer). Then the last
folder's optimizer takes one step (synthetic gradients: the forward needs CUDA) and, with --fresh-step-check, the
step is judged against a fresh torch Adam (megatron_load_check.py's fresh_step_check: bit-identical results count).

A pipeline save (--pp N, with --tied for word embeddings shared with the output layer: megatron_bucket_map_probe.py
--train's saves) is resumed as it was trained: each rank one stage's GPTModel (pre_process / post_process), names
then "pp<s>tp<r>:<name>" (each stage numbers its layers from 0), the tied weight's all-reduce kept on the CPU.

--sharding fully_reshardable resumes megatron_optim_train.py's model-space layout (optimizer.state.{param,exp_avg,
exp_avg_sq}.<key>) the same way, with one shim for a megatron-core bug (load_only_the_loaded_state_keys: without it
0.16.1 and 0.18.0 raise KeyError 'step' with torch's Adam); the JSON's load_shim says so.

A mixture-of-experts save (--experts N --ep E: megatron_moe_train.py's) is resumed with the same MoE layers and expert
parallel size; its mains are those of both DistributedOptimizers of the ChainedOptimizer (dense and expert), the
expert params named "ep<e>tp<r>:...local_experts.<j>..." (each expert rank holds its own experts).

usage: launch.py --world 2 -- megatron_bucket_load_check.py --ckpt ITERATION_DIR [--ckpt ...] [--fresh-step-check]
       [--tp 2] [--pp 1 [--tied]] [--bucket-size N] [--experts N --ep E]
       [--sharding dp_reshardable|fully_reshardable] --json OUT
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_load_check as load_check  # noqa: E402 - adam_state, fresh_step_check
import megatron_optim_train as trainer  # noqa: E402 - its CPU shims and the model it saves

METADATA = dict(trainer.SHARDED_SD_METADATA, distrib_optim_sharding_type="dp_reshardable")


def load_only_the_loaded_state_keys():
    """megatron-core's fully_reshardable load with torch's Adam (no Apex/TE) raises KeyError 'step' in 0.16.1 and
    0.18.0: load_parameter_state_from_fully_reshardable (distrib_optimizer.py:2100 in 0.16.1) leaves "step" out of the
    tensors it hands on ("Handle torch Adam 'step' state separately": load_state_dict has set each param's step from
    the param groups, distrib_optimizer.py:836), and _set_main_param_and_optimizer_states (line 940) copies every key
    of torch's state, step included. Here it copies the keys it is handed: the state keys it is not handed are
    set aside for the call and put back, so the step stays what megatron-core set."""
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer
    plain = DistributedOptimizer._set_main_param_and_optimizer_states

    def set_handed_keys(self, model_param, tensors):
        group_index, group_order = self.model_param_group_index_map[model_param]
        state = self.optimizer.state[self.optimizer.param_groups[group_index]["params"][group_order]]
        aside = {k: state.pop(k) for k in list(state) if k not in tensors}
        try:
            plain(self, model_param, tensors)
        finally:
            state.update(aside)

    DistributedOptimizer._set_main_param_and_optimizer_states = set_handed_keys


def resume(ckpt, tp, mode, bucket_size=None, pp=1, tied=False, metadata=METADATA):
    from megatron.core import dist_checkpointing, parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig
    torch.manual_seed(5)  # not the save's seed: nothing may match by chance
    cfg = TransformerConfig(num_layers=2, hidden_size=16, num_attention_heads=4, ffn_hidden_size=32,
                            use_cpu_initialization=True, params_dtype=torch.bfloat16, bf16=True,
                            perform_initialization=True,
                            **(dict(pipeline_model_parallel_size=pp, pipeline_dtype=torch.bfloat16) if pp > 1 else {}))
    stages = dict(share_embeddings_and_output_weights=tied, pre_process=parallel_state.is_pipeline_first_stage(),
                  post_process=parallel_state.is_pipeline_last_stage()) if pp > 1 or tied else {}
    gpt = GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=64,
                   max_sequence_length=8, **stages)
    # the save's bucket layout (megatron_bucket_small_train.py): megatron-core asserts the same
    # per_bucket_numel_unpadded on load
    small = dict(overlap_grad_reduce=True, bucket_size=bucket_size) if bucket_size else {}
    ddp = DistributedDataParallel(cfg, DistributedDataParallelConfig(use_distributed_optimizer=True,
                                                                     grad_reduce_in_fp32=True, **small),
                                  Float16Module(cfg, gpt))
    opt = get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True,
                                                 use_distributed_optimizer=True), [ddp])
    for o in getattr(opt, "chained_optimizers", [opt]):
        o._init_optimizer_states_with_dummy_values()
    model_sd = gpt.sharded_state_dict(metadata=metadata)
    request = {"model": model_sd, "optimizer": opt.sharded_state_dict(model_sd, is_loading=True, metadata=metadata)}
    if mode is not None:  # the load's reader may spawn: nothing of the mode in the way
        mode.__exit__(None, None, None)
    loaded = dist_checkpointing.load(request, ckpt)
    if mode is not None:
        mode.__enter__()
    states = loaded["optimizer"]  # a ChainedOptimizer's (experts): {index: each optimizer's}
    states = list(states.values()) if "optimizer" not in states else [states]
    group_steps = sorted({float(g["step"]) for st in states for g in st["optimizer"]["param_groups"]})
    gpt.load_state_dict(loaded["model"])
    opt.load_state_dict(loaded["optimizer"])
    return gpt, opt, group_steps


def mains(opt):
    return [p.detach().clone() for inner in load_check.inner_optimizers(opt) for g in inner.param_groups
            for p in g["params"]]


def mains_vs_weights(gpt, opt):
    """Which of this rank's fp32 mains, as megatron-core's own resume placed them from the buckets, round to their
    loaded bf16 weights (healthy) and which do not (stale): each main is the shard of its param this DP rank owns
    (_get_model_param_range_map)."""
    from megatron.core import parallel_state
    names = {p: n for n, p in gpt.named_parameters()}
    tp = parallel_state.get_tensor_model_parallel_rank()
    where = f"tp{tp}" if parallel_state.get_pipeline_model_parallel_world_size() == 1 else \
        f"pp{parallel_state.get_pipeline_model_parallel_rank()}tp{tp}"
    equal, differ = [], []
    for o in getattr(opt, "chained_optimizers", [opt]):
        for model_group, main_group in zip(o.model_float16_groups, o.shard_fp32_from_float16_groups):
            for p, main in zip(model_group, main_group):
                r = o._get_model_param_range_map(p)["param"]
                weight = p.detach().view(-1)[r.start:r.end]
                # an expert-parallel param (allreduce False) is its expert rank's own: local_experts.<j> there
                ep = "" if getattr(p, "allreduce", True) else \
                    f"ep{parallel_state.get_expert_model_parallel_rank()}"
                (equal if torch.equal(main.to(p.dtype), weight) else differ).append(f"{ep}{where}:{names[p]}")
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (equal, differ))
    # a param split over DP ranks is one name: it rounds to its weight when every shard of it does
    differ = {n for _, d in gathered for n in d}
    return sorted({n for e, _ in gathered for n in e} - differ), sorted(differ)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True, action="append")
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--fresh-step-check", action="store_true")
    ap.add_argument("--bucket-size", type=int, default=None)  # a megatron_bucket_small_train.py save's
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--experts", type=int, default=None)  # a megatron_moe_train.py save's
    ap.add_argument("--ep", type=int, default=1)
    # the save's param_state_sharding_type: megatron_optim_train.py's saves are fully_reshardable
    ap.add_argument("--sharding", choices=("dp_reshardable", "fully_reshardable", "fully_sharded_model_space"),
                    default="dp_reshardable")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    notes = {}
    if a.sharding != "dp_reshardable":  # the same KeyError in 0.15.3's load_parameter_state_from_fs_model_space
        load_only_the_loaded_state_keys()
        notes["load_shim"] = (f"{a.sharding}: _set_main_param_and_optimizer_states copies only the keys "
                              "megatron-core's load hands it (not 'step': KeyError otherwise)")
    if a.experts:
        import megatron_moe_train as moe
        moe.with_experts(a.experts, a.ep, None)
    mode = trainer.cpu_shims(notes)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    from megatron.core import parallel_state
    # (with --experts, megatron_moe_train.with_experts adds the expert parallel size here and to the config)
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=a.tp, pipeline_model_parallel_size=a.pp)
    if a.tied and not torch.cuda.is_available():  # language_module.py moves the tied weight with .cuda() to all-reduce it
        torch.Tensor.cuda = lambda self, *args, **kwargs: self

    results, loaded_mains = {}, []
    for ckpt in a.ckpt:
        gpt, opt, group_steps = resume(ckpt, a.tp, mode, a.bucket_size, a.pp, a.tied,
                                       dict(METADATA, distrib_optim_sharding_type=a.sharding))
        loaded_mains.append(mains(opt))
        equal, differ = mains_vs_weights(gpt, opt)
        results[ckpt] = dict(adam_state=load_check.adam_state(opt), mains=len(loaded_mains[-1]),
                             group_steps=group_steps, mains_equal_weights=equal, mains_differ=differ)
    mains_equal = None
    if len(loaded_mains) == 2:
        mains_equal = sum(torch.equal(x, y) for x, y in zip(*loaded_mains))
    for p in gpt.parameters():
        p.main_grad.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(300)) * 1e-2)
    before = load_check.mains_before_step(opt)
    step = opt.step()
    fresh = load_check.fresh_step_check(opt, before) if a.fresh_step_check else None
    if rank == 0:
        import megatron.core
        with open(a.json, "w") as f:
            json.dump(dict(notes, megatron_core=megatron.core.__version__, loads=results, mains_equal=mains_equal,
                           step=repr(step), step_ok=bool(step[0]), fresh_step=fresh), f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
