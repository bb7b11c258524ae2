#!/usr/bin/env python3
"""Starts N local ranks of a script, torch.distributed env:// style over loopback, with the python running this
file: a judge venv's (torch 2 and DeepSpeed from PyPI installed in it) or, with CKPTDOC_JUDGE_STACK=debian,
Debian's (torch 1.13, DeepSpeed 0.12.6/0.14.5 from $DS_SRC: the 2023 stack the shared harness's launch.py runs).

usage: launch.py --world N [--timeout S] [--logdir DIR] -- script.py [args...]

The ranks get RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT (free port),
DS_ACCELERATOR=cpu, DS_BUILD_OPS=0, OMP_NUM_THREADS=1 (unless set), and a PYTHONPATH (rank_path): for the venv,
$CKPTDOC_HARNESS (the shared harness folder: ds_common.py), this folder's hooks/ and the caller's PYTHONPATH
(DeepSpeed comes from the venv, nothing is stubbed); for the Debian stack what the harness's launch.py gives them
($DS_SRC, the harness's stubs/, the harness, the caller's). The shared-memory buffers DeepSpeed's CPU accelerator
leaves in /dev/shm are removed when the ranks are done, and a torch extension build lock older than STALE_LOCK_S
is removed (see remove_stale_extension_locks). Named launch.py because ds_load_check.py starts its ranks through
the launch.py beside it (judge/load_check.py points it here). Exit 0 only if every rank exits 0; per-rank
output in <logdir>/rank<r>.log, printed when a rank fails.

A rank of a .py script is a fork of this process, made after it imported the heavy modules once (PRELOADED,
DEBIAN_PRELOADED): a rank's life on the CPU is ~90 % imports (torch, then torch._dynamo and the inductor, which
torch.optim's Adam and megatron-core's torch.compile decorators import), and CI runs some thousand of them on 2
cores. The fork sees what a fresh interpreter would: the rank's environment, sys.path with $PYTHONPATH first, and
the first sitecustomize.py on it (hooks/, or tests/realds/engine_hook/) run as the interpreter runs it at
start-up. For the venv nothing framework-specific is preloaded (no DeepSpeed, no megatron-core): their imports
read the rank's environment and the hooks patch them.

The launcher itself is usually a fork too: this file hands its call to a judge zygote (zygote.py), a process
per python and import-time environment that imported those modules once for all calls; CKPTDOC_JUDGE_ZYGOTE=0
runs it here instead.
"""
import argparse
import glob
import importlib
import importlib.util
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# A JIT build of DeepSpeed's shm_comm op takes 1-3 minutes on 2 loaded cores; a no-op check, under a second.
STALE_LOCK_S = 900
# torch's modules every judge rank imports, ~2.5 s of CPU each time: imported once here, before the forks.
PRELOADED = ("torch", "torch.distributed", "torch.distributed.tensor", "torch._dynamo", "torch._inductor.compile_fx")
# the Debian stack's: torch 1.13 (~1 s) and DeepSpeed 0.12.6/0.14.5 from source (~1.3 s) are a rank's imports
DEBIAN_PRELOADED = ("torch", "torch.distributed", "deepspeed")


def free_port():
    """A free port for rank 0's TCPStore, below the kernel's ephemeral range: a port the kernel handed out (bind
    to port 0) is free only until the ranks bind it, and meanwhile any socket's ephemeral pick (a gloo pair's
    listener, an outgoing connection of a concurrent run) may take it (CI: EADDRINUSE at init_process_group)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()  # not the process's seeded generator: concurrent launchers must not agree
    for _ in range(200):
        port = rng.randrange(max(1024, low // 2), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    with socket.socket() as s:  # a crowded range: the kernel's pick, as before
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(procs, sig_kill=False):
    for p in procs:
        if p.poll() is None:
            p.kill() if sig_kill else p.terminate()
    return [p.wait() for p in procs]


def remove_shm_buffers(port):
    """DeepSpeed's CPU accelerator (its shm_comm op) gives every rank a 66 MB all-reduce buffer in /dev/shm,
    named after the master address and port, and never unlinks it: left there, a few hundred runs fill the
    RAM-backed /dev/shm until the OOM killer stops later ranks. The ranks have exited; their buffers go."""
    for f in glob.glob(f"/dev/shm/deepspeed_*_127.0.0.1_{port}_*"):
        try:
            os.unlink(f)
        except OSError:
            pass


def remove_stale_extension_locks():
    """Every rank that loads DeepSpeed's shm_comm op takes torch's build lock (a `lock` file in the extension's
    folder) for a ninja check; a rank stopped inside that window (a peer failed, a timeout) leaves the file, and
    every later load waits for it to go, for ever, with no message. A lock older than any real build is stale:
    removing it turns that endless wait into a load that either works or fails with an error."""
    roots = [os.environ.get("TORCH_EXTENSIONS_DIR")] + glob.glob(os.path.expanduser("~/.cache/torch_extensions/*"))
    for root in filter(None, roots):
        for lock in glob.glob(os.path.join(root, "*", "lock")):
            try:
                age = time.time() - os.path.getmtime(lock)
                if age > STALE_LOCK_S:
                    os.unlink(lock)
                    print(f"launch.py: removed a stale torch extension build lock {lock} ({age:.0f}s old)",
                          file=sys.stderr)
            except OSError:
                pass


def debian_stack(env):
    """CKPTDOC_JUDGE_STACK=debian: the ranks run the 2023 stack the shared harness's launch.py runs (Debian's
    python and torch 1.13, DeepSpeed 0.12.6/0.14.5 from $DS_SRC and the harness's import stubs), forked like the
    judge venv's ranks."""
    return env.get("CKPTDOC_JUDGE_STACK") == "debian"


