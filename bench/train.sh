#!/usr/bin/env bash
# CPU training benchmark: onnx-train against PyTorch (the same model, batch, data and thread count; Adam,
# cross-entropy), side by side in one script: median step time after 3 warm-up steps, and each process's peak
# resident memory (/usr/bin/time for onnx-train, getrusage in the PyTorch process). Prints a Markdown table
# for bench/RESULTS.md.
# Usage: bench/train.sh BUILD_DIR [THREADS] [STEPS]
set -euo pipefail
build=$1
threads=${2:-$(nproc)}
steps=${3:-40}
here=$(cd "$(dirname "$0")" && pwd)
models=$build/bench-models

# The peer at its best: Debian's PyTorch with OpenBLAS (not the reference BLAS).
sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
for pkg in python3-torch libopenblas0-pthread time; do
  dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q "install ok installed" ||
    $sudo apt-get install -y -qq --no-install-recommends $pkg
done
[ -f "$models/cnn_train.onnx" ] || /usr/bin/python3 "$here/train_models.py" "$models" >/dev/null

echo "| model | batch | threads | onnx-train step ms | PyTorch step ms | ratio (PyTorch / onnx-train) | onnx-train peak RSS MiB | PyTorch peak RSS MiB (after import+data) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for m in mlp cnn; do
  batch=$([ $m = mlp ] && echo 256 || echo 32)
  log=$(mktemp)
  /usr/bin/time -f "%M" -o "$log.rss" "$build/onnx-train" train "$models/${m}_train.onnx" \
    --data "$models/${m}_train.npz" --loss cross_entropy --logits logits --labels y --optimizer adam --lr 0.001 \
    --batch $batch --steps $((steps + 3)) --no-shuffle --threads "$threads" --quiet --log-json "$log" >/dev/null
  ot=$(python3 -c "import json,statistics,sys;t=[json.loads(l)['step_ms'] for l in open(sys.argv[1]) if '\"eval\"' not in l][3:];print('%.3f'%statistics.median(t))" "$log")
  ot_rss=$(awk '{printf "%.1f", $1/1024}' "$log.rss")
  rm -f "$log" "$log.rss"
  read -r pt pt_rss pt_base < <(/usr/bin/python3 "$here/torch_train_peer.py" $m "$models/${m}_train.npz" "$threads" "$steps")
  ratio=$(awk -v a="$pt" -v b="$ot" 'BEGIN {printf "%.2f", a / b}')
  echo "| $m | $batch | $threads | $ot | $pt | $ratio | $ot_rss | $pt_rss ($pt_base) |"
done
