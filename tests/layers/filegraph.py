#!/usr/bin/env python3
"""filegraph.py - the call graph between kvfs's source files, from the
object files of a build: file A -> file B when A's object refers to a global
symbol (function or variable) that B's object defines. Prints the cycles
(strongly connected components of more than one file, and each pair of files
that call each other) and the arrows that point up the layers.

  filegraph.py BUILD_DIR [--dot] [--quiet]

Exit 0 when there is no cycle and no upward arrow, 1 otherwise. nm(1) reads
the objects; inline functions in headers and static functions are not
arrows (they are compiled into their caller).
"""
import os
import subprocess
import sys

# Layers, top to bottom: a file may call its own folder and any folder in a
# lower layer. lib/ (libkvfs) is the bottom: the daemon links it for the
# key derivation; it calls nothing of the daemon.
LAYERS = [
    ["mount"],
    ["fs/fs.c"],      # the operations table: calls the files of fs/
    ["fs/paths"],     # path namespaces: hand key namespaces to fs/'s core
    ["fs"],           # fs/'s core; calls fs/paths/ through fs_paths.c
    ["events"],
    ["tier"],
    ["tier/l2", "tier/l3"],
    ["tier/policy"],
    ["tier/record"],
    ["gpu", "hash"],
    ["lib"],
]
SRC_DIRS = [d for layer in LAYERS for d in layer if not d.endswith(".c")]
# Files below their folder's layer: the dlopen loader of the CUDA runtime
# is compiled into libkvfs too (its kvfs_cuda_* calls), so it is the bottom.
FILE_LAYER = {"gpu/gpu_rt.c": len(LAYERS)}
FILE_LAYER.update({f: i for i, layer in enumerate(LAYERS) for f in layer
                   if f.endswith(".c")})


def folder(src):
    return os.path.dirname(src)


def layer_of(d):
    for i, layer in enumerate(LAYERS):
        if d in layer:
            return i
    return None


def objects(build):
    out = {}
    for d in SRC_DIRS:
        # libkvfs is built in its own tree (-fvisibility=hidden)
        od = os.path.join(build, "libkvfs", d) if d == "lib" else \
            os.path.join(build, d)
        if not os.path.isdir(od):
            continue
        for f in sorted(os.listdir(od)):
            src = os.path.join(d, f[:-2] + ".c")
            # an object whose source is gone is a stale build product
            if f.endswith(".o") and os.path.exists(src):
                out[src] = os.path.join(od, f)
    return out


def symbols(obj):
    r = subprocess.run(["nm", "-P", obj], capture_output=True, text=True,
                       check=True)
    defined, undef = set(), set()
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) < 2:
            continue
        name, kind = p[0], p[1]
        if kind == "U":
            undef.add(name)
        elif kind in "TDBRVWC" or kind in "G":
            defined.add(name)
    return defined, undef


def graph(build):
    objs = objects(build)
    defs, refs = {}, {}
    for src, obj in objs.items():
        d, u = symbols(obj)
        refs[src] = u
        for s in d:
            # gpu/gpu_rt.c is also compiled into libkvfs: the daemon's
            # objects call the engine's copy
            defs.setdefault(s, src)
    edges = {src: set() for src in objs}
    for src, u in refs.items():
        for s in u:
            t = defs.get(s)
            if t and t != src:
                edges[src].add(t)
    return edges


def sccs(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
            out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    quiet = "--quiet" in sys.argv
    edges = graph(args[0])
    if not edges:
        sys.stderr.write("filegraph: no objects under %s (build first)\n"
                         % args[0])
        return 2
    if "--dot" in sys.argv:
        print("digraph kvfs {")
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print('  "%s" -> "%s";' % (a, b))
        print("}")
        return 0
    comps = [c for c in sccs(edges) if len(c) > 1]
    pairs = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a]
                    if a in edges.get(b, ())})
    up = []
    for a in sorted(edges):
        for b in sorted(edges[a]):
            la = FILE_LAYER.get(a, layer_of(folder(a)))
            lb = FILE_LAYER.get(b, layer_of(folder(b)))
            if la is not None and lb is not None and lb < la:
                up.append((a, b))
    nedges = sum(len(v) for v in edges.values())
    print("files %d, arrows %d, cycles (components of >1 file) %d "
          "(files in them %d), mutual pairs %d, upward arrows %d"
          % (len(edges), nedges, len(comps), sum(len(c) for c in comps),
             len(pairs), len(up)))
    if not quiet:
        for c in comps:
            print("  cycle: " + " ".join(c))
        for a, b in pairs:
            print("  mutual: %s <-> %s" % (a, b))
        for a, b in up:
            print("  upward: %s -> %s" % (a, b))
    return 1 if comps or up else 0


if __name__ == "__main__":
    sys.exit(main())
