#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): a tiny real megatron-core GPTModel in bf16 with
megatron-core's own DistributedOptimizer (fp32 main params), on the CPU over gloo, saved with
megatron.core.dist_checkpointing.save in Megatron-LM's layout (<out>/iter_NNNNNNN/, latest_checkpointed_iteration.txt).

--mode pretrain: builds the model and optimizer, takes --steps steps, saves model + optimizer.
--mode finetune --load DIR: what Megatron-LM's load_checkpoint does under --finetune / --no-load-optim, without
  the optimizer.reload_model_params() call its branch makes today (megatron/training/checkpointing.py:3057-3060
  at NVIDIA/Megatron-LM d98e8a6; missing in the load paths of Megatron-LM #174 and megablocks #80): the model and
  the optimizer are built first (the same seed, so the fp32 main params hold the initial values), the model's
  weights alone are loaded from DIR's iteration, and the checkpoint is saved (iteration 0, before a step: the next
  step would copy the stale mains over the loaded weights).

Optimizer state: Megatron-LM's sharded_sd_metadata with --dist-ckpt-optim-fully-reshardable and
--distrib-optim-fully-reshardable-mem-efficient (get_sharded_sd_metadata in megatron/training/checkpointing.py):
param_state_sharding_type "fully_reshardable", gathered over gloo. Its default, "dp_reshardable", is bucket space;
"fully_sharded_model_space" (megatron-core's own default when no metadata is given) raises in 0.16.1:
"ShardedTensor.flattened_range is not supported" (dist_checkpointing/mapping.py:134).

What of megatron-core needs CUDA on the CPU (0.16.1, torch 2.10), and the torch-level answers given here (nothing of
megatron-core is changed):
- tensors made with device="cuda" (optimizer.py:473-485 found_inf, _dummy_overflow_buf, _scale_one; clip_grads.py:90
  and 103; transformer/utils.py:35 the causal mask): a TorchFunctionMode that makes them on the CPU;
- the param type check (distrib_optimizer.py:361 and 420, "torch.cuda.BFloat16Tensor"): Tensor.type() with no
  argument answers the CUDA name of a CPU tensor's type;
- torch.cuda.current_device() (param_and_grad_buffer.py:783, state_dict_saver.py:252): "cpu";
  torch.cuda.synchronize() (filesystem_async.py:230): a no-op.
The forward still needs CUDA: dot_product_attention.py:217 forks the CUDA RNG tracker (tensor_parallel/random.py:248,
"cuda rng state model-parallel-rng is not added"; adding one needs torch.cuda.manual_seed / get_rng_state), so each
step's gradients are synthetic (seeded, the same on every replica), written into the DDP wrapper's main_grad
buffers, and megatron-core's optimizer steps on them.

usage: launch.py --world 2 -- megatron_optim_train.py --out SAVE [--mode pretrain|finetune] [--load DIR]
       [--tp 2] [--steps 2] [--json RUN_JSON]
"""
import argparse
import json
import os

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode

SHARDED_SD_METADATA = {"singleton_local_shards": False, "chained_optim_avoid_prefix": True,
                       "distrib_optim_sharding_type": "fully_reshardable",
                       "distrib_optim_fully_reshardable_mem_efficient": True}


class CudaFactoriesOnCpu(TorchFunctionMode):
    """device="cuda" in any torch call becomes the CPU (the tensors megatron-core makes for its flags)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return func(*args, **kwargs)


def cpu_shims(notes):
    if torch.cuda.is_available():
        return None
    torch.cuda.synchronize = lambda *args, **kwargs: None
    torch.cuda.current_device = lambda: "cpu"
    plain_type = torch.Tensor.type

    def cuda_type_name(self, *args, **kwargs):
        if args or kwargs:
            return plain_type(self, *args, **kwargs)
        name = plain_type(self)
        return name if name.startswith("torch.cuda.") else name.replace("torch.", "torch.cuda.", 1)

    torch.Tensor.type = cuda_type_name
    notes["cpu_shims"] = ["TorchFunctionMode: device='cuda' -> 'cpu' (optimizer.py:473-485, clip_grads.py:90)",
                          "Tensor.type(): torch.cuda.* names (distrib_optimizer.py:361, 420)",
                          "torch.cuda.current_device: 'cpu' (param_and_grad_buffer.py:783, state_dict_saver.py:252)",
                          "torch.cuda.synchronize: no-op (filesystem_async.py:230)"]
    mode = CudaFactoriesOnCpu()
    mode.__enter__()
    return mode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=("pretrain", "finetune"), default="pretrain")
    ap.add_argument("--load")
    ap.add_argument("--optimizer", choices=("distributed", "local"), default="distributed")
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    notes = {"mode": a.mode}
    mode = cpu_shims(notes)
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    from megatron.core import dist_checkpointing, parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig

    parallel_state.initialize_model_parallel(tensor_model_parallel_size=a.tp)
    torch.manual_seed(1)
    cfg = TransformerConfig(num_layers=2, hidden_size=16, num_attention_heads=4, ffn_hidden_size=32,
                            use_cpu_initialization=True, params_dtype=torch.bfloat16, bf16=True,
                            perform_initialization=True)
    gpt = GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=64,
                   max_sequence_length=8)
    distributed = a.optimizer == "distributed"
    ddp = DistributedDataParallel(cfg, DistributedDataParallelConfig(use_distributed_optimizer=distributed,
                                                                     grad_reduce_in_fp32=True),
                                  Float16Module(cfg, gpt))
    opt = get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True,
                                                 use_distributed_optimizer=distributed), [ddp])
    notes["optimizer"] = [type(o).__name__ for o in getattr(opt, "chained_optimizers", [opt])]

    iteration = a.steps
    if a.mode == "finetune":
        iteration = 0
        with open(os.path.join(a.load, "latest_checkpointed_iteration.txt")) as f:
            src = os.path.join(a.load, f"iter_{int(f.read().strip()):07d}")
        if mode is not None:
            mode.__exit__(None, None, None)
        loaded = dist_checkpointing.load({"model": gpt.sharded_state_dict()}, src)
        if mode is not None:
            mode.__enter__()
        gpt.load_state_dict(loaded["model"])
        notes["loaded_model_from"] = src
    else:
        for step in range(a.steps):
            for p in gpt.parameters():  # deterministic, the same on every replica of a param
                grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(100 + step)) * 1e-2
                p.main_grad.copy_(grad)
            notes.setdefault("step_results", []).append(repr(opt.step()))
            opt.zero_grad()

    model_sd = gpt.sharded_state_dict(metadata=SHARDED_SD_METADATA)
    state = {"model": model_sd, "checkpoint_version": 3.0, "iteration": iteration,
             "optimizer": opt.sharded_state_dict(model_sd, metadata=SHARDED_SD_METADATA),
             "args": argparse.Namespace(num_layers=cfg.num_layers, hidden_size=cfg.hidden_size, bf16=True,
                                        tensor_model_parallel_size=a.tp, iteration=iteration, lr=1e-3,
                                        use_distributed_optimizer=distributed, ckpt_format="torch_dist",
                                        finetune=a.mode == "finetune")}
    if mode is not None:  # the save's writer process is spawned: nothing of the mode may be in the way
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
    if a.json and rank == 0:
        import megatron.core
        with open(a.json, "w") as f:
            json.dump(dict(notes, iteration=iteration, megatron_core=megatron.core.__version__,
                           tp=parallel_state.get_tensor_model_parallel_world_size(),
                           dp=parallel_state.get_data_parallel_world_size()), f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
