#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The API reference's check (ctest: api_docs). Runs Doxygen over the public headers
# (tools/cmake/Doxyfile.in) and fails on any public declaration without a doc
# comment, listing each one (file:line and what it is): every installed header is
# documented, and a new declaration must be too.
#   bash tools/scripts/api_docs.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src="$(cd "$(dirname "$0")/../.." && pwd)"
command -v doxygen >/dev/null 2>&1 || { echo "api_docs: doxygen not installed (apt-get install doxygen): skipped"; exit 77; }
out="$build/docs/api-check"
rm -rf "$out"; mkdir -p "$out"
sed -e "s|@PROJECT_VERSION@|check|; s|@REMORA_DOCS_OUT@|$out|; s|@CMAKE_SOURCE_DIR@|$src|" \
    -e "s|@REMORA_DOCS_INPUT@|$(cd "$src" && echo core ops backends nn models distributed train text | sed "s|\\([a-z]*\\)|$src/\\1|g")|" \
    -e "s|^GENERATE_HTML .*|GENERATE_HTML = NO|" "$src/tools/cmake/Doxyfile.in" >"$out/Doxyfile"
(cd "$out" && doxygen Doxyfile >/dev/null 2>&1) || { echo "api_docs: doxygen failed"; exit 1; }
grep "is not documented" "$out/warnings.log" | sort -u | sed "s|^$src/||" >"$out/undocumented.txt" || true
n=$(wc -l <"$out/undocumented.txt")
if [ "$n" -gt 0 ]; then
  echo "api_docs: $n public declarations have no doc comment; document each with a /// comment:"
  head -50 "$out/undocumented.txt"
  [ "$n" -le 50 ] || echo "... and $((n - 50)) more ($out/undocumented.txt)"
  exit 1
fi
echo "api_docs: every public declaration is documented"
