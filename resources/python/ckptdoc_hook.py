"""ckptdoc_hook: look at a live DeepSpeed engine with ckptdoc, between checkpoints.

Add `resources/python` (installed: /usr/share/ckptdoc/python) to PYTHONPATH and, on every rank of a training
script:

    import ckptdoc_hook
    engine.load_checkpoint(...)
    ckptdoc_hook.guard(engine)                      # raises RuntimeError before the first step can do harm
    snap = ckptdoc_hook.every(engine, "/runs/x/snapshots", steps=100, keep=5)
    for batch in data:
        loss = engine(batch); engine.backward(loss)
        # ckptdoc_hook.dump(engine, "/runs/x/grads", grads=True)   # gradients exist only here
        engine.step()
        snap()

A snapshot is a folder `out_dir/<tag>/` holding one HDF5 file per rank and `manifest.json`, written last (the
commit point: a reader never sees half a snapshot). Each rank file holds, in memory-mappable form, exactly the
files `engine.save_checkpoint` would write for that rank (their pickles and tensor storages), plus what only a
live engine has (gradients, grad norm, overflow flag, loss scale, lr). docs/snapshot-format.md describes it;
`ckptdoc inspect|diagnose|export|convert|watch` read it. Nothing here changes training state: the engine's own
save code runs with its file writer replaced by one that keeps the state in memory, and tensors are written
from their own memory (one storage at a time is copied to the host when it lives on a GPU).

Needs torch, numpy and h5py. Tested with DeepSpeed v0.12.6 and v0.14.5 (ZeRO-1/2/3, fp16/bf16, BF16_Optimizer).
"""
import contextlib
import io
import json
import logging
import os
import pickle
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
import warnings

import numpy as np
import torch

FORMAT = "ckptdoc-snapshot"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
_ALIGN = 64  # every dataset starts on a 64-byte boundary: mapped tensors are aligned for any dtype
_SEVERITY = {"info": 0, "warning": 1, "error": 2}

# torch dtype -> (numpy dtype the dataset is stored as, torch dtype to view the storage as)
_STORED_AS = {
    torch.float32: (np.float32, torch.float32),
    torch.float64: (np.float64, torch.float64),
    torch.float16: (np.float16, torch.float16),
    torch.bfloat16: (np.uint16, torch.int16),  # no numpy bfloat16: the bits, marked by a dtype attribute
    torch.int64: (np.int64, torch.int64),
    torch.int32: (np.int32, torch.int32),
    torch.int16: (np.int16, torch.int16),
    torch.int8: (np.int8, torch.int8),
    torch.uint8: (np.uint8, torch.uint8),
    torch.bool: (np.uint8, torch.uint8),
}


# ----------------------------------------------------------------------------------------------------------
# What engine.save_checkpoint would write, captured in memory

class _CapturingCheckpointEngine:
    """Stands in for the engine's checkpoint engine while its own save code runs: keeps each state dict it is
    handed (by file name) instead of writing it."""

    def __init__(self):
        self.saved = []  # (file name, state dict)

    def create(self, tag):
        pass

    def makedirs(self, path, exist_ok=False):
        pass

    def save(self, state_dict, path):
        self.saved.append((os.path.basename(path), state_dict))

    def commit(self, tag):
        return True

    def load(self, *a, **k):
        raise RuntimeError("ckptdoc_hook: load called during a snapshot")


@contextlib.contextmanager
def _quiet_deepspeed_logger():
    # the save code logs "Saving model checkpoint: ..." for files it does not write
    try:
        from deepspeed.utils import logger
    except ImportError:
        yield
        return
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def _check_supported(engine):
    if getattr(engine, "has_moe_layers", False):
        raise NotImplementedError("ckptdoc_hook: engines with MoE layers are not supported yet")
    if type(engine).__name__ == "PipelineEngine":
        raise NotImplementedError("ckptdoc_hook: pipeline-parallel engines are not supported yet")
    opt = engine.optimizer
    if getattr(opt, "swap_optimizer", False) or getattr(opt, "params_in_nvme_and_cpu", False):
        raise NotImplementedError("ckptdoc_hook: ZeRO-3 with NVMe offload cannot be snapshot (DeepSpeed cannot "
                                  "checkpoint it either)")


