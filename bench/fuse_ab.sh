#!/usr/bin/env bash
# --fuse=lite against --fuse=off (and full against off) in one process per row (bench_fuse_ab, bench/fuse_ab.cc):
# the control off/off first, then the transformer at batch 32 and 64 and the CNN, at 1 and 2 threads.
# Usage: bench/fuse_ab.sh BUILD_DIR [PAIRS]
set -euo pipefail
build=$1
pairs=${2:-101}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
models=$build/bench-models
[ -f "$models/cnn_train.onnx" ] || /usr/bin/python3 "$here/train_models.py" "$models" >/dev/null
lm="$root/examples/tiny_lm/model.onnx $root/examples/tiny_lm/data.npz"
cnn="$models/cnn_train.onnx $models/cnn_train.npz"
row() {  # NAME MODEL DATA ARGS...
  local name=$1; shift
  echo "== $name"
  "$build/bench_fuse_ab" "$@" --pairs "$pairs" | tail -3
}
for t in 1 2; do
  row "tiny_lm control off/off, batch 32, $t thread(s)" $lm --threads $t --modes off,off
  row "tiny_lm off/lite, batch 32, $t thread(s)" $lm --threads $t --modes off,lite
  row "tiny_lm off/lite, batch 64, $t thread(s)" $lm --threads $t --batch 64 --modes off,lite
  row "tiny_lm off/full, batch 32, $t thread(s)" $lm --threads $t --modes off,full
  row "cnn off/lite, batch 32, $t thread(s)" $cnn --threads $t --modes off,lite
done
