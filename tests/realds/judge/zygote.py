"""A judge zygote: one long-lived process per judge python (and per environment torch reads when it starts) that
imported torch's heavy modules once (launch.PRELOADED) and then runs each `launch.py` call as a fork of itself.

Why: on CI's 2 cores the realds tests start launch.py some hundreds of times, and each start spent ~3 s of CPU
importing torch, torch._dynamo and the inductor before its first rank could be forked. The zygote pays that once.

How a call runs: launch.py (the client) connects to the zygote's Unix socket, sends its argv, environment and
working folder, and passes its stdin, stdout and stderr (SCM_RIGHTS). The zygote forks a child that takes those
as its own and runs launch.main() exactly as the client would have; the child reports its exit code back, and the
client exits with it. A client that goes away (killed by a test's time limit) closes the socket; the child sees
it and stops its ranks. The zygote leaves when it has been idle IDLE_S seconds.

Which zygote: the key hashes the python, this folder (its path and its launcher code) and every environment
variable that can change what the preloaded imports do (KEYED, KEYED_PREFIXES): a call whose environment differs
there gets its own zygote, so a rank never sees modules imported under another environment. run.py runs a
single-process script the same way (mode "script").

usage (by launch.py): zygote.py serve SOCKET
"""
import fcntl
import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
IDLE_S = 240  # a zygote unused this long leaves (CI's realds tests call one every few seconds)
START_S = 120  # the longest a client waits for a new zygote's imports
KEYED = ("PYTHONPATH", "PYTHONHOME", "HOME", "TMPDIR", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CKPTDOC_JUDGE_STACK",
         "CKPTDOC_HARNESS", "CKPTDOC_DS_SRC")
KEYED_PREFIXES = ("TORCH", "PYTORCH", "CUDA", "NCCL", "LD_", "KMP_", "XDG_", "DS_", "MEGATRON", "NVTE_")
ACK = b"A"  # the child has taken the request: from here on the call runs in the zygote


def key_of(env):
    """The zygote a call may use: same python, same launcher code, same import-time environment."""
    h = hashlib.sha256(f"{os.path.realpath(sys.executable)}\0{os.path.realpath(HERE)}".encode())
    for f in ("launch.py", "zygote.py"):
        with open(os.path.join(HERE, f), "rb") as fh:
            h.update(fh.read())
    for k in sorted(env):
        if k in KEYED or k.startswith(KEYED_PREFIXES):
            h.update(f"\0{k}={env[k]}".encode())
    return h.hexdigest()[:20]


