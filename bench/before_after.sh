#!/usr/bin/env bash
# Two builds of onnx-train on the same training runs, interleaved round by round so that a noisy VM slows both alike:
# a refactoring (or any change that must not change the numbers) is held to the same losses, bit for bit, and to the
# same step time. Rows: tiny_lm fp32 and bf16 (--fuse=lite), tiny_lm --fuse=full, the CNN fp32 (--fuse=lite); each
# round runs A then B (alternating which goes first), the median step_ms after 3 warm-up steps of STEPS. Prints, per
# row, the medians over the rounds, B / A (below 1: B faster) with the spread of the per-round ratios, and whether
# every logged loss was identical.
# Usage: bench/before_after.sh BUILD_A BUILD_B [ROUNDS] [THREADS] [STEPS]
set -euo pipefail
a=$1
b=$2
rounds=${3:-7}
threads=${4:-2}
steps=${5:-23}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
models=$b/bench-models
[ -f "$models/cnn_train.onnx" ] || /usr/bin/python3 "$here/train_models.py" "$models" >/dev/null
lm=("$root/examples/tiny_lm/model.onnx" --data "$root/examples/tiny_lm/data.npz")
cnn=("$models/cnn_train.onnx" --data "$models/cnn_train.npz")
common=(--loss cross_entropy --logits logits --labels y --optimizer adam --lr 0.001 --batch 32 --steps "$steps"
  --no-shuffle --threads "$threads" --quiet)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {  # BUILD LOG ROW
  local build=$1 log=$2 row=$3
  case $row in
    lm_fp32) "$build/onnx-train" train "${lm[@]}" "${common[@]}" --fuse lite --log-json "$log" ;;
    lm_bf16) "$build/onnx-train" train "${lm[@]}" "${common[@]}" --fuse lite --amp=bf16 --log-json "$log" ;;
    lm_full) "$build/onnx-train" train "${lm[@]}" "${common[@]}" --fuse full --log-json "$log" ;;
    cnn_fp32) "$build/onnx-train" train "${cnn[@]}" "${common[@]}" --fuse lite --log-json "$log" ;;
  esac >/dev/null 2>&1
}
median_step() {
  python3 -c "import json,statistics,sys;t=[json.loads(l)['step_ms'] for l in open(sys.argv[1]) if '\"eval\"' not in l][3:];print('%.3f'%statistics.median(t))" "$1"
}
losses() {
  python3 -c "import json,sys;print(' '.join(repr(json.loads(l)['loss']) for l in open(sys.argv[1]) if '\"eval\"' not in l))" "$1"
}

echo "A: $a"
echo "B: $b"
echo "$rounds rounds, $threads thread(s), $steps steps (3 warm-up), $(date -u +%F)"
echo
echo "| run | A step ms | B step ms | B / A (median of rounds) | per-round B / A, min - max | losses |"
echo "| --- | --- | --- | --- | --- | --- |"
for row in lm_fp32 lm_bf16 lm_full cnn_fp32; do
  : >"$tmp/a" && : >"$tmp/b" && : >"$tmp/r"
  same=identical
  for ((r = 1; r <= rounds; r++)); do
    if ((r % 2)); then order="a b"; else order="b a"; fi
    for side in $order; do
      build=$a; [ "$side" = b ] && build=$b
      run "$build" "$tmp/$side.log" "$row"
    done
    ta=$(median_step "$tmp/a.log") tb=$(median_step "$tmp/b.log")
    echo "$ta" >>"$tmp/a"
    echo "$tb" >>"$tmp/b"
    awk -v x="$ta" -v y="$tb" 'BEGIN {printf "%.4f\n", y / x}' >>"$tmp/r"
    [ "$(losses "$tmp/a.log")" = "$(losses "$tmp/b.log")" ] || same=DIFFERENT
  done
  python3 - "$row" "$tmp/a" "$tmp/b" "$tmp/r" "$same" <<'EOF'
import statistics, sys
row, fa, fb, fr, same = sys.argv[1:]
a = [float(x) for x in open(fa)]
b = [float(x) for x in open(fb)]
r = [float(x) for x in open(fr)]
print(f"| {row} | {statistics.median(a):.2f} | {statistics.median(b):.2f} | {statistics.median(r):.3f} | "
      f"{min(r):.3f} - {max(r):.3f} | {same} |")
EOF
done