def _capture(engine, save_dir, tag, client_state):
    """Runs the engine's own save code (v0.12.6: save_checkpoint's body between its barriers) with a capturing
    checkpoint engine. Returns [(file name, state)] for this rank, in DeepSpeed's order."""
    cap = _CapturingCheckpointEngine()
    original = engine.checkpoint_engine
    engine.checkpoint_engine = cap
    prologue = engine._optimizer_has_ckpt_event_prologue()
    gathered = _gathered_zero3_params(engine) if prologue else []
    try:
        with _quiet_deepspeed_logger():
            if prologue:  # ZeRO-3: partitions every param (a collective), as save_checkpoint does
                engine.optimizer.checkpoint_event_prologue()
            engine._save_checkpoint(save_dir, tag, client_state=client_state or {})
            if engine.save_zero_checkpoint:
                engine._save_zero_checkpoint(save_dir, tag)  # rank 0 also copies zero_to_fp32.py to save_dir
            if engine._optimizer_has_ckpt_event_epilogue():
                engine.optimizer.checkpoint_event_epilogue()  # gathers ZeRO-3's persistent params again
    finally:
        engine.checkpoint_engine = original
    # ZeRO-3 between backward() and step() still holds some params gathered (the first layers); the prologue
    # released them and the epilogue gathers only the persistent ones: gather the others back, as they were.
    released = [p for p in gathered if not _is_available(p)]
    if released:
        released[0].all_gather(param_list=released)
    return cap.saved


def _is_available(p):
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
    return p.ds_status == ZeroParamStatus.AVAILABLE


def _gathered_zero3_params(engine):
    return [p for p in engine.module.parameters() if hasattr(p, "ds_status") and _is_available(p)]


# ----------------------------------------------------------------------------------------------------------
# Pickling the way torch.save does, with storages kept aside

def _pickle_state(obj):
    """Pickles `obj` exactly as torch.save pickles its data.pkl (protocol 2, persistent ids
    ('storage', <StorageClass>, key, location, numel)) and returns (pickle bytes, {key: TypedStorage})."""
    storages = {}
    keys = {}
    dtypes = {}

    def persistent_id(o):
        if isinstance(o, torch.storage.TypedStorage):
            untyped = o._storage
            ptr = untyped.data_ptr()
            if ptr != 0:
                if dtypes.setdefault(ptr, o.dtype) != o.dtype:
                    raise RuntimeError("ckptdoc_hook: two tensors view the same memory as different types")
            key = keys.setdefault(untyped._cdata, str(len(keys)))
            storages.setdefault(key, o)
            return ("storage", getattr(torch, o.pickle_storage_type()), key, _location(untyped), o.size())
        if torch.is_storage(o):
            raise RuntimeError("ckptdoc_hook: untyped storages in a state dict are not supported")
        return None

    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=2)
    p.persistent_id = persistent_id
    p.dump(obj)
    return buf.getvalue(), storages


def _location(untyped):
    return torch.serialization.location_tag(untyped)


def _host_array(typed):
    """The storage's elements as a numpy array in host memory: a view for CPU storages, one copy otherwise."""
    if typed.dtype not in _STORED_AS:
        raise TypeError(f"ckptdoc_hook: storages of {typed.dtype} are not supported")
    np_dtype, view_dtype = _STORED_AS[typed.dtype]
    if typed.device.type != "cpu":
        typed = typed.cpu()
    t = torch.empty((0,), dtype=typed.dtype)
    t.set_(typed, 0, (typed.size(),), (1,))
    if t.dtype != view_dtype:
        t = t.view(view_dtype)
    return t.numpy().view(np_dtype)


def _write_storage(group, key, typed, location):
    arr = _host_array(typed)
    ds = group.create_dataset(key, data=arr)  # contiguous, no filters: readers map it at its file offset
    ds.attrs["dtype"] = str(typed.dtype).replace("torch.", "")
    ds.attrs["storage_class"] = typed.pickle_storage_type()
    ds.attrs["location"] = location


def _write_tensor(group, name, tensor):
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous().reshape(-1)
    np_dtype, view_dtype = _STORED_AS[t.dtype]
    arr = (t.view(view_dtype) if t.dtype != view_dtype else t).numpy().view(np_dtype)
    ds = group.create_dataset(name, data=arr)
    ds.attrs["dtype"] = str(tensor.dtype).replace("torch.", "")
    ds.attrs["shape"] = list(tensor.shape)
    return ds


