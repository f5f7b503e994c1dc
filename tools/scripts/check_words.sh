#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Checks that the text users read describes the software, not the history of its
# development, and cites no notes outside the repository (the word list is
# PATTERNS below).
#
#   tools/scripts/check_words.sh [REMORA]
#
# Scans README.md and docs/*.md, the installed headers (core ops backends nn models
# distributed train text: *.h), the comments of every *.h, *.cpp, *.cu, *.py, *.sh and
# CMakeLists.txt in the tree, and, when REMORA (the built `remora` driver) is given,
# `remora --help` and `remora COMMAND --help` of every command. Prints each hit as
# file:line: text and exits 1 when there is any, 0 otherwise.
#
# ONLY=docs|headers|help|comments limits the scan to one part.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
REMORA="${1:-}"
ONLY="${ONLY:-}"

# The word list: extended regular expressions, matched case-insensitively. Each is
# narrow enough that ordinary English ("is used to compute", "from scratch",
# "the previous segment") does not match.
PATTERNS=(
  '\bsessions? [0-9]+'
  '\b(this|that|the|previous|earlier|last|next|later|same|another|other|one|every|each|first|second) (session|sessions)\b'
  "\\bsession's\\b"
  '\bissues? #?[0-9]+'
  "\\b(this|that|the|previous|earlier) issue('s)?\\b"
  '\bengineers?\b'
  '\b(the|this|that|previous|last|next|each|every|its|a) landings?\b'
  '\blanded\b'
  '\bthe previous (landing|session|engineer|commit|change|version|branch|implementation|code|path|kernel|loop)s?\b'
  '\bthe CI machine\b'
  '\bcoordinator\b'
  '\bscratch (program|programs|script|scripts|branch|build|experiment|experiments|test|tests)\b'
  '\bthe old (path|code|kernel|kernels|loop|version|implementation|way|layout|rule|driver)\b'
  '\b(it|they|we|which|that|this|code|path|driver|kernel|test|script|model|function|op|loop|benchmark) used to\b'
  '\bused to (be|have)\b'
  '\bwe tried\b'
  '\bdevelopment machine\b'
  '\bnot yet run\b'
  '\bhas not run here\b'
  '\btried (earlier|before)\b'
  '\btried and not kept\b'
  '\bin this branch\b'
  '\b(a|the|been|was|is) lent (GPU|machine|device)s?\b'
  '\bbefore this (integration|change|commit|session)\b'
  '\bTODO from\b'
  '\bSPEC\.md\b'
  '/work/shared'
)
RE="$(IFS='|'; echo "${PATTERNS[*]}")"
# Matched with case: the developers' notes, cited as "SPEC §4", "SPEC order", "the SPEC"
# (the lower-case "spec" of RemSpec is ordinary code vocabulary).
RE_CASE='\bSPEC\b'

# The lines of stdin ("N:text" or "N<TAB>text") that match RE without case or RE_CASE with it.
matching() {
  local t
  t="$(mktemp "$tmp/m.XXXXXX")"
  cat >"$t"
  { grep -iE -- "$RE" "$t"; grep -E -- "$RE_CASE" "$t"; } | sort -n -u
}
# Spellings that contain a listed word but are names, not words: the file tests/helpers.h.
NAMES='helpers\.h'

