"""Runs one rank's script (argv[1:]) as __main__ for judge/launch.py, then ends the process with os._exit once
the atexit handlers have run (sitecustomize's: leave the process group).

Why: after a complete run, torch 2.10 ranks now and then abort in the interpreter's own teardown ("terminate
called without an active exception", rc -6), with or without destroy_process_group; CI lost two runs to it.
The exit code is the script's own: 0, its SystemExit code, or 1 for an uncaught exception (printed)."""
import atexit
import os
import runpy
import sys
import traceback


def main():
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: B036 - reported like the interpreter would, then exit 1
        traceback.print_exc()
        code = 1
    hook = sys.modules.get("sitecustomize")
    if code != 0 and hook is not None and hasattr(hook, "_failed"):
        hook._failed.append(f"exit {code}")  # a failing rank does not wait at the exit barrier
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
