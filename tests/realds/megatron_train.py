#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): a tiny real megatron-core GPTModel on the CPU over gloo,
stepped, saved with megatron.core.dist_checkpointing.save (torch_dist backend) in Megatron-LM's layout:
<out>/iter_0000002/ and <out>/latest_checkpointed_iteration.txt.

The state dict has Megatron-LM's top-level shape (megatron/training/checkpointing.py generate_state_dict, which is
not in the megatron-core wheel): "model" (model.sharded_state_dict()), "optimizer" (the optimizer's own
sharded_state_dict, when one runs here), "args" (an argparse.Namespace), "checkpoint_version", "iteration",
"rng_state" (a ShardedObject per tensor rank). What megatron-core cannot do on the CPU is written to --json.

What runs on the CPU in megatron-core 0.16.1 (torch 2.10, no CUDA), as found here:
- parallel_state over gloo (TP 2), GPTModel with the local layer spec, model.sharded_state_dict(): yes;
- the forward: no (get_default_causal_mask, transformer/utils.py:35, device="cuda", from fused_softmax.py:327;
  without the shim below, GlobalMemoryBuffer.get_tensor, utils.py:631, torch.cuda.current_device()), so each
  step's gradients are synthetic (seeded, the same on every replica of a param) and the step is torch's Adam on
  the bare model (run.json's max_update says how far the weights moved from their initial values);
- get_megatron_optimizer: no (DistributedOptimizer -> MixedPrecisionOptimizer.__init__, optimizer.py:481
  device='cuda'; FP32Optimizer.__init__, optimizer.py:907), so no optimizer state is saved;
- dist_checkpointing.save: yes with two CUDA calls answered for the CPU (below).

usage: launch.py --world 2 -- megatron_train.py --out SAVE --tp 2 [--steps 2] [--json RUN_JSON]
"""
import argparse
import json
import os
import random
import traceback

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    notes = {}
    if not torch.cuda.is_available():
        # megatron-core's torch_dist save asks CUDA twice: its copy to host memory ends with torch.cuda.synchronize()
        # (dist_checkpointing/strategies/filesystem_async.py:230, preload_tensors), and the finalize broadcasts a
        # failure flag made on torch.cuda.current_device() (strategies/state_dict_saver.py:252). The tensors are
        # already on the CPU and gloo broadcasts CPU tensors, so a no-op and "cpu" are exact. Nothing of
        # megatron-core itself is changed.
        torch.cuda.synchronize = lambda *args, **kwargs: None
        torch.cuda.current_device = lambda: "cpu"
        notes["cpu_shims"] = ["torch.cuda.synchronize: no-op (filesystem_async.py:230 preload_tensors)",
                              "torch.cuda.current_device: 'cpu' (state_dict_saver.py:252 failure flag)"]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    from megatron.core import parallel_state, tensor_parallel, dist_checkpointing
    from megatron.core.dist_checkpointing.mapping import ShardedObject
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    parallel_state.initialize_model_parallel(tensor_model_parallel_size=a.tp)
    torch.manual_seed(1)
    if torch.cuda.is_available():
        tensor_parallel.model_parallel_cuda_manual_seed(1)
    cfg = TransformerConfig(num_layers=2, hidden_size=16, num_attention_heads=4, ffn_hidden_size=32,
                            use_cpu_initialization=True, params_dtype=torch.float32, perform_initialization=True)
    vocab, seq = 64, 8
    model = GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=vocab,
                     max_sequence_length=seq, pre_process=True, post_process=True)

    # an optimizer: megatron-core's own (get_megatron_optimizer over its DDP wrapper) when it runs on the CPU,
    # else torch's Adam on the bare model, and the reason is recorded
    optimizer, mcore_opt, ddp = None, None, model
    try:
        from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
        ddp = DistributedDataParallel(cfg, DistributedDataParallelConfig(use_distributed_optimizer=True), model)
        mcore_opt = get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=1e-3, use_distributed_optimizer=True),
                                           [ddp])
        notes["optimizer"] = type(mcore_opt).__name__
    except Exception as e:  # noqa: BLE001 - recorded, then the bare model trains with torch's Adam
        notes["mcore_optimizer_error"] = f"{type(e).__name__}: {e}"
        notes["mcore_optimizer_trace"] = traceback.format_exc()[-3000:]
        ddp = model
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        notes["optimizer"] = "torch.optim.Adam (not saved: megatron-core builds no sharded state dict for it)"

    initial = [p.detach().clone() for p in model.parameters()]
    g = torch.Generator().manual_seed(7)
    losses = []
    for step in range(a.steps):
        tokens = torch.randint(0, vocab, (2, seq), generator=g)
        pos = torch.arange(seq).unsqueeze(0).expand(2, seq)
        try:
            out = ddp(tokens, pos, None, labels=tokens)
            loss = out.float().mean()
            loss.backward()
            losses.append(loss.item())
        except Exception as e:  # noqa: BLE001 - the forward needs CUDA: the step runs on synthetic gradients
            if step == 0:
                notes["forward_error"] = f"{type(e).__name__}: {e}"
                notes["forward_trace"] = traceback.format_exc()[-3000:]
            for p in model.parameters():  # deterministic, the same on every replica of a param
                grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(100 + step)) * 1e-2
                if mcore_opt is not None:  # megatron-core's optimizers read the DDP wrapper's main_grad buffers
                    p.main_grad.copy_(grad)
                else:
                    p.grad = grad
        if mcore_opt is not None:
            ok = mcore_opt.step()
            notes.setdefault("step_results", []).append(repr(ok))
            mcore_opt.zero_grad()
        else:
            optimizer.step()
            optimizer.zero_grad()

    notes["max_update"] = max((p.detach() - p0).abs().max().item() for p, p0 in zip(model.parameters(), initial))
    model_sd = model.sharded_state_dict()
    state = {"model": model_sd, "checkpoint_version": 3.0, "iteration": a.steps,
             "args": argparse.Namespace(num_layers=cfg.num_layers, hidden_size=cfg.hidden_size,
                                        tensor_model_parallel_size=a.tp, iteration=a.steps, lr=1e-3,
                                        ckpt_format="torch_dist")}
    if mcore_opt is not None:
        try:
            state["optimizer"] = mcore_opt.sharded_state_dict(model_sd)
        except Exception as e:  # noqa: BLE001
            notes["optimizer_sharded_state_dict_error"] = f"{type(e).__name__}: {e}"
            notes["optimizer_sharded_state_dict_trace"] = traceback.format_exc()[-3000:]
    ps = parallel_state
    tp_rank, tp_size = ps.get_tensor_model_parallel_rank(), ps.get_tensor_model_parallel_world_size()
    pp_rank, pp_size = ps.get_pipeline_model_parallel_rank(), ps.get_pipeline_model_parallel_world_size()
    rng = {"random_rng_state": random.getstate(), "torch_rng_state": torch.get_rng_state()}
    state["rng_state"] = ShardedObject("rng_state", [rng], (pp_size, tp_size), (pp_rank, tp_rank),
                                       replica_id=parallel_state.get_data_parallel_rank(with_context_parallel=True))

    iter_dir = os.path.join(a.out, f"iter_{a.steps:07d}")
    if rank == 0:
        os.makedirs(iter_dir, exist_ok=True)
    dist.barrier()
    dist_checkpointing.save(state, iter_dir)  # backend torch_dist by default
    dist.barrier()
    if rank == 0:
        with open(os.path.join(a.out, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(a.steps))
    if a.json and rank == 0:
        with open(a.json, "w") as f:
            import megatron.core
            json.dump(dict(notes, world=world, tp=tp_size, dp=ps.get_data_parallel_world_size(), losses=losses,
                           iteration=a.steps, megatron_core=megatron.core.__version__), f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