# Keeps the lines of "prefix: text" input whose text still matches once NAMES are removed.
drop_names() {
  local line
  while IFS= read -r line; do
    [ -n "$(printf '%s\n' "$line" | sed -E "s/$NAMES//g" | matching)" ] && printf '%s\n' "$line"
  done
  return 0
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/hits"
report() { tee -a "$tmp/hits"; }  # stdin: lines "file:line: text"

# file:line: text for every matching line of plain text files.
scan_text() {
  local f
  for f in "$@"; do
    [ -f "$f" ] || continue
    grep -n '' "$f" | matching | sed "s|^\([0-9]*\):|${f#$ROOT/}:\1: |" | drop_names
  done
}

# The comment text of a source file, as "line<TAB>text" (code outside comments is blank).
comments_of() {
  local f=$1
  case "$f" in
    *.h|*.cpp|*.cu|*.inc)
      awk '{
        t = ""; s = $0
        if (inblock) {
          e = index(s, "*/")
          if (e) { t = substr(s, 1, e - 1); s = substr(s, e + 2); inblock = 0 } else { t = s; s = "" }
        }
        while (s != "") {
          p = index(s, "//"); q = index(s, "/*")
          if (p && (!q || p < q)) { t = t " " substr(s, p + 2); break }
          if (q) {
            r = substr(s, q + 2); e = index(r, "*/")
            if (e) { t = t " " substr(r, 1, e - 1); s = substr(r, e + 2) } else { t = t " " r; inblock = 1; break }
          } else break
        }
        if (t != "") print NR "\t" t
      }' "$f" ;;
    *.py)
      awk '{
        s = $0; n = gsub(/"""/, "\"\"\"", s)
        if (indoc || n > 0) { print NR "\t" $0; if (n % 2 == 1) indoc = !indoc; next }
        p = index($0, "#"); if (p) print NR "\t" substr($0, p + 1)
      }' "$f" ;;
    *)  # shell, CMake: text after '#', not a shebang
      awk 'NR == 1 && /^#!/ { next } { p = index($0, "#"); if (p) print NR "\t" substr($0, p + 1) }' "$f" ;;
  esac
}

scan_comments() {
  local f
  while IFS= read -r f; do
    comments_of "$ROOT/$f" | matching | sed "s|^\([0-9]*\)\t|$f:\1: |" | drop_names
  done
}

part() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }

cd "$ROOT" || exit 2

if part docs; then
  scan_text "$ROOT/README.md" "$ROOT"/docs/*.md | report
fi

if part headers; then
  for d in core ops backends nn models distributed train text; do
    [ -d "$ROOT/$d" ] && find "$ROOT/$d" -name '*.h' -type f | sort
  done | while IFS= read -r f; do scan_text "$f"; done | report
fi

if part help && [ -n "$REMORA" ]; then
  if [ ! -x "$REMORA" ]; then
    echo "check_words: $REMORA is not an executable remora driver" >&2
    exit 2
  fi
  "$REMORA" --help >"$tmp/remora--help" 2>&1
  # The commands are the indented names under "commands:" in `remora --help`.
  cmds="$(awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1; next } on && !/^  / { on = 0 }' "$tmp/remora--help")"
  if [ -z "$cmds" ]; then
    echo "check_words: found no commands in \`$REMORA --help\`" >&2
    exit 2
  fi
  for c in $cmds; do "$REMORA" "$c" --help >"$tmp/remora-$c--help" 2>&1; done
  for f in "$tmp"/remora*--help; do
    name="$(basename "$f" | sed 's/--help$/ --help/; s/^remora-/remora /')"
    grep -n '' "$f" | matching | sed "s|^\([0-9]*\):|$name:\1: |" | drop_names
  done | report
fi

if part comments; then
  if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -- '*.h' '*.cpp' '*.cu' '*.inc' '*.py' '*.sh' 'CMakeLists.txt' '*/CMakeLists.txt'
  else
    find . \( -path ./build -o -path './build-*' -o -path ./.git \) -prune -o -type f \
      \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.inc' -o -name '*.py' -o -name '*.sh' -o -name CMakeLists.txt \) \
      -print | sed 's|^\./||'
  fi | grep -v -e '^tests/data/' -e '^tools/scripts/check_words.sh$' |
    if part headers; then grep -vE '^(core|ops|backends|nn|models|distributed|train|text)/.*\.h$'; else cat; fi |
    sort | scan_comments | report
fi

hits="$(wc -l <"$tmp/hits")"
if [ "$hits" -gt 0 ]; then
  echo "check_words: $hits line(s) with development-history words; describe the software instead" >&2
  exit 1
fi
echo "check_words: no development-history words"
exit 0
