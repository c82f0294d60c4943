#!/usr/bin/env bash
# The folders' one-way include rules (docs/ARCHITECTURE.md): each folder includes its own headers and those of the
# folders listed for it, nothing else. Fails naming every file and line that includes across a rule.
# Usage: layers.sh SOURCE_DIR
set -u
cd "$1" || exit 2
declare -A allowed=(
  [kernel_common]=""
  [graph]="kernel_common"
  [onnx_import]="graph"
  [passes]="graph kernel_common"
  [cpu_ops]="kernel_common"
  [cuda_ops]="kernel_common"
  [dist]="graph"
  [executor]="cpu_ops cuda_ops dist graph kernel_common passes"
  [training]="dist executor graph kernel_common onnx_import passes"
  # tools/ reaches the pass pipeline only through training/ (training/pipeline.h).
  [tools]="dist executor graph onnx_import training"
  [api]="executor graph onnx_import training"
)
bad=0
for dir in "${!allowed[@]}"; do
  [ -d "$dir" ] || { echo "layers.sh: no folder $dir"; bad=1; continue; }
  while IFS= read -r hit; do
    file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}
    target=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$rest")
    [ "$target" = "$dir" ] && continue
    case " ${allowed[$dir]} " in *" $target "*) continue ;; esac
    echo "$file:$line: $dir/ may not include $target/ (allowed: ${allowed[$dir]:-nothing})"
    bad=1
  done < <(grep -rnE '^#include "[a-z_]+/' "$dir" --include=*.cc --include=*.h --include=*.cu --include=*.cuh)
done
# Every folder with sources has a rule.
for d in */; do
  d=${d%/}
  [ -n "${allowed[$d]+x}" ] && continue
  if ls "$d"/*.cc "$d"/*.h >/dev/null 2>&1 && ! [[ $d =~ ^(tests|bench|examples|build.*|docs|scripts|cmake)$ ]]; then
    echo "layers.sh: folder $d/ has sources but no include rule"; bad=1
  fi
done
[ $bad -eq 0 ] && echo "include rules hold"
exit $bad