def socket_path(env):
    folder = os.path.join(tempfile.gettempdir(), f"ckptdoc-judge-zygotes-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, key_of(env) + ".sock")


def send_message(sock, obj, fds=()):
    data = json.dumps(obj).encode()
    head = struct.pack("!I", len(data))
    if fds:
        socket.send_fds(sock, [head + data[:4096]], list(fds))
        sock.sendall(data[4096:])
    else:
        sock.sendall(head + data)


def receive_exactly(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("zygote connection closed")
        buf += chunk
    return buf


def receive_request(sock):
    """The client's message and the three descriptors that came with its first bytes."""
    first, fds, _, _ = socket.recv_fds(sock, 4 + 4096, 3)
    if len(first) < 4 or len(fds) != 3:
        raise EOFError("a request without its header or its three descriptors")
    (n,) = struct.unpack("!I", first[:4])
    data = first[4:] + receive_exactly(sock, n - (len(first) - 4))
    return json.loads(data), fds


# ---------------------------------------------------------------- client (launch.py)


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return s
    except OSError:
        s.close()
        return None


def start_zygote(path, env):
    """Starts the zygote for `path` (unless a peer did while we waited for the lock) and waits until it listens."""
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        s = connect(path)
        if s:
            return s
        if os.path.exists(path):
            os.unlink(path)  # left by a zygote that was killed
        zenv = dict(env, PYTHONHASHSEED="0")
        with open(path + ".log", "ab") as log:
            z = subprocess.Popen([sys.executable, os.path.join(HERE, "zygote.py"), "serve", path], env=zenv,
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd="/",
                                 start_new_session=True)
        deadline = time.time() + START_S
        while time.time() < deadline and z.poll() is None:
            s = connect(path)
            if s:
                return s
            time.sleep(0.1)
        print(f"launch.py: no judge zygote ({path}.log says why); the call runs without one", file=sys.stderr)
    return None


def call(argv, mode="launch"):
    """Runs launch.py's `argv` (mode "launch") or a script and its arguments as `python SCRIPT ARGS` would
    (mode "script": run.py) in a zygote. Returns its exit code, or None when no zygote took the call (nothing
    ran: the caller runs it itself)."""
    env = dict(os.environ)
    path = socket_path(env)
    s = connect(path) or start_zygote(path, env)
    if s is None:
        return None
    with s:
        try:
            send_message(s, dict(mode=mode, argv=argv, env=env, cwd=os.getcwd()), fds=(0, 1, 2))
            if s.recv(1) != ACK:
                return None  # the zygote was leaving: nothing ran
        except OSError:
            return None
        try:
            return struct.unpack("!i", receive_exactly(s, 4))[0]
        except (EOFError, OSError):
            print(f"launch.py: the judge zygote's child for this call died without an exit code ({path}.log)",
                  file=sys.stderr)
            return 1


# ---------------------------------------------------------------- zygote


def client_gone(conn):
    """The client sends nothing after its request: a readable socket means it closed (or was killed)."""
    readable, _, _ = select.select([conn], [], [], 0)
    return bool(readable) and conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""


def run_script(argv):
    """`python SCRIPT ARGS` in this process: the script's folder as sys.path[0], run as __main__, then the atexit
    handlers the interpreter would run at exit."""
    import atexit
    import runpy

    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    try:
        runpy.run_path(argv[0], run_name="__main__")
    finally:
        atexit._run_exitfuncs()


def run_call(conn, launch):
    """In the forked child: become the client's launch.py (or python running its script), run it, send back the
    exit code."""
    code = 1
    try:
        req, fds = receive_request(conn)
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        tempfile.tempdir = None  # computed again from the client's TMPDIR
        conn.sendall(ACK)
        try:
            if req.get("mode") == "script":
                run_script(req["argv"])
            else:
                sys.argv = [os.path.join(HERE, "launch.py")] + req["argv"]
                launch.main(should_stop=lambda: client_gone(conn))
            code = 0
        except SystemExit as e:
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: B036 - reported to the client's stderr, which is ours now
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            conn.sendall(struct.pack("!i", code))
        except OSError:
            pass
        os._exit(0)


def reap(children):
    for pid in list(children):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            children.discard(pid)


def serve(path):
    import launch  # this folder is sys.path[0]

    env = dict(os.environ)
    rank_path = launch.rank_path(env, env.get("CKPTDOC_HARNESS", ""))
    common = {k: v for k, v in launch.common_env(env, rank_path, 0).items() if not k.startswith("MASTER_")}
    launch.preload(common, rank_path, launch.debian_stack(env))
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    me = os.stat(path).st_ino
    print(f"zygote {os.getpid()} listening on {path}", flush=True)
    children, last = set(), time.time()
    while True:
        readable, _, _ = select.select([listener], [], [], 1.0)
        reap(children)
        if readable:
            conn, _ = listener.accept()
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                listener.close()
                run_call(conn, launch)
            conn.close()
            children.add(pid)
            last = time.time()
        elif not children and time.time() - last > IDLE_S:
            with open(path + ".lock", "w") as lock:  # no client may start a zygote while this one leaves
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    if os.stat(path).st_ino == me:
                        os.unlink(path)
                except FileNotFoundError:
                    pass
                listener.close()  # a client that connected meanwhile gets no ACK and runs the call itself
            print(f"zygote {os.getpid()} idle for {IDLE_S} s: leaving", flush=True)
            return


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "serve":
        sys.exit(__doc__)
    serve(sys.argv[2])
