"""Per-rank driver of bench_hook.sh (start it through tests/realds/realds.py launch): builds a ZeRO engine of the
harness's model with the given dims on real DeepSpeed, trains a step, then measures on each rank, side by side:
engine.save_checkpoint (the baseline: what a user does today), ckptdoc_hook.dump, and dump(grads=True) between
backward and step. Time is wall time of the call on the rank (including its barriers) and the process's CPU time
(less sensitive to a busy machine); extra host memory is the
peak resident set size during the call minus the one just before it, sampled every 2 ms by a thread (the page
cache the written files occupy is not counted). Rank 0 prints one JSON object.
"""
import argparse
import json
import os
import sys
import threading
import time

import torch

import deepspeed
import deepspeed.comm as dist

import ds_common as C

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources", "python"))
import ckptdoc_hook  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class PeakRss:
    def __enter__(self):
        self.base = rss()
        self.peak = self.base
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t0 = time.perf_counter()
        self.c0 = time.process_time()
        self.t.start()
        return self

    def run(self):
        while not self.stop:
            self.peak = max(self.peak, rss())
            time.sleep(0.002)

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        self.cpu_seconds = time.process_time() - self.c0
        self.stop = True
        self.t.join()
        self.peak = max(self.peak, rss())
        self.extra = self.peak - self.base


def measure(fn):
    dist.barrier()
    with PeakRss() as m:
        fn()
    return {"seconds": m.seconds, "cpu_seconds": m.cpu_seconds, "extra_rss_bytes": m.extra}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--dims", default="2048,8192,8192,1024")
    ap.add_argument("--stage", type=int, default=2)
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    C.cpu_gloo_patch()
    C.cpu_grad_bucketing_patch()
    deepspeed.init_distributed(dist_backend="gloo")
    dims = [int(v) for v in a.dims.split(",")]
    engine, _ = C.build_engine(dims, a.stage, a.dtype, 1)
    rank = dist.get_rank()
    C.train_steps(engine, dims, a.dtype, 1, 7)
    params = sum(p.numel() for p in engine.module.parameters())
    res = {"save_checkpoint": [], "dump": [], "dump_grads": []}
    for i in range(a.repeat):
        res["save_checkpoint"].append(measure(lambda: engine.save_checkpoint(os.path.join(a.out, "ckpt"), tag=f"t{i}")))
        res["dump"].append(measure(lambda: ckptdoc_hook.dump(engine, os.path.join(a.out, "snap"), tag=f"t{i}")))
        x, y = next(C.batches(dims, a.dtype, 1, 11 + i, rank))
        engine.backward(engine(x, y))
        res["dump_grads"].append(measure(lambda: ckptdoc_hook.dump(engine, os.path.join(a.out, "snap"),
                                                                   tag=f"g{i}", grads=True)))
        engine.step()
    sizes = {"ckpt": sum(os.path.getsize(os.path.join(a.out, "ckpt", "t0", f))
                         for f in os.listdir(os.path.join(a.out, "ckpt", "t0"))),
             "snap": sum(os.path.getsize(os.path.join(a.out, "snap", "t0", f))
                         for f in os.listdir(os.path.join(a.out, "snap", "t0")) if f.endswith(".h5"))}
    allr = [None] * dist.get_world_size()
    torch.distributed.all_gather_object(allr, {"rank": rank, "rss_bytes": rss(), **res})
    if rank == 0:
        print(json.dumps({"params": params, "dims": dims, "stage": a.stage, "dtype": a.dtype,
                          "bytes_on_disk": sizes, "ranks": allr}))


if __name__ == "__main__":
    main()
