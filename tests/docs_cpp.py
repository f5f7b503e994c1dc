#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The C++ blocks of README.md and docs/*.md compile against the installed package.

  docs_cpp.py BUILD_DIR SOURCE_DIR

Installs BUILD_DIR into a temporary prefix (cmake --install), then compiles every
```cpp block with `c++ -std=c++17 -fsyntax-only -I PREFIX/include`:

- a block with its own `main` is a whole program, compiled as it is;
- any other block is a fragment: its #include, using and namespace-alias lines go
  first (after <remora/remora.h> and `using namespace remora;`), the rest into the
  body of a main(), after the declarations of an HTML comment on the line just
  before the fence, `<!-- cpp context: DECLARATIONS -->` (what the fragment uses but
  does not declare: `Tensor q, k, v;`);
- a block fenced ```cpp sketch is an outline (an interface excerpt, a file of the
  source tree with `...` in it): listed, not compiled.

Exit 1 naming the file, the line and the compiler's first errors for each block that
does not compile.
"""
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```cpp([^\n]*)\n(.*?)^```", re.S | re.M)
CONTEXT = re.compile(r"<!--\s*cpp context:(.*?)-->\s*$", re.S)
TOP = re.compile(r"^\s*(#include|using namespace|using [A-Za-z_:]+\s*=|namespace \w+\s*=)")


def blocks(src):
    files = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    for path in files:
        text = open(path, encoding="utf-8").read()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            ctx = CONTEXT.search(before)
            yield os.path.relpath(path, src), line, m.group(1).strip(), m.group(2), ctx.group(1).strip() if ctx else ""


def program(body, context):
    if re.search(r"\bint\s+main\s*\(", body):
        return body
    top, inner = [], []
    for l in body.splitlines():
        (top if TOP.match(l) and not inner else inner).append(l)
    return "\n".join(["#include <fstream>", "#include <iostream>", "#include <memory>", "#include <string>",
                      "#include <vector>", "#include <remora/remora.h>", "using namespace remora;"] + top +
                     ["int main(int argc, char** argv) {", "  (void)argc; (void)argv;", "  " + context] +
                     inner + ["  return 0;", "}", ""])


def main():
    build, src = sys.argv[1], sys.argv[2]
    cxx = os.environ.get("CXX", "c++")
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "prefix")
        r = subprocess.run(["cmake", "--install", build, "--prefix", prefix], capture_output=True, text=True)
        if r.returncode != 0:
            print("docs_cpp: cmake --install failed:\n" + r.stdout + r.stderr)
            return 1
        jobs, sketches = [], []
        for i, (path, line, info, body, context) in enumerate(blocks(src)):
            if info == "sketch":
                sketches.append(f"{path}:{line}")
                continue
            if info:
                print(f"docs_cpp: {path}:{line}: unknown fence ```cpp {info} (use ```cpp or ```cpp sketch)")
                return 1
            f = os.path.join(tmp, f"block{i}.cpp")
            open(f, "w").write(program(body, context))
            jobs.append((path, line, f))

        def compile_one(job):
            path, line, f = job
            r = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-I", os.path.join(prefix, "include"), f],
                               capture_output=True, text=True)
            return path, line, r.returncode, r.stderr

        failed = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
            for path, line, rc, err in ex.map(compile_one, jobs):
                if rc != 0:
                    failed += 1
                    errors = [l for l in err.splitlines() if "error" in l][:5]
                    print(f"docs_cpp: {path}:{line}: does not compile against the installed package:")
                    print("\n".join("  " + l for l in errors))
        print(f"docs_cpp: {len(jobs) - failed} of {len(jobs)} C++ blocks compile; "
              f"{len(sketches)} outlines not compiled ({', '.join(sketches)})")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
