#!/usr/bin/python3
"""Per-rank judge (started by the judges' launch.py): Megatron-LM's own resume of a legacy (ckpt_format "torch")
save, megatron_legacy_train.py's model and non-distributed optimizer: load_checkpoint without --finetune loads the
model's weights and optimizer.load_state_dict(state_dict['optimizer']), which copies fp32_from_fp16_params into the
optimizer's fp32 mains (Float16OptimizerWithFloat16Params.load_state_dict). Then, per main, whether it rounds to
its loaded bf16 weight, NaN where the weight is NaN (mains_equal_weights), or not (mains_differ), named
"tp<r>:<name>" (each data-parallel rank's piece of a main with --optimizer distributed: a param is in
mains_differ when any piece differs), and megatron-core's own order of them (mains_order: "tp<r>:<g>.<i>" -> name, the param of fp32_from_float16_groups[g][i]).

What the loaded optimizer holds, for repair --reset-optimizer / --drop-optimizer's outputs: adam (torch Adam's
state after the load: how many param states, their distinct "step" values, and how many exp_avg / exp_avg_sq
elements are not zero), mains_sha (each main's, or main piece's, sha256 of its float32 bytes, named as
mains_equal_weights names them; a piece adds its "[start:end]") and weights_sha (each loaded weight's sha256).
--no-load-optim loads as Megatron-LM's flag of that name does (the model alone; load_checkpoint then calls
optimizer.reload_model_params()).

With --step, megatron-core's optimizer then takes one step from what it loaded (synthetic gradients: the forward
needs CUDA) and step_ok says that it ran and left every weight finite.

usage: launch.py --world N -- megatron_legacy_load_check.py --ckpt SAVE_DIR --tp 2 [--pp 1]
       [--optimizer local|distributed] --json OUT [--step] [--no-load-optim]
"""
import hashlib
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_legacy_train as legacy  # noqa: E402 - its args, model, optimizer and CPU shims
import megatron_optim_train as trainer  # noqa: E402


def local_mains(inner):
    """Float16OptimizerWithFloat16Params: (group, index, param, its fp32 main)."""
    for g, (params, mains) in enumerate(zip(inner.float16_groups, inner.fp32_from_float16_groups)):
        for i, (param, main) in enumerate(zip(params, mains)):
            yield g, i, param, main


def distributed_mains(inner):
    """DistributedOptimizer: (bucket, slice of the param this data-parallel rank owns, param, its fp32 main piece),
    from megatron-core's own range maps (gbuf_ranges[...]["param_map"][param]["param"]) and
    _get_main_param_and_optimizer_states, as its save_parameter_state reads them."""
    for gbuf_range_maps in inner.gbuf_ranges:
        for bucket_maps in gbuf_range_maps.values():
            for b, bucket in enumerate(bucket_maps):
                for param, ranges in bucket["param_map"].items():
                    main = inner._get_main_param_and_optimizer_states(param)["param"]
                    yield b, slice(ranges["param"].start, ranges["param"].end), param, main


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--optimizer", choices=("local", "distributed"), default="local")
    ap.add_argument("--json", required=True)
    ap.add_argument("--step", action="store_true", help="then one optimizer step (synthetic gradients)")
    ap.add_argument("--no-load-optim", action="store_true", help="Megatron-LM's --no-load-optim")
    a = ap.parse_args()
    notes = {}
    mode = trainer.cpu_shims(notes)
    legacy.cuda_rng_on_cpu(notes)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    distributed = a.optimizer == "distributed"
    args = legacy.megatron_args(a.tp, load=a.ckpt, world=dist.get_world_size(), pp=a.pp, distributed=distributed,
                                no_load_optim=a.no_load_optim)
    legacy.microbatches(args)
    gpt, ddp, opt = legacy.build(a.tp, a.pp, distributed)
    if distributed:  # megatron-core's KeyError 'step' with torch's Adam (megatron_bucket_load_check.py says why)
        import megatron_bucket_load_check
        megatron_bucket_load_check.load_only_the_loaded_state_keys()
        notes["load_shim"] = "megatron_bucket_load_check.load_only_the_loaded_state_keys (KeyError 'step')"
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
    equal, differ, order, sha = [], [], {}, {}
    for g, i, param, main in (distributed_mains(inner) if distributed else local_mains(inner)):
        name = f"tp{tp_rank}:{stage}{names[param]}"
        piece = f"[{i.start}:{i.stop}]" if distributed else ""
        sha[name + piece] = hashlib.sha256(main.detach().float().contiguous().numpy().tobytes()).hexdigest()
        if not distributed:
            order[f"tp{tp_rank}:{stage}{g}.{i}"] = stage + names[param]
        # a NaN main where its weight is NaN rounds to it (equal_nan): the NaN is the values' fault, not the main's
        rounded = main.to(param.dtype).float()
        weight = param.detach().float().view(-1)[i] if distributed else param.detach().float()
        same = torch.allclose(rounded, weight, rtol=0, atol=0, equal_nan=True)
        (equal if same else differ).append(name)
    adam = dict(states=0, steps=[], exp_avg_nonzero=0, exp_avg_sq_nonzero=0)
    for state in inner.optimizer.state.values():  # torch Adam's, as megatron-core loaded it
        adam["states"] += 1
        if "step" in state:
            adam["steps"].append(float(state["step"]))
        for k in ("exp_avg", "exp_avg_sq"):
            if k in state:
                adam[k + "_nonzero"] += int((state[k] != 0).sum())
    weights = {f"tp{tp_rank}:{stage}{n}": hashlib.sha256(p.detach().contiguous().view(torch.int16).numpy().tobytes())
               .hexdigest() for n, p in gpt.named_parameters()}
    result = dict(iteration=iteration, optimizer=type(inner).__name__, mains_equal_weights=equal,
                  mains_differ=differ, mains_order=order, mains_sha=sha, adam=adam, weights_sha=weights)
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
                   mains_equal_weights=sorted({n for r in gathered for n in r["mains_equal_weights"]} -
                                              {n for r in gathered for n in r["mains_differ"]}),
                   mains_differ=sorted({n for r in gathered for n in r["mains_differ"]}),
                   mains_order={k: v for r in gathered if r for k, v in r["mains_order"].items()},
                   mains_sha={k: v for r in gathered for k, v in r["mains_sha"].items()},
                   weights_sha={k: v for r in gathered for k, v in r["weights_sha"].items()},
                   adam=dict(states=sum(r["adam"]["states"] for r in gathered),
                             steps=sorted({s for r in gathered for s in r["adam"]["steps"]}),
                             exp_avg_nonzero=sum(r["adam"]["exp_avg_nonzero"] for r in gathered),
                             exp_avg_sq_nonzero=sum(r["adam"]["exp_avg_sq_nonzero"] for r in gathered)))
        if a.step:
            out["step_ok"] = all(r["step_ok"] for r in gathered)
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