def ds_src(env):
    """The DeepSpeed sources of the Debian stack, found as the harness's launch.py finds them."""
    cache = env.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return env.get("DS_SRC", env.get("CKPTDOC_DS_SRC", os.path.join(cache, "ckptdoc", "deepspeed-v0.12.6")))


def rank_path(env, harness):
    """The ranks' PYTHONPATH: the harness's launch.py's for the Debian stack (DeepSpeed, stubs, harness), else the
    harness and hooks/; then the caller's."""
    caller = [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []
    if debian_stack(env):
        return [ds_src(env), os.path.join(harness, "stubs"), harness] + caller
    return [harness, os.path.join(HERE, "hooks")] + caller


def preload(env, path, debian):
    """The ranks' common environment first (torch reads OMP_NUM_THREADS when it starts its thread pool), then
    the heavy modules: torch's for the judge venv (its ranks' hooks patch DeepSpeed as it is imported, so
    DeepSpeed is not preloaded), torch and DeepSpeed for the Debian stack (nothing patches them at import; the
    harness's ds_common patches them at run time, as before). One that fails to import is left to the rank,
    which reports it itself."""
    os.environ.update(env)
    modules = PRELOADED
    added = []
    if debian:  # DeepSpeed's sources on sys.path while it is imported; each fork then sets its own path
        added = [p for p in split_path(path) if p not in sys.path]
        sys.path[1:1] = added
        modules = DEBIAN_PRELOADED
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception:  # noqa: BLE001 - the rank that needs it fails with the error
            pass
    for p in added:
        sys.path.remove(p)


def common_env(env, path, port):
    """What every rank gets beside RANK and its kin (the harness's launch.py sets the same)."""
    return dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), DS_ACCELERATOR="cpu", DS_BUILD_OPS="0",
                OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"), PYTHONPATH=os.pathsep.join(path),
                PYTHONHASHSEED="0")


def split_path(path):
    """PYTHONPATH's folders, one by one (the caller's PYTHONPATH comes as one joined entry)."""
    return [d or os.getcwd() for p in path for d in p.split(os.pathsep)]


def first_sitecustomize(path):
    """The sitecustomize.py a fresh interpreter would import at start-up from these PYTHONPATH folders (the judge
    venv's: hooks/; the Debian stack's: tests/realds/engine_hook/ when realds.py puts it there), or None."""
    for d in split_path(path):
        if os.path.isfile(os.path.join(d, "sitecustomize.py")):
            return os.path.join(d, "sitecustomize.py")
    return None