# ----------------------------------------------------------------------------------------------------------
# What only a live engine has

def _float_or_none(v):
    if v is None:
        return None
    if torch.is_tensor(v):
        v = v.item()
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _live_scalars(engine):
    opt = engine.optimizer
    fp16 = bool(engine.fp16_enabled())
    scale = None
    scaler = getattr(opt, "loss_scaler", None)
    if fp16:
        scale = _float_or_none(getattr(opt, "cur_scale", None) if hasattr(opt, "cur_scale") else None)
        if scale is None and scaler is not None:
            scale = _float_or_none(getattr(scaler, "cur_scale", None))
    min_scale = _float_or_none(getattr(scaler, "min_scale", None)) if fp16 and scaler is not None else None
    dynamic = bool(getattr(opt, "dynamic_loss_scale", False)) if fp16 else False
    overflow = getattr(opt, "overflow", None)
    groups = getattr(opt, "param_groups", None) or []
    return {
        "global_steps": int(engine.global_steps),
        "global_samples": int(engine.global_samples),
        "skipped_steps": int(engine.skipped_steps),
        "micro_steps": int(getattr(engine, "micro_steps", 0)),
        "grad_norm": _float_or_none(engine.get_global_grad_norm()),
        "gradient_clipping": _float_or_none(engine.gradient_clipping()),
        "overflow": None if overflow is None else bool(overflow),
        "loss_scale": scale,
        "min_loss_scale": min_scale,
        "dynamic_loss_scale": dynamic,
        "lr": [_float_or_none(g.get("lr")) for g in groups],
    }


def _partition_grads(engine):
    """{flat group: this rank's gradient partition} as the optimizer's step will consume it (reduced over the
    data-parallel group, still multiplied by the loss scale; same length and order as the fp32 partition), for
    the groups that hold gradients now. ZeRO frees them in step(): after it this is empty."""
    opt = engine.optimizer
    cls = type(opt).__name__
    out = {}
    if cls == "BF16_Optimizer":
        for i, part in enumerate(opt.fp32_groups_gradient_flat_partition):
            if any(opt.fp32_groups_has_gradients[i]):
                out[i] = part
        return out
    if cls in ("DeepSpeedZeroOptimizer", "DeepSpeedZeroOptimizer_Stage3"):
        flat = opt.single_partition_of_fp32_groups if cls == "DeepSpeedZeroOptimizer" \
            else opt.fp32_partitioned_groups_flat
        for i, hp in enumerate(flat):
            if hp.grad is not None:  # offload: the grads already sit on the fp32 partition
                out[i] = hp.grad
                continue
            grads = opt.averaged_gradients.get(i) if isinstance(opt.averaged_gradients, dict) else None
            if grads:
                out[i] = torch.cat([g.reshape(-1) for g in grads])
    return out


_PARTITIONED = ("DeepSpeedZeroOptimizer", "DeepSpeedZeroOptimizer_Stage3", "BF16_Optimizer")


def _lp_grads(engine):
    names = getattr(engine, "param_names", {}) or {}
    return [(names.get(p, n), p.grad) for n, p in engine.module.named_parameters() if p.grad is not None]


# ----------------------------------------------------------------------------------------------------------
# Files

def _rank_file_name(rank):
    return f"rank_{rank:05d}.h5"


