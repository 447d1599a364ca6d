#!/usr/bin/env python3
"""include_graph.py - fails when the modules of the daemon depend on each
other in a cycle.

A module is a source file and its header (server/infra/log.c and server/infra/log.h are
the module server/infra/log). Two graphs are checked:

- includes: module A depends on module B when A's .c or .h file has
  `#include "B.h"`; the name is looked up as the compiler does it with the
  layer's include path (the file's own directory first, then the layers it
  may see, as in the Makefile);
- symbols: module A depends on module B when A's object file names (calls,
  or takes the address of) a function or object that B's object defines,
  whatever header declares it: `nm` of every object under BUILD/obj, its
  undefined symbols (U) against the others' defined ones. An umbrella
  header (server.h, handlers.h) hides no dependency there. A source file
  with no header of its own belongs to the module of the header in its
  directory that declares most of what it defines (server/grpc/call.c,
  conn.c and loop.c implement h2.h: the module server/grpc/h2).

A cycle means two modules cannot be understood, tested or replaced one
without the other; every cycle is reported, with the symbols that make it.

    include_graph.py [ROOT]                 check the includes of the tree at ROOT (default: .)
    include_graph.py --symbols BUILD [ROOT] check the symbols of BUILD/obj (built from ROOT)
    include_graph.py --self-test            check that planted cycles are found, in both graphs
    include_graph.py --layer-path LAYER     print a layer's include path (as make layer-flags does)
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

# Each layer's include path, as the Makefile's LAYER_* give them
# (test_layering.sh checks that the two agree): a folder sees its own
# headers and those of the layers below it, bottom up core/, api/,
# server/infra/, server/tls/, server/service/, server/handlers/, then the
# two transports, which see neither each other; the daemon's own files
# (server/*.c) see every server/ folder; the CLI sees none of them.
_HANDLERS = ["core", "api", "server/infra", "server/tls", "server/service", "server/handlers"]
PATHS = {
    "core": ["core"],
    "api": ["core", "api"],
    "cli": ["core", "api", "cli"],
    "server/infra": _HANDLERS[:3],
    "server/tls": _HANDLERS[:4],
    "server/service": _HANDLERS[:5],
    "server/handlers": _HANDLERS,
    "server/http": _HANDLERS + ["server/http"],
    "server/grpc": _HANDLERS + ["server/grpc"],
    "server": _HANDLERS + ["server/http", "server/grpc", "server"],
}
# The Makefile's name of each layer (make layer-flags LAYER=...).
MAKE_NAMES = {layer: layer.split("/")[-1] for layer in PATHS}


def folder_of(rel):
    """The layer of a file or module path relative to the root: its
    server/ folder (server/infra/log.c -> server/infra), server for the
    daemon's own files (server/serve.c), else its top folder (core, api,
    cli)."""
    parts = rel.split("/")
    if parts[0] == "server" and len(parts) > 2 and "/".join(parts[:2]) in PATHS:
        return "/".join(parts[:2])
    return parts[0]


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_graph(root):
    graph = {}
    for top in ("core", "api", "cli", "server"):
        for d, _, names in sorted(os.walk(os.path.join(root, top))):
            here = os.path.relpath(d, root)
            path = PATHS[folder_of(here + "/")]
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                node = f"{here}/{name[:-2]}"
                deps = graph.setdefault(node, set())
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    for where in [here] + path:
                        if os.path.isfile(os.path.join(root, where, inc)):
                            target = os.path.normpath(f"{where}/{inc[:-2]}")
                            if target != node:
                                deps.add(target)
                            break
    return graph


def find_cycle(graph):
    """A list of modules forming a cycle (first == last), or None."""
    state = {}  # node -> 1 on the current path, 2 done
    path = []

    def visit(n):
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        path.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "server"))
        os.makedirs(os.path.join(root, "core"))
        files = {
            "core/tile.h": "",
            "server/a.h": '#include "tile.h"\n',
            "server/a.c": '#include "a.h"\n#include "b.h"\n',
            "server/b.h": "",
            "server/b.c": '#include "b.h"\n#include "c.h"\n',
            "server/c.h": "",
            "server/c.c": '#include "c.h"\n#include "a.h"\n',
        }
        for path, text in files.items():
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(text)
        cycle = find_cycle(module_graph(root))
        if cycle != ["server/a", "server/b", "server/c", "server/a"]:
            print(f"FAIL: the planted cycle a -> b -> c -> a was not found (got {cycle})")
            return 1
        os.remove(os.path.join(root, "server/c.c"))
        if find_cycle(module_graph(root)) is not None:
            print("FAIL: a cycle was reported after the planted one was removed")
            return 1
    print("include graph self-test: the planted cycle is found, and only it")
    return 0


# ---- the symbol graph ------------------------------------------------------

DEFINED = set("TDBRCGSVW")  # nm's global definitions (text, data, bss, read-only, common, weak)


def nm(path):
    """(defined, undefined) global symbol names of one object file."""
    out = subprocess.run(["nm", "-P", path], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        if parts[1] == "U":
            undefined.add(parts[0])
        elif parts[1] in DEFINED:
            defined.add(parts[0])
    return defined, undefined


def module_of(root, src, defined):
    """The module a source file (layer-relative, no .c) belongs to: its
    own header's, else the header of its directory declaring most of what
    it defines, else its own."""
    if os.path.isfile(os.path.join(root, src + ".h")):
        return src
    best, most = src, 0
    d = os.path.dirname(src)
    for h in sorted(glob.glob(os.path.join(root, d, "*.h"))):
        with open(h, encoding="utf-8") as f:
            text = f.read()
        n = sum(1 for name in defined if re.search(r"\b" + re.escape(name) + r"\b", text))
        if n > most:
            best, most = f"{d}/{os.path.basename(h)[:-2]}", n
    return best


def symbol_graph(build, root):
    """{module: {module it depends on: sorted witness symbols}} from the
    objects of the layers under BUILD/obj."""
    objs = []
    for top in ("core", "api", "cli", "server"):
        objs += sorted(glob.glob(os.path.join(build, "obj", top, "**", "*.o"), recursive=True))
    if not objs:
        raise SystemExit(f"no object files under {build}/obj: build first")
    owner, needs = {}, {}
    for o in objs:
        src = os.path.relpath(o, os.path.join(build, "obj"))[:-2]
        if not os.path.isfile(os.path.join(root, src + ".c")):
            continue  # left in BUILD by a source file that has moved or gone
        defined, undefined = nm(o)
        mod = module_of(root, src, defined)
        for name in defined:
            owner.setdefault(name, mod)
        needs.setdefault(mod, set()).update(undefined)
    graph = {m: {} for m in needs}
    for mod, undefined in needs.items():
        for name in undefined:
            dep = owner.get(name)
            if dep and dep != mod:
                graph[mod].setdefault(dep, set()).add(name)
    return {m: {d: sorted(w) for d, w in deps.items()} for m, deps in graph.items()}


def cycles(graph):
    """The strongly connected components of more than one module, each as
    a sorted list (Tarjan's algorithm)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def report_cycles(graph, comps):
    for comp in comps:
        sub = {m: {d: w for d, w in graph[m].items() if d in comp} for m in comp}
        loop = find_cycle(sub)
        print(f"FAIL: {len(comp)} modules form a cycle: {', '.join(comp)}")
        print("  e.g. " + " -> ".join(loop))
        for m in comp:
            for d, w in sorted(sub[m].items()):
                print(f"  {m} -> {d}: {', '.join(w[:4])}{' ...' if len(w) > 4 else ''}")


def check_symbols(build, root):
    graph = symbol_graph(build, root)
    comps = cycles(graph)
    if comps:
        report_cycles(graph, comps)
        return 1
    edges = sum(len(d) for d in graph.values())
    print(f"symbol graph: {len(graph)} modules, {edges} dependencies, no cycle")
    return 0


def self_test_symbols():
    """Objects compiled from planted sources: a -> b -> c -> a through
    symbols that no include line shows (c.c declares a_fn itself), and two
    files with no header of their own that implement one (d.h): no cycle."""
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        root, build = os.path.join(tmp, "src"), os.path.join(tmp, "build")
        files = {
            "server/a.h": "int a_fn(void);\n",
            "server/a.c": '#include "a.h"\nint b_fn(void);\nint a_fn(void) { return b_fn(); }\n',
            "server/b.h": "int b_fn(void);\n",
            "server/b.c": '#include "b.h"\nint c_fn(void);\nint b_fn(void) { return c_fn(); }\n',
            "server/c.h": "int c_fn(void);\n",
            "server/c.c": "int a_fn(void);\nint c_fn(void);\nint c_fn(void) { return a_fn(); }\n",
            "server/d/d.h": "int d1_fn(int);\nint d2_fn(int);\n",
            "server/d/d1.c": '#include "d.h"\nint d1_fn(int n) { return n ? d2_fn(n - 1) : 0; }\n',
            "server/d/d2.c": '#include "d.h"\nint d2_fn(int n) { return n ? d1_fn(n - 1) : 1; }\n',
        }

        def compile_all():
            for path in files:
                if path.endswith(".c"):
                    obj = os.path.join(build, "obj", path[:-2] + ".o")
                    os.makedirs(os.path.dirname(obj), exist_ok=True)
                    subprocess.run([cc, "-c", os.path.join(root, path), "-o", obj], check=True)

        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(text)
        compile_all()
        if find_cycle(module_graph(root)) is not None:
            print("FAIL: the planted symbol cycle is visible to the include graph; the test proves nothing")
            return 1
        graph = symbol_graph(build, root)
        comps = cycles(graph)
        if comps != [["server/a", "server/b", "server/c"]]:
            print(f"FAIL: the planted symbol cycle a -> b -> c -> a was not found alone (got {comps})")
            return 1
        if graph["server/c"] != {"server/a": ["a_fn"]}:
            print(f"FAIL: c's dependency on a is not named by its symbol (got {graph['server/c']})")
            return 1
        files["server/c.c"] = "int c_fn(void);\nint c_fn(void) { return 3; }\n"
        with open(os.path.join(root, "server/c.c"), "w", encoding="utf-8") as f:
            f.write(files["server/c.c"])
        compile_all()
        comps = cycles(symbol_graph(build, root))
        if comps:
            print(f"FAIL: a cycle was reported after the planted one was removed: {comps}")
            return 1
    print("symbol graph self-test: the planted cycle is found, and only it")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test() or self_test_symbols()
    if argv[1:2] == ["--layer-path"] and len(argv) == 3:
        layer = {v: k for k, v in MAKE_NAMES.items()}.get(argv[2])
        if not layer:
            print(f"no layer {argv[2]}")
            return 2
        print(" ".join("-I" + d for d in PATHS[layer]))
        return 0
    if argv[1:2] == ["--symbols"] and len(argv) in (3, 4):
        return check_symbols(argv[2], argv[3] if len(argv) == 4 else ".")
    root = argv[1] if len(argv) > 1 else "."
    graph = module_graph(root)
    cycle = find_cycle(graph)
    if cycle:
        print("FAIL: include cycle: " + " -> ".join(cycle))
        return 1
    edges = sum(len(d) for d in graph.values())
    print(f"include graph: {len(graph)} modules, {edges} dependencies, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
