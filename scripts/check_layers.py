#!/usr/bin/env python3
"""Checks that the source tree's includes follow the pipeline's layers:

    runtime -> support -> ir -> frontend, passes, interp -> conversion
      -> cpu, gpu -> target -> pipelines -> api -> tools, python

A file may include headers of its own layer or of layers below it, never
above it, never of a sibling (cpu and gpu, frontend and passes), and never
another library's private header through "../". Prints each violation
with its file and line; exit status 1 if there is any.

    scripts/check_layers.py [SOURCE_DIR]
"""
import os
import re
import sys

RANK = {"runtime": 0, "support": 1, "ir": 2, "frontend": 3, "passes": 3, "interp": 3,
        "conversion": 4, "cpu": 5, "gpu": 5, "target": 6, "pipelines": 7, "api": 8,
        "tools": 9, "python": 9}

# Where a source file lives -> its layer.
SOURCE_LAYERS = [("runtime/", "runtime"), ("lib/support/", "support"), ("lib/ir/", "ir"),
                 ("lib/frontend/", "frontend"), ("lib/passes/", "passes"),
                 ("lib/interp/", "interp"), ("lib/codegen/conversion/", "conversion"),
                 ("lib/codegen/cpu/", "cpu"), ("lib/codegen/gpu/", "gpu"),
                 ("lib/codegen/target/", "target"), ("lib/pipelines/", "pipelines"),
                 ("lib/api/", "api"), ("tools/", "tools"), ("python/", "python"),
                 ("include/kiln/Support/", "support"), ("include/kiln/IR/", "ir"),
                 ("include/kiln/Frontend/", "frontend"), ("include/kiln/Passes/", "passes"),
                 ("include/kiln/Interp/", "interp"), ("include/kiln/Conversion/", "conversion"),
                 ("include/kiln/Codegen/Cpu", "cpu"), ("include/kiln/Codegen/Gpu", "gpu"),
                 ("include/kiln/Target/", "target"), ("include/kiln/Pipelines/", "pipelines"),
                 ("include/kiln/", "api")]

# An included "kiln/..." header -> its layer.
HEADER_LAYERS = [("kiln/runtime.h", "runtime"), ("kiln/cuda.h", "runtime"),
                 ("kiln/profile.h", "runtime"), ("kiln/kernels.h", "runtime"),
                 ("kiln/Support/", "support"), ("kiln/IR/", "ir"), ("kiln/Frontend/", "frontend"),
                 ("kiln/Passes/", "passes"), ("kiln/Interp/", "interp"),
                 ("kiln/Conversion/", "conversion"), ("kiln/Codegen/Cpu", "cpu"),
                 ("kiln/Codegen/Gpu", "gpu"), ("kiln/Target/", "target"),
                 ("kiln/Pipelines/", "pipelines"), ("kiln/", "api")]


def layer_of(path, table):
    for prefix, layer in table:
        if path.startswith(prefix):
            return layer
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    include = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
    problems = []
    for top in ("lib", "include", "runtime", "tools", "python"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".h", ".cpp", ".c", ".inc", ".def")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                mine = layer_of(rel, SOURCE_LAYERS)
                if mine is None:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = include.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        where = f"{rel}:{lineno}"
                        if target.startswith("../"):
                            problems.append(f"{where}: includes {target} through '../'")
                            continue
                        theirs = layer_of(target, HEADER_LAYERS)
                        if theirs is None or theirs == mine:
                            continue
                        if RANK[theirs] >= RANK[mine]:
                            problems.append(f"{where}: the {mine} layer includes {target} "
                                            f"({theirs}, not below it)")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} include(s) against the layers", file=sys.stderr)
        return 1
    print("check_layers: every include follows the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
