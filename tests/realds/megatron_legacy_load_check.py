#!/usr/bin/python3
"""Per-rank judge (started by the judges' launch.py): Megatron-LM's own resume of a legacy (ckpt_format "torch")
save, megatron_legacy_train.py's model and non-distributed optimizer: load_checkpoint without --finetune loads the
model's weights and optimizer.load_state_dict(state_dict['optimizer']), which copies fp32_from_fp16_params into the
optimizer's fp32 mains (Float16OptimizerWithFloat16Params.load_state_dict). Then, per main, whether it rounds to
its loaded bf16 weight, NaN where the weight is NaN (mains_equal_weights), or not (mains_differ), named
"tp<r>:<name>", and megatron-core's own order of them (mains_order: "tp<r>:<g>.<i>" -> name, the param of fp32_from_float16_groups[g][i]).

With --step, megatron-core's optimizer then takes one step from what it loaded (synthetic gradients: the forward
needs CUDA) and step_ok says that it ran and left every weight finite.

usage: launch.py --world TP*PP -- megatron_legacy_load_check.py --ckpt SAVE_DIR --tp 2 [--pp 1] --json OUT [--step]
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_legacy_train as legacy  # noqa: E402 - its args, model, optimizer and CPU shims
import megatron_optim_train as trainer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--json", required=True)
    ap.add_argument("--step", action="store_true", help="then one optimizer step (synthetic gradients)")
    a = ap.parse_args()
    notes = {}
    mode = trainer.cpu_shims(notes)
    legacy.cuda_rng_on_cpu(notes)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    args = legacy.megatron_args(a.tp, load=a.ckpt, world=dist.get_world_size(), pp=a.pp)
    legacy.microbatches(args)
    gpt, ddp, opt = legacy.build(a.tp, a.pp)
    iteration, _ = legacy.load_megatron([ddp], opt, notes)
    if mode is not None:
        mode.__exit__(None, None, None)
    from megatron.core import parallel_state
    tp_rank = parallel_state.get_tensor_model_parallel_rank()
    if a.pp > 1:  # each stage numbers its layers from 0: "pp<s>:" as ckptdoc qualifies them
        stage = f"pp{parallel_state.get_pipeline_model_parallel_rank()}:"
    else:
        stage = ""
    names = {p: n for n, p in gpt.named_parameters()}
    inner = getattr(opt, "chained_optimizers", [opt])
    assert len(inner) == 1, [type(o).__name__ for o in inner]
    inner = inner[0]
    equal, differ, order = [], [], {}
    for g, (params, mains) in enumerate(zip(inner.float16_groups, inner.fp32_from_float16_groups)):
        for i, (param, main) in enumerate(zip(params, mains)):
            name = f"tp{tp_rank}:{stage}{names[param]}"
            order[f"tp{tp_rank}:{stage}{g}.{i}"] = stage + names[param]
            # a NaN main where its weight is NaN rounds to it (equal_nan): the NaN is the values' fault, not the main's
            rounded, weight = main.to(param.dtype).float(), param.detach().float()
            same = torch.allclose(rounded, weight, rtol=0, atol=0, equal_nan=True)
            (equal if same else differ).append(name)
    result = dict(iteration=iteration, optimizer=type(inner).__name__, mains_equal_weights=equal,
                  mains_differ=differ, mains_order=order)
    if a.step:  # megatron-core's own step from the loaded state: it must run and leave every weight finite
        if mode is not None:
            mode.__enter__()
        for p in gpt.parameters():
            p.main_grad.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(200)) * 1e-2)
        ok, grad_norm, _ = opt.step()
        if mode is not None:
            mode.__exit__(None, None, None)
        result["step_ok"] = bool(ok) and all(bool(torch.isfinite(p).all()) for p in gpt.parameters())
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, result)
    if rank == 0:
        out = dict(notes, iteration=iteration, optimizer=result["optimizer"],
                   mains_equal_weights=sorted(n for r in gathered if r for n in r["mains_equal_weights"]),
                   mains_differ=sorted(n for r in gathered if r for n in r["mains_differ"]),
                   mains_order={k: v for r in gathered if r for k, v in r["mains_order"].items()})
        if a.step:
            out["step_ok"] = all(r["step_ok"] for r in gathered)
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
