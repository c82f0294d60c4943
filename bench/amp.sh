#!/usr/bin/env bash
# CPU mixed-precision benchmark: the same training run in fp32, --amp=bf16 and --amp=fp16 (onnx-train, Adam,
# cross-entropy, same data and threads), side by side: median step time after 3 warm-up steps, peak resident
# memory, and the planned peak / saved activations of `onnx-train plan`. Prints a Markdown table for
# bench/RESULTS.md. On a CPU without AVX512-BF16 (or AMX) bf16 GEMMs run in fp32 after conversion, so bf16 is
# expected to be slower there; the table says which CPU it ran on.
# Usage: bench/amp.sh BUILD_DIR [THREADS] [STEPS]
set -euo pipefail
build=$1
threads=${2:-$(nproc)}
steps=${3:-30}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
models=$build/bench-models
sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
for pkg in python3-torch time; do
  dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q "install ok installed" ||
    $sudo apt-get install -y -qq --no-install-recommends $pkg
done
[ -f "$models/cnn_train.onnx" ] || /usr/bin/python3 "$here/train_models.py" "$models" >/dev/null

flags=$( (grep -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo || true) | sort -u | tr '\n' ' ')
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), bf16 instructions: ${flags:-none}; $threads threads"
echo
echo "| model | batch | precision | step ms | vs fp32 | peak RSS MiB | planned peak MiB | saved activations MiB |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
common=(--loss cross_entropy --logits logits --labels y --optimizer adam --lr 0.001)
for m in cnn tiny_lm; do
  if [ $m = cnn ]; then model=$models/cnn_train.onnx; data=$models/cnn_train.npz; batch=32
  else model=$root/examples/tiny_lm/model.onnx; data=$root/examples/tiny_lm/data.npz; batch=32; fi
  base=""
  for prec in fp32 bf16 fp16; do
    amp=(); [ $prec != fp32 ] && amp=(--amp=$prec)
    log=$(mktemp)
    /usr/bin/time -f "%M" -o "$log.rss" "$build/onnx-train" train "$model" --data "$data" "${common[@]}" \
      --batch $batch --steps $((steps + 3)) --no-shuffle --threads "$threads" --quiet --log-json "$log" "${amp[@]}" \
      >/dev/null 2>&1
    ms=$(python3 -c "import json,statistics,sys;t=[json.loads(l)['step_ms'] for l in open(sys.argv[1]) if '\"eval\"' not in l][3:];print('%.2f'%statistics.median(t))" "$log")
    rss=$(awk '{printf "%.1f", $1/1024}' "$log.rss")
    rm -f "$log" "$log.rss"
    read -r peak saved < <("$build/onnx-train" plan "$model" --data "$data" "${common[@]}" --batch $batch "${amp[@]}" \
      --json 2>/dev/null | python3 -c "import json,sys;d=json.load(sys.stdin);print('%.2f %.2f'%(d['peak_bytes']/2**20,d['saved_activations_total']/2**20))")
    [ -z "$base" ] && base=$ms
    ratio=$(awk -v a="$ms" -v b="$base" 'BEGIN {printf "%.2fx", a / b}')
    echo "| $m | $batch | $prec | $ms | $ratio | $rss | $peak | $saved |"
  done
done
