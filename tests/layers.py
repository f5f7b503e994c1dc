#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The library's layering, checked over its include graph (docs/architecture.md,
"The layers"): every quoted #include of a library file must name a file of a
folder its own folder may include, and no library file may pass 1,000 lines.

    layers.py SOURCE_DIR

Prints each offending include (file:line -> target) and exits 1; 0 when clean.
"""
import os
import re
import sys

# Folder -> the folders (or single files) it may include, itself included.
# Keep in step with the table in docs/architecture.md.
BACKENDS_CORE = {"core/dtype.h", "core/error.h", "core/half.h", "core/philox.h", "core/adam_step.h",
                 "core/parallel.h", "core/device_registry.h", "core/version.h"}
ALLOWED = {
    "core": {"core", "backends/backend.h", "ops/ops.def"},  # the op table: declarations only
    "backends": {"backends", "ops/ops.def"} | BACKENDS_CORE,  # the UnaryOp entries of REMORA_UNARY rows
    "ops": {"core", "backends", "ops"},
    "nn": {"core", "ops", "nn"},
    "models": {"core", "ops", "nn", "models"},
    "cases": {"core", "backends", "ops", "nn", "models", "cases"},
    "text": {"text", "core/error.h"},
    "distributed": {"distributed", "core", "nn", "backends/backend.h"},
    "train": {"train", "core", "backends/backend.h", "ops", "nn", "models", "distributed"},
    "cli": {"cli", "core", "backends", "ops", "cases", "nn", "models", "text", "distributed", "train"},
}
# Library files allowed past MAX_LINES, each with its reason; an entry whose file
# has come under the limit (or is gone) fails too, so the list only shrinks.
MAX_LINES = 1000
LONG_FILES = {
    "backends/cuda/cuda_flash.cu": "the tensor-core attention kernels, forward and backward",
}
SOURCES = (".h", ".cpp", ".cu", ".cuh", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(rel):
    """The layer a path belongs to: the longest key of ALLOWED it lies under."""
    best = None
    for f in ALLOWED:
        if rel == f or rel.startswith(f + "/"):
            if best is None or len(f) > len(best):
                best = f
    return best


def allowed(src_folder, target):
    for a in ALLOWED[src_folder]:
        if target == a or target.startswith(a + "/"):
            # A folder entry covers its own files, not those of a deeper layer.
            deeper = folder_of(target)
            if os.path.splitext(a)[1] or deeper == a or deeper not in ALLOWED or deeper in ALLOWED[src_folder]:
                return True
    return False


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad, files = [], 0
    for layer in ALLOWED:
        for dirpath, _, names in os.walk(os.path.join(root, layer)):
            for name in sorted(names):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if folder_of(rel) != layer:
                    continue  # a deeper layer's file, checked under its own
                files += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.readlines()
                if len(lines) > MAX_LINES and rel not in LONG_FILES:
                    bad.append(f"{rel}: {len(lines)} lines (a library file may have {MAX_LINES})")
                for i, line in enumerate(lines, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = os.path.normpath(os.path.join(os.path.dirname(rel), m.group(1)))
                    if not os.path.exists(os.path.join(root, target)):
                        continue  # generated (build/include) or a system header in quotes
                    if target.startswith(".."):
                        bad.append(f"{rel}:{i}: includes {m.group(1)}, outside the source tree")
                    elif not allowed(layer, target):
                        bad.append(f"{rel}:{i}: {layer}/ includes {target}, which it may not "
                                   f"(may include: {', '.join(sorted(ALLOWED[layer]))})")
    for rel in LONG_FILES:
        path = os.path.join(root, rel)
        n = sum(1 for _ in open(path, encoding="utf-8", errors="replace")) if os.path.exists(path) else 0
        if n <= MAX_LINES:
            bad.append(f"{rel}: listed as over {MAX_LINES} lines but has {n}: take it off LONG_FILES")
    for b in bad:
        print(b)
    print(f"layers: {files} library files, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
