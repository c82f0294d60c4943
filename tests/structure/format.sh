#!/usr/bin/env bash
# Every C++ and CUDA source of the tree is formatted as .clang-format says, by clang-format 14 (Debian's
# clang-format-14, installed by scripts/bootstrap: other versions format differently). Fails naming each file that
# `make format` would change, with the first lines of the change.
# Usage: format.sh SOURCE_DIR
set -u
cd "$1" || exit 2
fmt=$(command -v clang-format-14) || { echo "format.sh: clang-format-14 is not installed (scripts/bootstrap)"; exit 1; }
"$fmt" --version | grep -q "version 14\." || { echo "format.sh: $fmt is not version 14"; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cc' '*.h' '*.cu' '*.cuh')
else
  mapfile -t files < <(find . -path ./build -prune -o -path './build-*' -prune -o -path './.venv*' -prune -o \
                              \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print)
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# One process over every file (fast); on a failure, each file named with the first lines of its change.
if "$fmt" --style=file --dry-run -Werror "${files[@]}" 2>"$out"; then
  echo "${#files[@]} files formatted"
  exit 0
fi
sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' "$out" | sort -u | while IFS= read -r f; do
  echo "$f: not formatted (make format); first lines of the change:"
  diff -u "$f" <("$fmt" --style=file "$f") | sed -n '3,12p'
done
exit 1
