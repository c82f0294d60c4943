#!/usr/bin/env bash
# CPU inference benchmark: onnx-train against ONNX Runtime (its best CPU settings, same thread count), in one
# script on the same models and inputs. Prints a Markdown table to paste into bench/RESULTS.md.
# Usage: bench/run.sh BUILD_DIR [THREADS] [RUNS]
set -euo pipefail
build=$1
threads=${2:-$(nproc)}
runs=${3:-50}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
models=$build/bench-models

# Exporter: Debian's PyTorch. Peer: onnxruntime from PyPI in .venv.
dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed" ||
  { sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo; $sudo apt-get install -y -qq --no-install-recommends python3-torch; }
"$root/scripts/onnx-newer-tests" "$root/.venv"
"$root/.venv/bin/python" -c 'import onnxruntime' 2>/dev/null || "$root/.venv/bin/pip" install -q onnxruntime
[ -f "$models/cnn.onnx" ] || /usr/bin/python3 "$here/export_models.py" "$models" >/dev/null

echo "| model | batch | threads | onnx-train median ms | ONNX Runtime median ms | ratio (ORT / onnx-train) |"
echo "| --- | --- | --- | --- | --- | --- |"
for m in mlp cnn; do
  ot=$("$build/onnx-train" run "$models/$m.onnx" --data "$models/$m.npz" --repeat "$runs" --threads "$threads" |
       awk '/^runs:/ {print $4}')
  ort=$("$root/.venv/bin/python" "$here/ort_peer.py" "$models/$m.onnx" "$models/$m.npz" "$threads" "$runs" |
        awk '{print $1}')
  batch=$([ $m = mlp ] && echo 256 || echo 32)
  ratio=$(awk -v a="$ort" -v b="$ot" 'BEGIN {printf "%.2f", a / b}')
  echo "| $m | $batch | $threads | $ot | $ort | $ratio |"
done
