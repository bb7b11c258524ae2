#!/usr/bin/env python3
"""Count the files that include a header, directly and transitively, so the numbers in #27 are reproducible.

Usage: python3 scripts/count_includers.py HEADER [--list] [--check] [ROOT]
  HEADER: a path from the repository root, e.g. core/include/ckptdoc/sources/deepspeed/catalog.h
  --list: also print the direct includers outside core's deepspeed/ and sources/ folders.
  --check: exit 1 (naming the files) when a file outside deepspeed/ and sources/ includes HEADER directly or a
           translation unit of views/ reaches it (the ctest entry catalog_includers, for sources/deepspeed/catalog.h).
Quoted includes are resolved as the compiler looks (beside the including file, then core/src/, then
core/include/), over core/, app/, views/ and tests/. Prints the direct includers and the translation units
(.cpp, .cu) that reach HEADER, each also counted outside deepspeed/ and sources/.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
FOLDERS = ("core", "app", "views", "tests")


def include_graph(root):
    graph = {}
    for top in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if not name.endswith((".h", ".hpp", ".cpp", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                targets = []
                for inc in INCLUDE.findall(text):
                    for base in (dirpath, os.path.join(root, "core", "src"), os.path.join(root, "core", "include")):
                        candidate = os.path.normpath(os.path.join(base, inc))
                        if os.path.exists(candidate):
                            targets.append(os.path.relpath(candidate, root))
                            break
                graph[os.path.relpath(path, root)] = targets
    return graph


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    if not args:
        print(__doc__)
        return 2
    header = os.path.normpath(args[0])
    root = args[1] if len(args) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    graph = include_graph(root)
    reaches = {}

    def reach(f, seen=frozenset()):
        if f in reaches:
            return reaches[f]
        if f in seen:
            return False  # a cycle: decided where it started
        r = f == header or any(reach(g, seen | {f}) for g in graph.get(f, []))
        reaches[f] = r
        return r

    def outside(files):
        return [f for f in files if "/deepspeed/" not in f and "/sources/" not in f]

    direct = sorted(f for f, targets in graph.items() if header in targets)
    tus = [f for f in graph if f.endswith((".cpp", ".cu"))]
    reaching = [f for f in tus if reach(f)]
    print(f"direct includers: {len(direct)} (outside deepspeed/ and sources/: {len(outside(direct))})")
    print(f"translation units reaching it: {len(reaching)} of {len(tus)} "
          f"(outside deepspeed/ and sources/: {len(outside(reaching))})")
    if "--list" in argv:
        for f in outside(direct):
            print("  " + f)
    if "--check" in argv:
        views = [f for f in reaching if f.startswith("views/")]
        for f in outside(direct):
            print(f"FAIL: {f} includes {header} (outside deepspeed/ and sources/)")
        for f in views:
            print(f"FAIL: {f} reaches {header} (a view)")
        return 1 if outside(direct) or views else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