def _fsync_path(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_h5(path):
    """A new HDF5 file whose objects start on 64-byte boundaries (h5py's low-level API: the File keywords for it
    are recent)."""
    import h5py
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_alignment(1, _ALIGN)
    return h5py.File(h5py.h5f.create(os.fsencode(path), h5py.h5f.ACC_TRUNC, fapl=fapl))


def _write_rank_file(folder, rank, world, tag, captured, live, grads_wanted, engine):
    name = _rank_file_name(rank)
    final = os.path.join(folder, name)
    tmp = os.path.join(folder, f".{name}.tmp-{os.getpid()}")
    files = []
    nbytes = 0
    grads_info = {"requested": bool(grads_wanted), "partition": {}, "lp": {}}
    try:
        with _create_h5(tmp) as f:
            f.attrs["format"] = FORMAT + "-rank"
            f.attrs["format_version"] = FORMAT_VERSION
            f.attrs["rank"] = rank
            f.attrs["world_size"] = world
            f.attrs["tag"] = tag
            fg = f.create_group("files")
            for fname, state in captured:
                blob, storages = _pickle_state(state)
                g = fg.create_group(fname)
                g.create_dataset("pickle", data=np.frombuffer(blob, dtype=np.uint8))
                sg = g.create_group("storages")
                for key in sorted(storages, key=int):
                    typed = storages[key]
                    _write_storage(sg, key, typed, _location(typed._storage))
                    nbytes += typed.size() * typed.element_size()
                files.append(fname)
                nbytes += len(blob)
            lg = f.create_group("live")
            if grads_wanted:
                pg = lg.create_group("grads/partition")
                scale = live["loss_scale"] or 1.0
                for i, t in sorted(_partition_grads(engine).items()):
                    _write_tensor(pg, str(i), t)
                    grads_info["partition"][str(i)] = {"dtype": str(t.dtype).replace("torch.", ""),
                                                       "numel": int(t.numel()), "scale": scale}
                lpg = lg.create_group("grads/lp")
                # 16-bit grads beside partition grads (BF16_Optimizer keeps zeroed ones after the step: those
                # are not gradients); alone only where the optimizer has no partitions (torch, FP16_Optimizer)
                partitioned = type(engine.optimizer).__name__ in _PARTITIONED
                for pname, t in (_lp_grads(engine) if grads_info["partition"] or not partitioned else []):
                    _write_tensor(lpg, pname, t)
                    grads_info["lp"][pname] = {"dtype": str(t.dtype).replace("torch.", ""),
                                               "shape": list(t.shape), "scale": scale}
            info = dict(live, rank=rank, grads=grads_info)
            lg.create_dataset("info", data=np.frombuffer(json.dumps(info).encode(), dtype=np.uint8))
        _fsync_path(tmp)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    has = bool(grads_info["partition"] or grads_info["lp"])
    return {"rank": rank, "file": name, "bytes": os.path.getsize(final), "state_bytes": nbytes, "files": files,
            "has_grads": has, "host": socket.gethostname()}


def _write_manifest(folder, tag, live, parts, engine, extra_files):
    owner = {}
    for p in parts:
        for fname in p["files"]:
            owner[fname] = p["file"]
    opt = engine.optimizer
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "id": uuid.uuid4().hex,
        "tag": tag,
        "created_unix": time.time(),
        "world_size": len(parts),
        "zero_stage": int(engine.zero_optimization_stage()),
        "optimizer": type(opt).__name__,
        "dtype": "fp16" if engine.fp16_enabled() else "bf16" if engine.bfloat16_enabled() else "fp32",
        "ds_version": _ds_version(),
        "torch_version": torch.__version__,
        "live": dict(live, grads_requested=any(p.get("grads_requested") for p in parts),
                     has_grads=any(p["has_grads"] for p in parts)),
        "ranks": [{k: p[k] for k in ("rank", "file", "bytes", "host", "has_grads")} for p in parts],
        "files": owner,
        "extra_files": extra_files,
    }
    tmp = os.path.join(folder, f".{MANIFEST}.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(folder, MANIFEST))
    _fsync_path(folder, directory=True)
    return manifest


def _ds_version():
    try:
        import deepspeed
        return deepspeed.__version__
    except ImportError:
        return ""


# ----------------------------------------------------------------------------------------------------------
# Collectives

def _dist():
    import torch.distributed as tdist
    if not tdist.is_available() or not tdist.is_initialized():
        return None
    return tdist


def _rank_world():
    d = _dist()
    return (d.get_rank(), d.get_world_size()) if d else (0, 1)


def _barrier():
    d = _dist()
    if d:
        d.barrier()


def _all_gather(obj):
    d = _dist()
    if not d:
        return [obj]
    out = [None] * d.get_world_size()
    d.all_gather_object(out, obj)
    return out


def _broadcast(obj):
    d = _dist()
    if not d:
        return obj
    box = [obj]
    d.broadcast_object_list(box, src=0)
    return box[0]


_GLOO_GROUP = []


def _transfer_group():
    """A gloo group for moving file bytes between hosts (NCCL groups only move GPU tensors). Collective."""
    d = _dist()
    if d.get_backend() == "gloo":
        return None
    if not _GLOO_GROUP:
        _GLOO_GROUP.append(d.new_group(backend="gloo"))
    return _GLOO_GROUP[0]


def _send_file_to_rank0(path, dest_folder, chunk=64 << 20):
    """Rank r's part, written in its own scratch folder, copied into rank 0's folder over torch.distributed
    (for jobs whose nodes share no file system). Collective over all ranks; ranks take turns."""
    d = _dist()
    rank, world = d.get_rank(), d.get_world_size()
    group = _transfer_group()
    for src in range(1, world):
        if rank == src:
            size = os.path.getsize(path)
            d.send(torch.tensor([size], dtype=torch.int64), dst=0, group=group)
            with open(path, "rb") as f:
                while True:
                    b = f.read(chunk)
                    if not b:
                        break
                    d.send(torch.frombuffer(bytearray(b), dtype=torch.uint8), dst=0, group=group)
        elif rank == 0:
            n = torch.zeros(1, dtype=torch.int64)
            d.recv(n, src=src, group=group)
            size = int(n.item())
            name = _rank_file_name(src)
            tmp = os.path.join(dest_folder, f".{name}.tmp-{os.getpid()}")
            with open(tmp, "wb") as f:
                left = size
                while left:
                    buf = torch.empty(min(chunk, left), dtype=torch.uint8)
                    d.recv(buf, src=src, group=group)
                    f.write(buf.numpy().tobytes())
                    left -= buf.numel()
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, os.path.join(dest_folder, name))
        d.barrier()