def fork_rank(cmd, env, path, log_path):
    """A rank as a fork of this process: its log as stdout and stderr, its environment, $PYTHONPATH's folders
    first on sys.path, the first sitecustomize.py on it run as module `sitecustomize` (as the interpreter does at
    start-up), then run_rank.py's main on the script. Returns the child's pid; the child never returns."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.chdir(tempfile.gettempdir())
        os.environ.clear()
        os.environ.update(env)
        sys.path[1:1] = [p for p in split_path(path) if p not in sys.path]
        hook_file = first_sitecustomize(path)
        if hook_file:
            spec = importlib.util.spec_from_file_location("sitecustomize", hook_file)
            hook = importlib.util.module_from_spec(spec)
            sys.modules["sitecustomize"] = hook
            spec.loader.exec_module(hook)
        import run_rank  # judge/run_rank.py: sys.path[0] is this folder until it sets the script's

        sys.argv = [os.path.join(HERE, "run_rank.py")] + cmd
        run_rank.main()  # ends the process with the script's exit code
    except BaseException:  # noqa: B036 - a rank that cannot start says why in its log
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


class ForkedRank:
    """poll/terminate/kill/wait of a forked rank, as subprocess.Popen offers them."""

    def __init__(self, pid):
        self.pid, self.returncode = pid, None

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self):
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode

    def terminate(self):
        os.kill(self.pid, 15)

    def kill(self):
        os.kill(self.pid, 9)


def main(should_stop=None):
    """Runs the call in sys.argv. `should_stop` (the zygote's child: has the client gone?) is asked while the
    ranks run; when it says yes they are killed."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--logdir", default=None)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no script given")
    if os.path.exists(cmd[0]):
        cmd[0] = os.path.abspath(cmd[0])  # the ranks run in the temp folder
    logdir = a.logdir or tempfile.mkdtemp(prefix="judge-ranks.")
    os.makedirs(logdir, exist_ok=True)
    harness = os.environ.get("CKPTDOC_HARNESS")
    if not harness or not os.path.isfile(os.path.join(harness, "ds_common.py")):
        sys.exit(f"launch.py: CKPTDOC_HARNESS={harness!r} does not hold ds_common.py")
    path = rank_path(os.environ, harness)
    port = free_port()
    remove_stale_extension_locks()
    common = common_env(os.environ, path, port)
    forked = cmd[0].endswith(".py")  # a script: forked (see run_rank.py); any other program: started
    if forked:
        preload(common, path, debian_stack(os.environ))
    procs, logs = [], []
    for r in range(a.world):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.world), LOCAL_SIZE=str(a.world),
                   LOCAL_WORLD_SIZE=str(a.world), **common)
        if not debian_stack(env):
            env.pop("DS_SRC", None)
        log_path = os.path.join(logdir, f"rank{r}.log")
        if forked:
            procs.append(ForkedRank(fork_rank(cmd, env, path, log_path)))
            continue
        logs.append(open(log_path, "w"))
        procs.append(subprocess.Popen([sys.executable] + cmd, env=env, stdout=logs[-1], stderr=subprocess.STDOUT,
                                      cwd=tempfile.gettempdir()))
    t0 = time.time()
    rcs = [None] * a.world
    timed_out = False
    next_lock_check = t0 + 60
    while any(rc is None for rc in rcs):
        rcs = [p.poll() for p in procs]
        if any(rc not in (None, 0) for rc in rcs):
            time.sleep(3)  # let the peers report, then stop them (they may wait in a collective)
            rcs = stop(procs)
            break
        if time.time() > next_lock_check:  # ranks may be waiting on a lock a stopped run left
            remove_stale_extension_locks()
            next_lock_check = time.time() + 60
        if time.time() - t0 > a.timeout:
            rcs = stop(procs, sig_kill=True)
            timed_out = True
            break
        if should_stop is not None and should_stop():
            rcs = stop(procs, sig_kill=True)
            print("launch.py: the caller went away; its ranks were stopped", file=sys.stderr)
            break
        time.sleep(0.2)
    for f in logs:
        f.close()
    remove_shm_buffers(port)
    if timed_out:
        print(f"launch.py: timeout after {a.timeout:.0f}s", file=sys.stderr)
    if timed_out or any(rc != 0 for rc in rcs):
        for r in range(a.world):
            with open(os.path.join(logdir, f"rank{r}.log"), errors="replace") as f:
                print(f"===== rank {r} rc={rcs[r]} (last 6000 chars) =====\n{f.read()[-6000:]}", file=sys.stderr)
        sys.exit(1)
    print(f"launch.py: {a.world} ranks OK in {time.time() - t0:.1f}s (logs in {logdir})")


if __name__ == "__main__":
    if os.environ.get("CKPTDOC_JUDGE_ZYGOTE", "1") != "0" and any(c.endswith(".py") for c in sys.argv[1:]):
        import zygote  # judge/zygote.py: the call runs as a fork of a process that imported torch once

        rc = zygote.call(sys.argv[1:])
        if rc is not None:
            sys.exit(rc)
    if os.environ.get("PYTHONHASHSEED") != "0":  # the forks inherit this interpreter's hash seed: the ranks' one
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                  dict(os.environ, PYTHONHASHSEED="0"))
    main()
