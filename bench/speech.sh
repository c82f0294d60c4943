#!/usr/bin/env bash
# The speech example's training step, onnx-train against PyTorch (bench/speech.py): fp32 and bf16, interleaved pairs.
# Usage: bench/speech.sh BUILD_DIR [THREADS] [PAIRS]   (default 2 threads, 3 pairs)
set -euo pipefail
build=$1
threads=${2:-2}
pairs=${3:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/models-venv" "$root/.venv-torch" >/dev/null  # Debian's PyTorch with OpenBLAS
cmake --build "$build" --target onnx-train >/dev/null
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d)"
"$root/.venv-torch/bin/python" "$root/bench/speech.py" "$build/onnx-train" --threads "$threads" --pairs "$pairs"