# ----------------------------------------------------------------------------------------------------------
# Public API

def dump(engine, out_dir, tag=None, grads=False, client_state=None, _local_scratch=False):
    """Writes one snapshot of `engine` to `out_dir/<tag>` and returns that folder. Call it on every rank (it is
    a collective, like engine.save_checkpoint). Default tag: "step<global_steps>". An existing snapshot of the
    same tag is replaced (its manifest is removed first, so readers see it disappear, then reappear whole).
    `grads=True`: also record the gradients; they exist only between engine.backward() and engine.step()."""
    _check_supported(engine)
    rank, world = _rank_world()
    tag = str(tag) if tag is not None else f"step{int(engine.global_steps)}"
    if "/" in tag or tag in ("", ".", ".."):
        raise ValueError(f"ckptdoc_hook: tag {tag!r} cannot name a folder")
    folder = os.path.join(os.path.abspath(out_dir), tag)
    # _local_scratch (guard without shared storage): ranks other than 0 write in their own scratch folder
    mine = tempfile.mkdtemp(prefix=f"ckptdoc-part{rank}-") if _local_scratch and rank != 0 else folder
    if rank == 0:
        os.makedirs(folder, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(folder, MANIFEST))  # uncommit an older snapshot of this tag
    _barrier()
    captured = _capture(engine, mine, tag, client_state)
    live = _live_scalars(engine)
    part = _write_rank_file(mine, rank, world, tag, captured, live, grads, engine)
    part["grads_requested"] = bool(grads)
    if _local_scratch and world > 1:
        _send_file_to_rank0(os.path.join(mine, part["file"]), folder)
        if rank != 0:
            shutil.rmtree(mine, ignore_errors=True)
    parts = _all_gather(part)
    _barrier()
    if rank == 0:
        extra = sorted(f for f in os.listdir(folder) if f == "zero_to_fp32.py")
        _write_manifest(folder, tag, live, parts, engine, extra)
    _barrier()
    if grads and not any(p["has_grads"] for p in parts) and rank == 0:
        warnings.warn("ckptdoc_hook.dump(grads=True): the engine holds no gradients now (they exist only between "
                      "engine.backward() and engine.step()); the snapshot says so", stacklevel=2)
    return folder


def find_ckptdoc():
    """$CKPTDOC, else `ckptdoc` on PATH, else the build tree's app/ckptdoc ($CKPTDOC_BUILD_DIR, as
    scripts/build.sh takes it, or build/ next to this module's checkout)."""
    env = os.environ.get("CKPTDOC")
    if env:
        return env
    found = shutil.which("ckptdoc")
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    build_dir = os.environ.get("CKPTDOC_BUILD_DIR") or os.path.join(here, "..", "..", "build")
    built = os.path.normpath(os.path.join(build_dir, "app", "ckptdoc"))
    if os.access(built, os.X_OK):
        return built
    raise FileNotFoundError("ckptdoc_hook: no ckptdoc executable: set $CKPTDOC, put ckptdoc on PATH, or build it "
                            f"at {built}")


