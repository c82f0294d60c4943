#!/usr/bin/env bash
# The corpus's families at full size (bench/models_full.py): onnx-train's training step against PyTorch's, same
# batch, Adam, fp32 and bf16 (PyTorch's CPU autocast), the median of interleaved pairs (bench/models.py).
# Usage: bench/models.sh BUILD_DIR [THREADS] [PAIRS] [NAME ...]   (default 2 threads, 3 pairs, every family)
# The exported full-size models are kept in BUILD_DIR/bench-models-full (GPT-2 and BART weigh ~500 MB each).
set -euo pipefail
build=$1
threads=${2:-2}
pairs=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/models-venv" "$root/.venv-torch" >/dev/null  # Debian's PyTorch with OpenBLAS, transformers, timm
cmake --build "$build" --target onnx-train >/dev/null
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d)"
"$root/.venv-torch/bin/python" "$root/bench/models.py" "$build/onnx-train" "$build/bench-models-full" \
  --threads "$threads" --pairs "$pairs" "$@"
