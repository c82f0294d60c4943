#!/usr/bin/env bash
# GPU training benchmark of issue 6, side by side in one script on one GPU: the BERT-base-sized encoder of
# bench/gpu/encoder.py (12 layers, hidden 768, seq 128; override with ENCODER_ARGS) trained with Adam at batch 32 by
#   onnx-train --device cuda        fp32 (TF32 off), --fuse=off
#   onnx-train --device cuda --amp  fp16 + dynamic loss scaling, --fuse=lite
#   PyTorch eager                   fp32 (TF32 off), and autocast(fp16) + GradScaler
# Prints one JSON line per run (samples/s from the median step after warm-up, peak device memory where measured)
# and the ratios of the issue's Done-when. Needs onnx-train (ONNX_TRAIN, default .gpu/bin/onnx-train), python3
# with torch and onnx (the GPU machine's image), and its libraries on LD_LIBRARY_PATH (scripts/gpu-check sets them).
# Usage: bench/gpu/run.sh [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${OUT:-/tmp}/encoder-bench}
ot=${ONNX_TRAIN:-$here/../../.gpu/bin/onnx-train}
batch=${BATCH:-32}
steps=${STEPS:-30}
mkdir -p "$out"
[ -f "$out/encoder.onnx" ] || python3 "$here/encoder.py" "$out" ${ENCODER_ARGS:-} --samples $((batch * steps)) > /dev/null
common=(train "$out/encoder.onnx" --data "$out/encoder.npz" --loss cross_entropy --logits logits --labels y
        --optimizer adam --batch "$batch" --steps "$steps" --no-shuffle --device cuda --quiet)
run_ot() {  # name, extra flags...
  local name=$1; shift
  "$ot" "${common[@]}" "$@" --log-json "$out/$name.jsonl" > "$out/$name.log" 2>&1 || { cat "$out/$name.log" >&2; return 1; }
  python3 - "$out/$name.jsonl" "$name" "$batch" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' not in l]
ms = statistics.median(r["step_ms"] for r in rows[3:])  # after plan making, NVRTC and cuBLASLt warm-up
print(json.dumps({"peer": "onnx-train", "mode": sys.argv[2], "batch": int(sys.argv[3]), "step_ms": round(ms, 3),
                  "samples_per_s": round(int(sys.argv[3]) * 1000 / ms, 1), "first_loss": rows[0]["loss"],
                  "last_loss": rows[-1]["loss"]}))
PY
}
{
  run_ot fp32 --fuse=off
  run_ot amp_fp16 --amp --fuse=lite
  python3 "$here/encoder.py" "$out" ${ENCODER_ARGS:-} --torch-bench --batch "$batch" --steps "$steps" 2>/dev/null
} | tee "$out/results.jsonl"
python3 - "$out/results.jsonl" <<'PY'
import json, sys
r = {(x["peer"], x["mode"]): x for x in map(json.loads, open(sys.argv[1]))}
amp, fp32 = r[("onnx-train", "amp_fp16")], r[("onnx-train", "fp32")]
pt_amp, pt_fp32 = r[("pytorch", "amp_fp16")], r[("pytorch", "fp32")]
print(f"onnx-train --amp / onnx-train fp32: {amp['samples_per_s'] / fp32['samples_per_s']:.2f}x (goal >= 1.5)")
print(f"onnx-train --amp / PyTorch autocast: {amp['samples_per_s'] / pt_amp['samples_per_s']:.2f}x (goal >= 1.1)")
print(f"onnx-train fp32 / PyTorch fp32: {fp32['samples_per_s'] / pt_fp32['samples_per_s']:.2f}x")
PY
