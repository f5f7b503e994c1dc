#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The API reference's check (ctest: api_docs). Runs Doxygen over the public headers
# (tools/cmake/Doxyfile.in) and counts, per header, the public declarations that
# have no doc comment. A header may not have more than tools/cmake/api_undocumented.txt
# allows: a new header must be fully documented, and a change may not add an
# undocumented declaration to an old one. When a count falls, lower it in the file
# (--update rewrites it).
#   bash tools/scripts/api_docs.sh BUILD_DIR [--update]
set -euo pipefail
build=$(cd "$1" && pwd); update=${2:-}
src="$(cd "$(dirname "$0")/../.." && pwd)"
command -v doxygen >/dev/null 2>&1 || { echo "api_docs: doxygen not installed (apt-get install doxygen): skipped"; exit 77; }
out="$build/docs/api-check"
rm -rf "$out"; mkdir -p "$out"
sed -e "s|@PROJECT_VERSION@|check|; s|@REMORA_DOCS_OUT@|$out|; s|@CMAKE_SOURCE_DIR@|$src|" \
    -e "s|@REMORA_DOCS_INPUT@|$(cd "$src" && echo core ops backends nn models dist train text | sed "s|\\([a-z]*\\)|$src/\\1|g")|" \
    -e "s|^GENERATE_HTML .*|GENERATE_HTML = NO|" "$src/tools/cmake/Doxyfile.in" >"$out/Doxyfile"
(cd "$out" && doxygen Doxyfile >/dev/null 2>&1) || { echo "api_docs: doxygen failed"; exit 1; }
# "path:line: warning: ... is not documented." -> counts per header (path relative to the source).
grep "is not documented" "$out/warnings.log" | sort -u | sed "s|^$src/||" | cut -d: -f1 | sort | uniq -c |
  awk '{print $2, $1}' >"$out/counts.txt"
base="$src/tools/cmake/api_undocumented.txt"
if [ "$update" = "--update" ]; then
  { echo "# Undocumented public declarations per header (tools/scripts/api_docs.sh)."; cat "$out/counts.txt"; } >"$base"
  echo "api_docs: wrote $base ($(awk '{s += $2} END {print s + 0}' "$out/counts.txt") undocumented)"; exit 0
fi
status=0
while read -r file n; do
  allowed=$(awk -v f="$file" '$1 == f {print $2}' "$base")
  if [ -z "$allowed" ] || [ "$n" -gt "$allowed" ]; then
    echo "api_docs: $file has $n undocumented public declarations (allowed: ${allowed:-0}); document them with /// comments:"
    grep "is not documented" "$out/warnings.log" | sort -u | sed "s|^$src/||" | grep "^$file:" | head -20
    status=1
  fi
done <"$out/counts.txt"
total=$(awk '{s += $2} END {print s + 0}' "$out/counts.txt")
echo "api_docs: $total undocumented public declarations in all (none new)"
[ $status = 0 ] || exit 1
