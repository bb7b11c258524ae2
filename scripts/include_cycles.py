#!/usr/bin/env python3
"""Print the include graph between core's folders and its cycles, so the count in #27 is reproducible.

A folder is core/src/<f>/ with core/include/ckptdoc/<f>/ (sources/<name> counts as its own folder; files at the
top, error.h and the like, are the folder "."). An edge A -> B means a file of A includes a header of B. A cycle
is two or more folders that reach each other; the script lists every pair that includes each other directly,
and the strongly connected groups (folders all on one cycle).

Usage: python3 scripts/include_cycles.py [--edges] [--check] [ROOT]   (ROOT: the repository, default: this
script's ..)
The last line is "include cycles: N pairs, M groups". Exit status 0; with --check (the ctest entry
include_cycles), 1 when there is any cycle.
"""
import os
import re
import sys
from collections import defaultdict

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(rel):
    """core/src/x/y.cpp or core/include/ckptdoc/x/y.h -> 'x' ('sources/dcp' for sources)."""
    parts = rel.split("/")
    if parts[:2] == ["core", "src"]:
        parts = parts[2:]
    elif parts[:3] == ["core", "include", "ckptdoc"]:
        parts = parts[3:]
    else:
        return None
    if len(parts) == 1:
        return "."
    if parts[0] == "sources" and len(parts) > 2:
        return "sources/" + parts[1]
    return parts[0]


def graph(root):
    edges = defaultdict(lambda: defaultdict(list))  # a -> b -> files of a including b
    for base in ("core/src", "core/include/ckptdoc"):
        for dirpath, _, files in os.walk(os.path.join(root, base)):
            for name in files:
                if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                a = folder_of(rel)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    # as the compiler looks: beside the including file, then core/src/, then core/include/
                    target = None
                    for base_dir in (dirpath, os.path.join(root, "core", "src"), os.path.join(root, "core", "include")):
                        candidate = os.path.normpath(os.path.join(base_dir, inc))
                        if os.path.exists(candidate):
                            target = os.path.relpath(candidate, root)
                            break
                    if target is None:
                        continue  # a generated or third-party header
                    b = folder_of(target)
                    if b and a and a != b:
                        edges[a][b].append(rel)
    return edges


def strongly_connected(nodes, edges):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    edges = graph(root)
    nodes = set(edges) | {b for a in edges for b in edges[a]}
    if "--edges" in sys.argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{a} -> {b} ({len(edges[a][b])} files, e.g. {edges[a][b][0]})")
    pairs = sorted((a, b) for a in edges for b in edges[a] if a < b and a in edges.get(b, {}))
    for a, b in pairs:
        print(f"{a} <-> {b}: {edges[a][b][0]} / {edges[b][a][0]}")
    groups = strongly_connected(nodes, edges)
    for g in groups:
        print("cycle group: " + " ".join(g))
    print(f"include cycles: {len(pairs)} pairs, {len(groups)} groups")
    return 1 if "--check" in sys.argv and (pairs or groups) else 0


if __name__ == "__main__":
    sys.exit(main())
