#!/usr/bin/python3
"""Runs a command and measures, over its whole process tree (multiprocessing workers included), the wall time,
the CPU time (user + system, children included), the peak of the summed resident memory (VmRSS) and the peak of the summed anonymous memory (RssAnon: what is
not a clean file page the kernel can drop), sampling /proc every 20 ms. Prints one JSON line.

  tree_memory.py -- COMMAND [ARGS...]
"""
import json
import os
import resource
import subprocess
import sys
import time


def tree(root):
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def memory(pid):
    rss = anon = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("RssAnon:"):
                    anon = int(line.split()[1])
    except OSError:
        pass
    return rss, anon


def main():
    cmd = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    peak_rss = peak_anon = 0
    while p.poll() is None:
        rss = anon = 0
        for pid in tree(p.pid):
            r, a = memory(pid)
            rss += r
            anon += a
        peak_rss, peak_anon = max(peak_rss, rss), max(peak_anon, anon)
        time.sleep(0.02)
    wall = time.time() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    largest = ru.ru_maxrss
    print(json.dumps({"exit": p.returncode, "wall_s": round(wall, 3), "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
                      "peak_rss_mib": round(peak_rss / 1024, 1),
                      "peak_anon_mib": round(peak_anon / 1024, 1), "largest_process_rss_mib": round(largest / 1024, 1)}))
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
