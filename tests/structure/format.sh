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
bad=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  if ! out=$(diff -u "$f" <("$fmt" --style=file "$f") 2>&1); then
    echo "$f: not formatted (make format); first lines of the change:"
    sed -n '3,12p' <<<"$out"
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "${#files[@]} files formatted"
exit $bad
