#!/usr/bin/env python3
"""include_graph.py - fails when the modules of the daemon depend on each
other in a cycle, or when code uses a layer above its own.

A module is a source file and its header (server/infra/log.c and server/infra/log.h are
the module server/infra/log). Two graphs are checked for cycles:

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

The same symbols are checked against the layers (RANK, bottom up): every
symbol an object uses and another object defines must be defined in the
object's own folder or in a lower layer. A call upward, or from one
transport into the other, fails with the symbol that makes it; what lets a
lower layer reach a higher one is a registration the daemon wires
(serve.c), and that leaves no such symbol. A function a linked library
exports, defined by the project (interposition: a recv() in front of the
C library's), fails the check on its own; the self-test plants one.

A cycle means two modules cannot be understood, tested or replaced one
without the other; every cycle is reported, with the symbols that make it.

    include_graph.py [ROOT]                 check the includes of the tree at ROOT (default: .)
    include_graph.py --symbols BUILD [ROOT] check the symbols of BUILD/obj (built from ROOT):
                                            no cycle, nothing upward
    include_graph.py --self-test            check that planted cycles and upward calls are found
    include_graph.py --layer-path LAYER     print a layer's include path (as make layer-flags does)
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

# The layers, bottom up, and each one's include path, as the Makefile's
# LAYER_* give them (test_layering.sh checks that the two agree): a folder
# sees its own headers and those of the layers below it. The two
# transports share a rank and see neither each other; the daemon's own
# files (server/*.c) see every server/ folder; the CLI is above the daemon
# (it reaches `tiled serve` through a weak symbol) but sees none of it.
RANK = {
    "core": 0,
    "api": 1,
    "server/infra": 2,
    "server/tls": 3,
    "server/service": 4,
    "server/handlers": 5,
    "server/http": 6,
    "server/grpc": 6,
    "server": 7,
    "cli": 8,
}
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


def read_objects(build, root):
    """{source path without .c: (defined, undefined)} of the objects of
    BUILD/obj whose source is still in ROOT (a moved or removed source
    file leaves its object behind)."""
    objs = {}
    for top in ("core", "api", "cli", "server"):
        for o in sorted(glob.glob(os.path.join(build, "obj", top, "**", "*.o"), recursive=True)):
            src = os.path.relpath(o, os.path.join(build, "obj"))[:-2]
            if os.path.isfile(os.path.join(root, src + ".c")):
                objs[src] = nm(o)
    if not objs:
        raise SystemExit(f"no object files under {build}/obj: build first")
    return objs


def library_symbols(binary):
    """The names the shared libraries BINARY links define (`nm -D` of each
    library `ldd` lists); none when BINARY is not there."""
    if not os.path.isfile(binary):
        return set()
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    names = set()
    for lib in re.findall(r"=> (/\S+)", out):
        dyn = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
        names.update(line.split()[-1].split("@")[0] for line in dyn.splitlines() if line.strip())
    return names


def owners(objs, libs):
    """{symbol: the source file defining it}, without the library functions
    the daemon interposes (LIBS), and those as {symbol: source}."""
    owner, interposed = {}, {}
    for src, (defined, _) in objs.items():
        for name in defined:
            (interposed if name in libs else owner).setdefault(name, src)
    return owner, interposed


def symbol_graph(objs, root, owner):
    """{module: {module it depends on: sorted witness symbols}}."""
    mods = {src: module_of(root, src, defined) for src, (defined, _) in objs.items()}
    needs = {}
    for src, (_, undefined) in objs.items():
        needs.setdefault(mods[src], set()).update(undefined)
    graph = {m: {} for m in needs}
    for mod, undefined in needs.items():
        for name in undefined:
            dep = owner.get(name)
            if dep and mods[dep] != mod:
                graph[mod].setdefault(mods[dep], set()).add(name)
    return {m: {d: sorted(w) for d, w in deps.items()} for m, deps in graph.items()}


def upward(objs, owner):
    """[(user, definer, symbols)]: each object's uses of a symbol defined
    in another folder at the same or a higher layer."""
    found = {}
    for src, (_, undefined) in objs.items():
        mine = folder_of(src)
        for name in undefined:
            dep = owner.get(name)
            if not dep:
                continue
            theirs = folder_of(dep)
            if theirs != mine and RANK[theirs] >= RANK[mine]:
                found.setdefault((src, dep), []).append(name)
    return [(src, dep, sorted(names)) for (src, dep), names in sorted(found.items())]


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
    objs = read_objects(build, root)
    owner, interposed = owners(objs, library_symbols(os.path.join(build, "tiled")))
    graph = symbol_graph(objs, root, owner)
    comps = cycles(graph)
    if comps:
        report_cycles(graph, comps)
    ups = upward(objs, owner)
    for src, dep, names in ups:
        how = "across the transports" if RANK[folder_of(dep)] == RANK[folder_of(src)] else "up"
        print(f"FAIL: {src} ({folder_of(src)}) reaches {how} into {dep} ({folder_of(dep)}): {', '.join(names)}")
    # A function a linked library exports, defined by the project, takes
    # every caller in the process (the library's own included): the
    # project uses its libraries through their APIs, never in front of them.
    for name in sorted(interposed):
        print(f"FAIL: {interposed[name]} defines {name}, which a library the daemon links exports")
    if comps or ups or interposed:
        return 1
    edges = sum(len(d) for d in graph.values())
    print(f"symbol graph: {len(graph)} modules, {edges} dependencies, no cycle; {len(objs)} objects, "
          f"none reaching up or across the transports, none defining a function its libraries export")
    return 0


def write_files(root, files):
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w", encoding="utf-8") as f:
            f.write(text)


def compile_files(root, build, files):
    cc = os.environ.get("CC", "cc")
    for path in files:
        if path.endswith(".c"):
            obj = os.path.join(build, "obj", path[:-2] + ".o")
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            subprocess.run([cc, "-c", os.path.join(root, path), "-o", obj], check=True)


def self_test_symbols():
    """Objects compiled from planted sources: a -> b -> c -> a through
    symbols that no include line shows (c.c declares a_fn itself), and two
    files with no header of their own that implement one (d.h): no cycle."""
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
        write_files(root, files)
        compile_files(root, build, files)
        if find_cycle(module_graph(root)) is not None:
            print("FAIL: the planted symbol cycle is visible to the include graph; the test proves nothing")
            return 1
        objs = read_objects(build, root)
        graph = symbol_graph(objs, root, owners(objs, set())[0])
        comps = cycles(graph)
        if comps != [["server/a", "server/b", "server/c"]]:
            print(f"FAIL: the planted symbol cycle a -> b -> c -> a was not found alone (got {comps})")
            return 1
        if graph["server/c"] != {"server/a": ["a_fn"]}:
            print(f"FAIL: c's dependency on a is not named by its symbol (got {graph['server/c']})")
            return 1
        fixed = {"server/c.c": "int c_fn(void);\nint c_fn(void) { return 3; }\n"}
        write_files(root, fixed)
        compile_files(root, build, fixed)
        objs = read_objects(build, root)
        comps = cycles(symbol_graph(objs, root, owners(objs, set())[0]))
        if comps:
            print(f"FAIL: a cycle was reported after the planted one was removed: {comps}")
            return 1
    print("symbol graph self-test: the planted cycle is found, and only it")
    return 0


def self_test_layers():
    """Objects compiled from planted sources: infra calling the service and
    one transport calling the other are found, by name, and nothing else:
    not the service calling infra (downward), not a call within a folder,
    not a call to a library function the daemon defines itself."""
    with tempfile.TemporaryDirectory() as tmp:
        root, build = os.path.join(tmp, "src"), os.path.join(tmp, "build")
        files = {
            "server/infra/sink.c": "int svc_fn(void);\nint sink_fn(void);\nint sink_fn(void) { return svc_fn(); }\n",
            "server/infra/peer.c": "int sink_fn(void);\nint peer_fn(void);\nint peer_fn(void) { return sink_fn(); }\n",
            "server/service/svc.c": "int peer_fn(void);\nint svc_fn(void);\nint svc_fn(void) { return peer_fn(); }\n",
            "server/grpc/g.c": "int lib_fn(void);\nint g_fn(void);\nint g_fn(void) { return lib_fn(); }\n",
            "server/http/h.c": "int g_fn(void);\nint h_fn(void);\nint h_fn(void) { return g_fn(); }\n",
            "server/http/wire.c": "int lib_fn(void);\nint lib_fn(void) { return 0; }\n",
        }
        write_files(root, files)
        compile_files(root, build, files)
        objs = read_objects(build, root)
        owner, interposed = owners(objs, {"lib_fn"})
        got = upward(objs, owner)
        want = [("server/http/h", "server/grpc/g", ["g_fn"]), ("server/infra/sink", "server/service/svc", ["svc_fn"])]
        if got != want or interposed != {"lib_fn": "server/http/wire"}:
            print(f"FAIL: the planted infra -> service and http -> grpc calls were not found alone (got {got})")
            return 1
        if upward(objs, owners(objs, set())[0]) != sorted(want + [("server/grpc/g", "server/http/wire", ["lib_fn"])]):
            print("FAIL: a call into a function the libraries do not define was not found")
            return 1
        fixed = {
            "server/infra/sink.c": "int sink_fn(void);\nint sink_fn(void) { return 1; }\n",
            "server/http/h.c": "int h_fn(void);\nint h_fn(void) { return 2; }\n",
        }
        write_files(root, fixed)
        compile_files(root, build, fixed)
        objs = read_objects(build, root)
        got = upward(objs, owners(objs, {"lib_fn"})[0])
        if got:
            print(f"FAIL: an upward call was reported after the planted ones were removed: {got}")
            return 1
    print("layer self-test: the planted infra -> service and http -> grpc calls are found, and only they")
    return 0


def self_test_interposition():
    """A planted recv() in a daemon's object is found against the libraries
    a binary linking that object lists (libc), and nothing else is."""
    files = {"server/http/planted.c": "#include <sys/socket.h>\n#include <sys/types.h>\n"
             "ssize_t recv(int fd, void *buf, size_t n, int flags);\n"
             "ssize_t recv(int fd, void *buf, size_t n, int flags)\n"
             "{ (void)fd; (void)buf; (void)n; (void)flags; return 0; }\n"
             "int planted_main(void);\nint planted_main(void) { return 0; }\n"}
    with tempfile.TemporaryDirectory() as tmp:
        root, build = os.path.join(tmp, "src"), os.path.join(tmp, "build")
        write_files(root, files)
        compile_files(root, build, files)
        obj = os.path.join(build, "obj", "server", "http", "planted.o")
        main_c = os.path.join(tmp, "main.c")
        with open(main_c, "w", encoding="utf-8") as f:
            f.write("int planted_main(void);\nint main(void) { return planted_main(); }\n")
        binary = os.path.join(build, "tiled")
        subprocess.run([os.environ.get("CC", "cc"), main_c, obj, "-o", binary], check=True)
        libs = library_symbols(binary)
        _, interposed = owners({"server/http/planted": nm(obj)}, libs)
        if sorted(interposed) != ["recv"]:
            print(f"FAIL: the planted recv() was not found alone (found: {sorted(interposed)})")
            return 1
    print("interposition self-test: the planted recv() is found, and only it")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test() or self_test_symbols() or self_test_layers() or self_test_interposition()
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
