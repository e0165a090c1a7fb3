#!/usr/bin/env python3
"""The layering test: folders are layers, and arrows only point down.

Reads the graph CMake wrote (layers.txt, from cmake/LoomLayers.cmake) and every
quoted include of the project's sources, and fails on
  - an include that runs up or sideways: into a folder the file's layer or
    view does not depend on (the compiler already refuses most of these; this
    also catches a header no source of its own layer includes);
  - an include into another layer's internals: a subfolder it does not export;
  - an include with "..", or one that names no folder of the project;
  - a cycle, in the layer graph or among the files;
  - a top-level folder with sources that no layer or view accounts for.
tests/ and bench/ test and measure the internals and may include anything.

    layering_test.py SOURCE_DIR LAYERS_TXT
    layering_test.py --self-test    (each rule catches what it should)
"""

import os
import re
import sys

WHITE_BOX = {"tests", "bench"}
NOT_SOURCE = {"build", "cmake", "docs", "scripts", "include", ".git", ".ci"}
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_graph(path):
    layers, views = {}, {}
    with open(path) as f:
        for line in f:
            kind, _, rest = line.strip().partition(" ")
            name, _, rest = rest.partition(":")
            if kind == "layer":
                deps, _, exports = rest.partition("|")
                layers[name] = (deps.split(), set(exports.split()))
            elif kind == "view":
                views[name] = rest.split()
    return layers, views


def closure(layers, name, seen=None):
    seen = set() if seen is None else seen
    if name in seen:
        return seen
    seen.add(name)
    for dep in layers[name][0]:
        closure(layers, dep, seen)
    return seen


def layer_cycle(layers):
    state = {}

    def visit(name, path):
        if state.get(name) == "open":
            return path[path.index(name):] + [name]
        if state.get(name) == "done":
            return None
        state[name] = "open"
        for dep in layers.get(name, ([], None))[0]:
            found = visit(dep, path + [name])
            if found:
                return found
        state[name] = "done"
        return None

    for name in layers:
        found = visit(name, [])
        if found:
            return found
    return None


def sources(root):
    for top in sorted(os.listdir(root)):
        if top in NOT_SOURCE or top.startswith(".") or not os.path.isdir(os.path.join(root, top)):
            continue
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                if name.endswith(SOURCE_SUFFIXES):
                    yield top, os.path.relpath(os.path.join(folder, name), root)


def file_cycles(graph):
    """Cycles among the project's files (Tarjan's strongly connected parts)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1 or v in graph.get(v, ()):
                found.append(sorted(part))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            strong(v)
    return found


def check(root, layers_txt):
    layers, views = read_graph(layers_txt)
    problems = []

    cycle = layer_cycle(layers)
    if cycle:
        problems.append("the layers form a cycle: " + " -> ".join(cycle))

    graph = {}
    for top, path in sources(root):
        with open(os.path.join(root, path), errors="replace") as f:
            includes = INCLUDE.findall(f.read())
        graph[path] = []
        if top in layers:
            visible = closure(layers, top)
        elif top in views:
            visible = set(views[top])
        elif top in WHITE_BOX:
            visible = None
        else:
            problems.append(f"{path}: folder {top}/ is neither a layer nor a view (cmake/LoomLayers.cmake)")
            continue
        for target in includes:
            parts = target.split("/")
            if ".." in parts or "." in parts:
                problems.append(f'{path}: "{target}" climbs with a relative path; name it from the project root')
                continue
            if parts[0] == "loom":  # the public headers under include/
                continue
            if os.path.exists(os.path.join(root, target)):
                graph[path].append(target)
            else:
                problems.append(f'{path}: "{target}" names no file of the project')
                continue
            if visible is None:
                continue
            folder = parts[0]
            if folder not in visible:
                direction = "up or sideways" if folder in layers else "outside the layers"
                problems.append(f'{path}: "{target}" runs {direction}: {top} may see {", ".join(sorted(visible))}')
            elif folder != top and len(parts) > 2 and folder in layers and parts[1] not in layers[folder][1]:
                problems.append(f'{path}: "{target}" reaches into {folder}/{parts[1]}/, which {folder} does not export')

    for part in file_cycles(graph):
        problems.append("include cycle among: " + ", ".join(part))

    return problems, len(graph), len(layers), len(views)


# A small tree with one breach of each rule, and the words each must draw.
SELF_TEST_TREE = {
    "layers.txt": "layer low: | pub\nlayer mid: low | \nlayer high: mid | \nview tool: tool low\n",
    "low/a.hpp": "",
    "low/pub/b.hpp": "",
    "low/priv/c.hpp": "",
    "mid/d.hpp": '#include "low/a.hpp"\n#include "low/pub/b.hpp"\n',
    "mid/up.cpp": '#include "high/e.hpp"\n',
    "mid/internal.cpp": '#include "low/priv/c.hpp"\n',
    "mid/climb.cpp": '#include "../low/a.hpp"\n',
    "mid/missing.cpp": '#include "low/nothing.hpp"\n',
    "high/e.hpp": '#include "high/f.hpp"\n',
    "high/f.hpp": '#include "high/e.hpp"\n',
    "tool/main.cpp": '#include "low/a.hpp"\n#include "mid/d.hpp"\n',
    "stray/g.cpp": "",
    "tests/t.cpp": '#include "low/priv/c.hpp"\n',
}
SELF_TEST_EXPECT = [
    'mid/up.cpp: "high/e.hpp" runs up or sideways',
    'mid/internal.cpp: "low/priv/c.hpp" reaches into low/priv/',
    'mid/climb.cpp: "../low/a.hpp" climbs',
    'mid/missing.cpp: "low/nothing.hpp" names no file',
    "include cycle among: high/e.hpp, high/f.hpp",
    'tool/main.cpp: "mid/d.hpp" runs up or sideways',
    "stray/g.cpp: folder stray/ is neither a layer nor a view",
]


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        for path, text in SELF_TEST_TREE.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)) or root, exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        problems, _, _, _ = check(root, os.path.join(root, "layers.txt"))
        with open(os.path.join(root, "layers.txt"), "a") as f:
            f.write("layer low: high | pub\n")
        cyclic, _, _, _ = check(root, os.path.join(root, "layers.txt"))
    missed = [e for e in SELF_TEST_EXPECT if not any(e in p for p in problems)]
    if not any("the layers form a cycle" in p for p in cyclic):
        missed.append("the layers form a cycle")
    extra = [p for p in problems if not any(e in p for e in SELF_TEST_EXPECT)]
    for m in missed:
        print("layering self-test: not caught:", m)
    for x in extra:
        print("layering self-test: reported without cause:", x)
    print(f"layering self-test: {len(SELF_TEST_EXPECT) + 1 - len(missed)} of {len(SELF_TEST_EXPECT) + 1} breaches caught")
    return 1 if missed or extra else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    problems, files, layers, views = check(sys.argv[1], sys.argv[2])
    for p in problems:
        print("layering:", p)
    print(f"layering: {files} files, {layers} layers, {views} views, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
