#!/usr/bin/env python3
"""Check that each of core's static libraries links alone against the libraries it declares (#27).

core/CMakeLists.txt writes <build>/core/link_layers.txt, one line per library: its name, its archive and the
libraries it links (DEPS). For every library the script lists the symbols it uses (nm: undefined) and where they
are defined; a symbol defined only in a library that is not among its declared dependencies (transitively) is a
call upward, or sideways, that the layer graph forbids: a lower library linked alone would not link.

Usage: python3 scripts/link_layers.py BUILD_DIR   (after building the core libraries)
Prints each library's dependencies and any violation (the symbol, demangled, and the library defining it). Exit
status 0 when there is none, 1 when there is, 77 when the libraries are not built yet (ctest: skipped).
"""
import os
import subprocess
import sys
from collections import defaultdict


def symbols(archive):
    """(defined, undefined) symbol names of a static library."""
    out = subprocess.run(["nm", "-P", "-A", archive], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        name, kind = fields[1], fields[2]
        if kind == "U":
            undefined.add(name)
        elif kind not in "Nn?":
            defined.add(name)
    return defined, undefined - defined


def closure(lib, deps):
    seen, todo = set(), list(deps[lib])
    while todo:
        d = todo.pop()
        if d in deps and d not in seen:
            seen.add(d)
            todo.extend(deps[d])
    return seen


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    listing = os.path.join(sys.argv[1], "core", "link_layers.txt")
    deps, archive = {}, {}
    with open(listing) as f:
        for line in f:
            fields = line.split()
            if fields:
                archive[fields[0]], deps[fields[0]] = fields[1], fields[2:]
    missing = [a for a in archive.values() if not os.path.exists(a)]
    if missing:
        print(f"not built yet: {', '.join(missing)}")
        return 77
    defined, undefined = {}, {}
    for lib, path in archive.items():
        defined[lib], undefined[lib] = symbols(path)
    owners = defaultdict(set)
    for lib, names in defined.items():
        for name in names:
            owners[name].add(lib)
    violations = 0
    for lib in archive:
        allowed = closure(lib, deps) | {lib}
        print(f"{lib} -> {' '.join(d for d in deps[lib] if d in deps) or '(none)'}")
        for name in sorted(undefined[lib]):
            where = owners.get(name, set())
            if where and not where & allowed:
                violations += 1
                pretty = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
                print(f"  VIOLATION: {lib} uses {pretty} (defined in {', '.join(sorted(where))})")
    print(f"link layer violations: {violations}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
