#!/usr/bin/env python3
"""include_graph.py - fails when the modules of the service code include
each other in a cycle.

A module is a source file and its header (server/log.c and server/log.h are
the module server/log). Module A depends on module B when A's .c or .h file
has `#include "B.h"`; the name is looked up as the compiler does it with
the layer's include path (the file's own directory first, then the layers
it may see, as in the Makefile). A cycle means two modules cannot be
understood, tested or replaced one without the other.

    include_graph.py [ROOT]        check the tree at ROOT (default: .)
    include_graph.py --self-test   check that a planted cycle is found
"""
import os
import re
import sys
import tempfile

# The include path of each layer, as the Makefile gives it.
LAYERS = {
    "core": ["core"],
    "api": ["core", "api"],
    "cli": ["core", "api", "cli"],
    "server": ["core", "api", "server"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_graph(root):
    graph = {}
    for layer, path in LAYERS.items():
        top = os.path.join(root, layer)
        for d, _, names in sorted(os.walk(top)):
            here = os.path.relpath(d, root)
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


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
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
