#!/usr/bin/env bash
# The hang guard of compile time: a Gemm and a chain of N Relu nodes (N = 100,000 in CTest, under a TIMEOUT) runs
# and trains one step, fusion on, and gives the answer the chain must give: y = relu(x W + b), since a Relu of a
# Relu changes nothing. Usage: chain.sh ONNX_TRAIN PYTHON N
set -u
tool=$(realpath "$1")
py=$2
n=$3
. "$(dirname "$0")/../cli/lib.sh"
"$py" "$(dirname "$0")/make_chain.py" "$n" "$tmp" || { echo "FAIL: make_chain.py"; exit 1; }
m=$tmp/chain$n.onnx
start=$(date +%s%N)
"$tool" run "$m" --data "$tmp/chain${n}_run.npz" -o "$tmp/y.npz" >/dev/null 2>"$tmp/err" && ok || { bad "run"; cat "$tmp/err"; }
mid=$(date +%s%N)
"$py" - "$m" "$tmp/chain${n}_run.npz" "$tmp/y.npz" <<'PY' && ok || bad "run: y is not relu(x W + b)"
import sys, numpy as np, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
p = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
x = np.load(sys.argv[2])["x"]
y = np.load(sys.argv[3])["y"]
want = np.maximum(x @ p["w"] + p["b"], 0)  # Gemm, transB = 0
sys.exit(0 if np.allclose(y, want, rtol=1e-5, atol=1e-6) else 1)
PY
"$tool" train "$m" --data "$tmp/chain${n}_train.npz" --loss mse --logits y --labels t --batch 8 --steps 1 \
  --log-json "$tmp/log.jsonl" -q 2>"$tmp/err" && grep -q '"loss"' "$tmp/log.jsonl" && ok || { bad "train"; cat "$tmp/err"; }
end=$(date +%s%N)
echo "chain of $n: run $(( (mid - start) / 1000000 )) ms, train (1 step) $(( (end - mid) / 1000000 )) ms"
finish
