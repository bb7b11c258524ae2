#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): megatron_optim_train.py's bf16 model and DistributedOptimizer
with a virtual pipeline: --pp stages of --vpp model chunks each (GPTModel(vp_stage=v), 4 layers at pp 2 x vpp 2: one
per chunk), each chunk its own DistributedDataParallel, one optimizer over both; saved as Megatron-LM saves a
virtual pipeline (model0, model1, ...) with the optimizer in bucket space (dp_reshardable): one gbuf_idx per chunk.
With --mode finetune --load DIR: the chunks' weights alone loaded, the mains left at their initial values, saved
before a step (megatron_bucket_finetune_train.py's stale save).

usage: launch.py --world 2 -- megatron_vpp_train.py --out SAVE --pp 2 --vpp 2 [--mode finetune --load DIR] [--steps 2]
       [--json RUN_JSON]
"""
import argparse
import json
import os

import torch
import torch.distributed as dist

import megatron_bucket_finetune_train as finetune
import megatron_optim_train as trainer

METADATA = dict(trainer.SHARDED_SD_METADATA, distrib_optim_sharding_type="dp_reshardable")


def build(pp, vpp, seed):
    """The model chunks of this rank's stage (GPTModel(vp_stage=v)), their DDP wrappers and the
    DistributedOptimizer over them. Needs the parallel state initialised."""
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig
    torch.manual_seed(seed)
    cfg = TransformerConfig(num_layers=pp * vpp, hidden_size=16, num_attention_heads=4, ffn_hidden_size=32,
                            use_cpu_initialization=True, params_dtype=torch.bfloat16, bf16=True,
                            perform_initialization=True, pipeline_model_parallel_size=pp,
                            virtual_pipeline_model_parallel_size=vpp, pipeline_dtype=torch.bfloat16)
    chunks = [GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=64,
                       max_sequence_length=8, vp_stage=v,
                       pre_process=parallel_state.is_pipeline_first_stage(ignore_virtual=False, vp_stage=v),
                       post_process=parallel_state.is_pipeline_last_stage(ignore_virtual=False, vp_stage=v))
              for v in range(vpp)]
    ddps = [DistributedDataParallel(cfg, DistributedDataParallelConfig(use_distributed_optimizer=True,
                                                                       grad_reduce_in_fp32=True),
                                    Float16Module(cfg, c), disable_bucketing=v > 0)
            for v, c in enumerate(chunks)]
    opt = get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True,
                                                 use_distributed_optimizer=True), ddps)
    return cfg, chunks, opt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=("pretrain", "finetune"), default="pretrain")
    ap.add_argument("--load")
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--vpp", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    notes = {"mode": a.mode}
    if a.mode == "finetune":
        finetune.fresh_adam_state_before_save()
    mode = trainer.cpu_shims(notes)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    from megatron.core import dist_checkpointing, parallel_state
    parallel_state.initialize_model_parallel(pipeline_model_parallel_size=a.pp,
                                             virtual_pipeline_model_parallel_size=a.vpp)
    cfg, chunks, opt = build(a.pp, a.vpp, 1)
    notes["optimizer"] = [type(o).__name__ for o in getattr(opt, "chained_optimizers", [opt])]
    iteration = a.steps
    if a.mode == "finetune":
        iteration = 0
        with open(os.path.join(a.load, "latest_checkpointed_iteration.txt")) as f:
            src = os.path.join(a.load, f"iter_{int(f.read().strip()):07d}")
        if mode is not None:
            mode.__exit__(None, None, None)
        loaded = dist_checkpointing.load({f"model{v}": c.sharded_state_dict() for v, c in enumerate(chunks)}, src)
        if mode is not None:
            mode.__enter__()
        for v, c in enumerate(chunks):
            c.load_state_dict(loaded[f"model{v}"])
        notes["loaded_model_from"] = src
    else:
        for step in range(a.steps):
            for c in chunks:
                for p in c.parameters():
                    p.main_grad.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(100 + step)) * 1e-2)
            notes.setdefault("step_results", []).append(repr(opt.step()))
            opt.zero_grad()
    state = {f"model{v}": c.sharded_state_dict(metadata=METADATA) for v, c in enumerate(chunks)}
    state.update({"checkpoint_version": 3.0, "iteration": iteration,
                  "optimizer": opt.sharded_state_dict(state, metadata=METADATA),
                  "args": argparse.Namespace(num_layers=cfg.num_layers, hidden_size=cfg.hidden_size, bf16=True,
                                             pipeline_model_parallel_size=a.pp,
                                             virtual_pipeline_model_parallel_size=a.vpp, iteration=iteration,
                                             use_distributed_optimizer=True, ckpt_format="torch_dist",
                                             finetune=a.mode == "finetune")})
    if mode is not None:
        mode.__exit__(None, None, None)
    iter_dir = os.path.join(a.out, f"iter_{iteration:07d}")
    if rank == 0:
        os.makedirs(iter_dir, exist_ok=True)
    dist.barrier()
    dist_checkpointing.save(state, iter_dir)
    dist.barrier()
    if rank == 0:
        with open(os.path.join(a.out, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(iteration))
        if a.json:
            import megatron.core
            with open(a.json, "w") as f:
                json.dump(dict(notes, iteration=iteration, megatron_core=megatron.core.__version__), f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
