#!/usr/bin/env bash
# The corpus's families at full size (bench/models_full.py): onnx-train's training step against PyTorch's, same
# batch, Adam, fp32 and bf16 (PyTorch's CPU autocast), and against ONNX Runtime Training's in fp32 (its on-device
# training API, in the venv of scripts/ort-training-venv), the median of interleaved pairs -- triples with ORT
# (bench/models.py).
# Usage: bench/models.sh BUILD_DIR [THREADS] [PAIRS] [NAME ...] [--no-ort]   (default 2 threads, 3 pairs, every
# family; --no-ort leaves ONNX Runtime Training out, and its venv unmade)
# The exported full-size models are kept in BUILD_DIR/bench-models-full (GPT-2 and BART weigh ~500 MB each; with ORT,
# model14.onnx, the opset-14 export it trains, as much again).
set -euo pipefail
build=$1
threads=${2:-2}
pairs=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/models-venv" "$root/.venv-torch" >/dev/null  # Debian's PyTorch with OpenBLAS, transformers, timm
case " $* " in
  *" --no-ort "*) ;;
  *) "$root/scripts/ort-training-venv" "$root/.venv-ort" >/dev/null ;;  # onnxruntime-training-cpu 1.19.2
esac
cmake --build "$build" --target onnx-train >/dev/null
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d)"
"$root/.venv-torch/bin/python" "$root/bench/models.py" "$build/onnx-train" "$build/bench-models-full" \
  --threads "$threads" --pairs "$pairs" --ort-python "$root/.venv-ort/bin/python" "$@"
