#!/usr/bin/env bash
# Training step of one model, onnx-train (--fuse=off and lite) and PyTorch (bench/torch_train_peer.py, OpenBLAS), in
# fp32 or bf16 (onnx-train --amp=bf16, PyTorch's CPU autocast to bfloat16), interleaved round by round so that a noisy
# VM slows all three alike: R rounds of (PyTorch, off, lite), each the median step_ms after 3 warm-up steps of 20
# timed ones; then the median of each column and the ratios PyTorch / onnx-train (above 1: onnx-train faster) and
# off / lite (above 1: lite faster).
# Usage: bench/interleaved.sh BUILD_DIR [tiny_lm|cnn] [THREADS] [ROUNDS] [fp32|bf16]
set -euo pipefail
build=$1
model_name=${2:-tiny_lm}
threads=${3:-1}
rounds=${4:-7}
precision=${5:-fp32}
amp=(); [ "$precision" = bf16 ] && amp=(--amp=bf16)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
models=$build/bench-models
# The peer at its best: Debian's PyTorch with OpenBLAS (the reference BLAS is ~10x slower in fp32).
sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
for pkg in python3-torch libopenblas0-pthread; do
  dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q "install ok installed" ||
    $sudo apt-get install -y -qq --no-install-recommends $pkg
done
if [ "$model_name" = tiny_lm ]; then
  model=$root/examples/tiny_lm/model.onnx; data=$root/examples/tiny_lm/data.npz
else
  [ -f "$models/cnn_train.onnx" ] || /usr/bin/python3 "$here/train_models.py" "$models" >/dev/null
  model=$models/cnn_train.onnx; data=$models/cnn_train.npz
fi
median_step() {
  python3 -c "import json,statistics,sys;t=[json.loads(l)['step_ms'] for l in open(sys.argv[1]) if '\"eval\"' not in l][3:];print('%.2f'%statistics.median(t))" "$1"
}
rows=$(mktemp)
echo "$model_name, $precision, $threads thread(s), $rounds rounds: PyTorch ms | onnx-train off ms | lite ms"
for ((r = 1; r <= rounds; r++)); do
  pt=$(/usr/bin/python3 "$here/torch_train_peer.py" "$model_name" "$data" "$threads" 20 "$precision" 32 | cut -d' ' -f1)
  row="$pt"
  for fuse in off lite; do
    log=$(mktemp)
    "$build/onnx-train" train "$model" --data "$data" --loss cross_entropy --logits logits --labels y \
      --optimizer adam --lr 0.001 --batch 32 --steps 23 --no-shuffle --threads "$threads" --quiet --fuse=$fuse \
      "${amp[@]}" --log-json "$log" >/dev/null
    row="$row $(median_step "$log")"
    rm -f "$log"
  done
  echo "$row" | tee -a "$rows"
done
python3 - "$rows" <<'PY'
import statistics, sys
cols = list(zip(*[map(float, l.split()) for l in open(sys.argv[1]) if l.strip()]))
pt, off, lite = (statistics.median(c) for c in cols)
print(f"median: PyTorch {pt:.2f} ms, off {off:.2f} ms, lite {lite:.2f} ms; "
      f"PyTorch/off {pt / off:.2f}, PyTorch/lite {pt / lite:.2f}, off/lite {off / lite:.2f}")
# The best round of each: this VM's speed is bimodal (whole runs ~25% slower at times), and the fastest round is
# the one least disturbed.
pt, off, lite = (min(c) for c in cols)
print(f"best:   PyTorch {pt:.2f} ms, off {off:.2f} ms, lite {lite:.2f} ms; "
      f"PyTorch/off {pt / off:.2f}, PyTorch/lite {pt / lite:.2f}, off/lite {off / lite:.2f}")
PY
rm -f "$rows"
