#!/usr/bin/env bash
# Compile time against graph size: a Gemm and a chain of N Relu nodes (tests/scaling/make_chain.py) at N = 1k, 10k
# and 100k, timed end to end for `run` (import, shape folding, fusion, planning, one run) and `train --steps 1`
# (also the loss, autodiff, the optimizer and the step graph's fusion and plan), fusion lite, in ROUNDS interleaved
# rounds; the median of each. The goal: t(100k) / t(10k) <= 15 (linear: 10).
# Usage: bench/compile_scaling.sh BUILD_DIR [ROUNDS]   (default 3 rounds)
set -euo pipefail
build=$1
rounds=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
py=$root/.venv/bin/python
tool=$build/onnx-train
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --build "$build" --target onnx-train >/dev/null
sizes=(1000 10000 100000)
for n in "${sizes[@]}"; do "$py" "$root/tests/scaling/make_chain.py" "$n" "$tmp"; done
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
declare -A run train
for r in $(seq "$rounds"); do
  for n in "${sizes[@]}"; do
    m=$tmp/chain$n.onnx
    run[$n]+="$(ms "$tool" run "$m" --data "$tmp/chain${n}_run.npz") "
    train[$n]+="$(ms "$tool" train "$m" --data "$tmp/chain${n}_train.npz" --loss mse --logits y --labels t --batch 8 \
      --steps 1 -q) "
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d); $rounds rounds"
echo "| nodes | run ms | train (1 step) ms |"
echo "| --- | --- | --- |"
declare -A mr mt
for n in "${sizes[@]}"; do
  mr[$n]=$(echo "${run[$n]}" | median)
  mt[$n]=$(echo "${train[$n]}" | median)
  echo "| $n | ${mr[$n]} | ${mt[$n]} |"
done
awk -v r1="${mr[10000]}" -v r2="${mr[100000]}" -v t1="${mt[10000]}" -v t2="${mt[100000]}" \
  'BEGIN {printf "t(100k) / t(10k): run %.1f, train %.1f (goal <= 15)\n", r2 / r1, t2 / t1}'
