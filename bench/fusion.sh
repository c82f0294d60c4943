#!/usr/bin/env bash
# CPU cluster-fusion benchmark (issue 5): the same training run with --fuse=off, lite and full, in fp32 and
# --amp=bf16, on the CNN (bench/train_models.py) and the transformer example (examples/tiny_lm), against PyTorch
# training the same model at the same batch and threads (fp32, and torch.autocast bf16 for the bf16 rows); then
# the forward pass alone, `onnx-train run --fuse=... --repeat` against ONNX Runtime. Median step time after 3 warm-up steps
# (--log-json's step_ms). "clusters" is len(fusion.clusters) of `onnx-train plan --fuse=lite --json`. Prints two
# Markdown tables for bench/RESULTS.md. A mode that fails prints "error" in its cell (its stderr goes to stderr).
# Usage: bench/fusion.sh BUILD_DIR [THREADS] [STEPS]
set -euo pipefail
build=$1
threads=${2:-$(nproc)}
steps=${3:-20}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
models=$build/bench-models

# The peers at their best: Debian's PyTorch with OpenBLAS; onnxruntime from the project's .venv (`make venv`),
# its column "n/a" where it cannot be imported.
sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
for pkg in python3-torch libopenblas0-pthread; do
  dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q "install ok installed" ||
    $sudo apt-get install -y -qq --no-install-recommends $pkg
done
[ -f "$models/cnn_train.onnx" ] || /usr/bin/python3 "$here/train_models.py" "$models" >/dev/null
[ -f "$models/cnn.onnx" ] || /usr/bin/python3 "$here/export_models.py" "$models" >/dev/null
ort_py="$root/.venv/bin/python"
"$ort_py" -c 'import onnxruntime' 2>/dev/null || ort_py=""

median_step() {  # median step_ms of a --log-json file after 3 warm-up steps
  python3 -c "import json,statistics,sys;t=[json.loads(l)['step_ms'] for l in open(sys.argv[1]) if '\"eval\"' not in l][3:];print('%.2f'%statistics.median(t))" "$1"
}
ratio() { case "$1$2" in *[!0-9.]*) echo "-";; *) awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}';; esac; }

flags=$( (grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo || true) | sort -u | tr '\n' ' ')
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), flags: ${flags:-none}; $threads threads, $steps timed steps"
echo
echo "| model | batch | precision | off ms | lite ms | full ms | lite/off | PyTorch ms (same precision) | PyTorch fp32 ms | best PyTorch / lite | clusters (lite) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
common=(--loss cross_entropy --logits logits --labels y --optimizer adam --lr 0.001)
for m in cnn tiny_lm; do
  if [ $m = cnn ]; then model=$models/cnn_train.onnx; data=$models/cnn_train.npz
  else model=$root/examples/tiny_lm/model.onnx; data=$root/examples/tiny_lm/data.npz; fi
  batch=32
  for prec in fp32 bf16; do
    amp=(); [ $prec != fp32 ] && amp=(--amp=$prec)
    declare -A ms=()
    for fuse in off lite full; do
      log=$(mktemp)
      if "$build/onnx-train" train "$model" --data "$data" "${common[@]}" --batch $batch --steps $((steps + 3)) \
           --no-shuffle --threads "$threads" --quiet --log-json "$log" --fuse=$fuse "${amp[@]}" >/dev/null 2>"$log.err"
      then ms[$fuse]=$(median_step "$log")
      else ms[$fuse]=error; echo "$m $prec --fuse=$fuse: $(tail -3 "$log.err")" >&2; fi
      rm -f "$log" "$log.err"
    done
    clusters=$("$build/onnx-train" plan "$model" --data "$data" "${common[@]}" --batch $batch --threads "$threads" \
      --fuse=lite --json "${amp[@]}" 2>/dev/null | python3 -c "import json,sys;print(len(json.load(sys.stdin)['fusion']['clusters']))") ||
      clusters=error
    read -r pt _ < <(/usr/bin/python3 "$here/torch_train_peer.py" $m "$data" "$threads" "$steps" $prec $batch)
    # PyTorch at its best: on a CPU without native bf16 its autocast path is far slower than its fp32 one, so the
    # ratio is taken against the faster of the two.
    [ $prec = fp32 ] && pt32=$pt || read -r pt32 _ < <(/usr/bin/python3 "$here/torch_train_peer.py" $m "$data" "$threads" "$steps" fp32 $batch)
    best=$(awk -v a="$pt" -v b="$pt32" 'BEGIN {print (a < b ? a : b)}')
    echo "| $m | $batch | $prec | ${ms[off]} | ${ms[lite]} | ${ms[full]} | $(ratio "${ms[lite]}" "${ms[off]}") |" \
         "$pt | $pt32 | $(ratio "$best" "${ms[lite]}") | $clusters |"
  done
done

# Forward inference: the CNN as bench/run.sh exports it (eval mode, BatchNorm folded) and the tiny LM's first
# 32 sequences, `onnx-train run --fuse=off|lite|full --repeat` against ONNX Runtime (all graph optimizations on).
# "as exported": --disable-pass pattern_fusion,fusion (every --fuse mode keeps the pattern fusions).
runs=$((steps * 2))
/usr/bin/python3 -c "import numpy as np,sys;np.savez(sys.argv[2],x=np.load(sys.argv[1])['x'][:32])" \
  "$root/examples/tiny_lm/data.npz" "$models/tiny_lm_x32.npz"
echo
echo "| model (forward) | batch | onnx-train as exported ms | off ms | lite ms | full ms | ONNX Runtime ms | ORT / lite |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for m in cnn tiny_lm; do
  if [ $m = cnn ]; then model=$models/cnn.onnx; data=$models/cnn.npz
  else model=$root/examples/tiny_lm/model.onnx; data=$models/tiny_lm_x32.npz; fi
  declare -A fw=()
  for fuse in raw off lite full; do
    args=(--fuse=$fuse); [ $fuse = raw ] && args=(--disable-pass pattern_fusion,fusion)
    fw[$fuse]=$("$build/onnx-train" run "$model" --data "$data" --repeat "$runs" --threads "$threads" "${args[@]}" |
                awk '/^runs:/ {print $4}')
  done
  ort=n/a
  [ -n "$ort_py" ] && ort=$("$ort_py" "$here/ort_peer.py" "$model" "$data" "$threads" "$runs" 32 | awk '{print $1}')
  echo "| $m | 32 | ${fw[raw]} | ${fw[off]} | ${fw[lite]} | ${fw[full]} | $ort | $(ratio "$ort" "${fw[lite]}") |"
done
