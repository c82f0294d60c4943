#!/usr/bin/env bash
# --fuse=lite against --fuse=off (and full against off) in one process per row (bench_fuse_ab, bench/fuse_ab.cc):
# the control off/off first, then the transformer at batch 32 and 64 and the CNN, fp32 and bf16, at 1 and 2 threads
# (or the thread counts given). Effects of 1% need about 600 pairs on a noisy 2-core VM for a 95% interval off 1.
# Usage: bench/fuse_ab.sh BUILD_DIR [PAIRS [THREADS...]]
set -euo pipefail
build=$1
pairs=${2:-101}
shift $(( $# < 2 ? $# : 2 ))
threads=${*:-1 2}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
models=$build/bench-models
[ -f "$models/cnn_train.onnx" ] || /usr/bin/python3 "$here/train_models.py" "$models" >/dev/null
lm="$root/examples/tiny_lm/model.onnx $root/examples/tiny_lm/data.npz"
cnn="$models/cnn_train.onnx $models/cnn_train.npz"
row() {  # NAME MODEL DATA ARGS...
  local name=$1; shift
  echo "== $name"
  "$build/bench_fuse_ab" "$@" --pairs "$pairs" | tail -4
}
for t in $threads; do
  row "tiny_lm control off/off, batch 32, $t thread(s)" $lm --threads $t --modes off,off
  row "tiny_lm off/lite, batch 32, $t thread(s)" $lm --threads $t --modes off,lite
  row "tiny_lm off/lite, batch 32, bf16, $t thread(s)" $lm --threads $t --amp bf16 --modes off,lite
  row "tiny_lm off/lite, batch 64, $t thread(s)" $lm --threads $t --batch 64 --modes off,lite
  row "tiny_lm off/full, batch 32, $t thread(s)" $lm --threads $t --modes off,full
  row "cnn off/lite, batch 32, $t thread(s)" $cnn --threads $t --modes off,lite
  row "cnn off/lite, batch 32, bf16, $t thread(s)" $cnn --threads $t --amp bf16 --modes off,lite
done
