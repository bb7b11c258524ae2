#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): trains the harness's model A under ZeRO with DeepSpeed's
Ulysses sequence-parallel groups made real, and saves it with engine.save_checkpoint.

--sp-mode mpu:  ALST's way (0.17+): deepspeed.runtime.sequence_parallel.parallel_state_sp as the engine's mpu,
                after initialize_sequence_parallel(SP). ZeRO partitions over the sequence-data-parallel group
                (SP x dp ranks).
--sp-mode mesh: the config's "sequence_parallel_size" and "data_parallel_size" (deepspeed.initialize makes a
                device mesh (dp, sp)); ZeRO partitions over the mesh's data_parallel dimension.

The save path only asks the engine's groups (groups._get_sequence_data_parallel_*, _get_model_parallel_*), so the
layers need not be Ulysses attention: each rank trains on its own batches, as each SP rank would on its slice of
the sequence.

usage: launch.py --world N -- ulysses_train.py --out SAVE_DIR --sp 2 [--sp-mode mpu|mesh] [--stage 1]
       [--dtype bf16] [--steps 3] [--seed 1] [--json RUN_JSON]
"""
import argparse
import json

import torch
import deepspeed
import deepspeed.comm as dist

import ds_common as C


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--sp", type=int, default=2)
    ap.add_argument("--sp-mode", choices=("mpu", "mesh"), default="mpu")
    ap.add_argument("--stage", type=int, default=1)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args()
    C.cpu_gloo_patch()  # as ds_driver.py: the gloo backend name (DeepSpeed < 0.18.7 asks for oneCCL otherwise)
    deepspeed.init_distributed(dist_backend="gloo")
    world = dist.get_world_size()
    dims = C.SMALL_DIMS
    torch.manual_seed(a.seed)
    model = C.Net(dims)
    extra, mpu = None, None
    if a.sp_mode == "mpu":
        from deepspeed.runtime.sequence_parallel import parallel_state_sp
        parallel_state_sp.initialize_sequence_parallel(a.sp)
        mpu = parallel_state_sp
    else:
        extra = {"sequence_parallel_size": a.sp, "data_parallel_size": world // a.sp}
    cfg = C.make_config(a.stage, a.dtype, extra_cfg=extra)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=C.param_groups(model), config=cfg, mpu=mpu)
    log = C.train_steps(engine, dims, a.dtype, a.steps, a.seed)
    engine.save_checkpoint(a.out)
    dist.barrier()
    if a.json and dist.get_rank() == 0:
        from deepspeed.utils import groups
        C.write_json(a.json, {"world": world, "sp": a.sp, "sp_mode": a.sp_mode, "log": log,
                              "sequence_parallel_size": groups._get_sequence_parallel_world_size(),
                              "seq_dp_world_size": groups._get_sequence_data_parallel_world_size(),
                              "mp_world_size": groups._get_model_parallel_world_size(),
                              "optimizer": type(engine.optimizer).__name__, "versions": C.versions()})
    dist.barrier()


if __name__ == "__main__":
    main()