def _diagnose(folder, device):
    r = subprocess.run([find_ckptdoc(), "diagnose", folder, "--json", "--device", device], capture_output=True,
                       text=True)
    if r.returncode not in (0, 1):
        return {"error": f"ckptdoc diagnose could not read the snapshot {folder} (exit {r.returncode}): "
                         f"{r.stderr.strip()[-2000:]}"}
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {"error": f"ckptdoc diagnose printed no JSON (exit {r.returncode}): {r.stderr.strip()[-2000:]}"}


def guard(engine, fail_on="error", work_dir=None, keep=False, device="cpu"):
    """Right after engine.load_checkpoint(...), before training: snapshots the engine, runs `ckptdoc diagnose`
    on it and raises RuntimeError on every rank when a finding is at `fail_on` ("error", "warning" or "info")
    or worse; returns the parsed report otherwise. Collective.

    work_dir: a folder every rank can write (shared storage); the snapshot stays there. Without it, each rank
    writes its part to local scratch space and the parts travel to rank 0 over torch.distributed; the snapshot
    is removed afterwards unless `keep` is set or the guard fails (then the error names where it is)."""
    if fail_on not in _SEVERITY:
        raise ValueError(f"ckptdoc_hook.guard: fail_on must be one of {sorted(_SEVERITY)}, not {fail_on!r}")
    rank, world = _rank_world()
    tag = f"guard-step{int(engine.global_steps)}"
    if work_dir is not None:
        base = os.path.abspath(work_dir)
        folder = dump(engine, base, tag=tag)
    else:
        base = _broadcast(tempfile.mkdtemp(prefix="ckptdoc-guard-") if rank == 0 else None)
        folder = dump(engine, base, tag=tag, _local_scratch=True)
    report = None
    if rank == 0:
        report = _diagnose(folder, device)
        report["snapshot"] = folder
    report = _broadcast(report)
    if "error" in report:
        raise RuntimeError(f"ckptdoc_hook.guard: {report['error']}")
    bad = [f for f in report.get("findings", []) if _SEVERITY.get(f.get("severity"), 0) >= _SEVERITY[fail_on]]
    if rank == 0 and not bad and not keep and work_dir is None:
        shutil.rmtree(base, ignore_errors=True)
    _barrier()
    if bad:
        lines = [f"  {f.get('severity', '?').upper()} {f.get('code')}: {f.get('message')}" for f in bad]
        raise RuntimeError("ckptdoc_hook.guard: the engine's state is not safe to train on "
                           f"({len(bad)} finding(s) at '{fail_on}' or worse; snapshot kept at {folder}):\n" +
                           "\n".join(lines))
    return report


def snapshots(out_dir):
    """The complete snapshots in out_dir as [(global_steps, created_unix, folder)], oldest first."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(out_dir):
            path = os.path.join(out_dir, name, MANIFEST)
            try:
                with open(path) as f:
                    m = json.load(f)
            except (OSError, ValueError):
                continue
            if m.get("format") == FORMAT:
                found.append((int(m.get("live", {}).get("global_steps", 0)), float(m.get("created_unix", 0)),
                              os.path.join(out_dir, name)))
    return sorted(found)


def remove_snapshot(folder):
    """Deletes a snapshot folder, manifest first (so no reader starts on it meanwhile)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(folder, MANIFEST))
    shutil.rmtree(folder, ignore_errors=True)


def every(engine, out_dir, steps, keep=None, grads=False):
    """A callable to run after each engine.step() on every rank: snapshots the engine when global_steps is a
    multiple of `steps` (once per step value) and keeps the newest `keep` snapshots of out_dir (None: all).
    Returns the snapshot folder when it wrote one, else None."""
    if steps < 1:
        raise ValueError("ckptdoc_hook.every: steps must be >= 1")
    if keep is not None and keep < 1:
        raise ValueError("ckptdoc_hook.every: keep must be >= 1 (or None to keep all)")
    last = [None]

    def tick():
        step = int(engine.global_steps)
        if step % steps or step == last[0]:
            return None
        last[0] = step
        folder = dump(engine, out_dir, grads=grads)
        if keep is not None and _rank_world()[0] == 0:
            for _, _, old in snapshots(out_dir)[:-keep]:
                remove_snapshot(old)
        _barrier()
        return folder

    return tick
