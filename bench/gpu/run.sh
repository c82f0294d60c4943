#!/usr/bin/env bash
# GPU training benchmark of issue 6, side by side in one script on one GPU: the BERT-base-sized encoder of
# bench/gpu/encoder.py (12 layers, hidden 768, seq 128; override with ENCODER_ARGS) trained with Adam at batch 32 by
#   onnx-train --device cuda        fp32 (TF32 off), --fuse=off
#   onnx-train --device cuda --amp  fp16 + dynamic loss scaling, --fuse=lite (and again with --no-cuda-graph)
#   PyTorch eager                   fp32 (TF32 off), and autocast(fp16) + GradScaler, eager and torch.compile'd
#                                   (TORCH_MODES; a cold compile takes minutes)
# Prints one JSON line per run (samples/s from the median step after warm-up, peak device memory: onnx-train's
# allocations, PyTorch's max_memory_allocated), the GEMM rate of an --amp step (--profile-ops: the encoder's GEMM
# operations over their kernel time) against a 4096^3 fp16 cuBLASLt GEMM (bench_gemm_rate) measured in the same run,
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
  python3 - "$out/$name.jsonl" "$name" "$batch" "$out/$name.log" <<'PY'
import json, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' not in l]
ms = statistics.median(r["step_ms"] for r in rows[3:])  # after plan making, NVRTC and cuBLASLt warm-up
peak = re.search(r"peak device memory: (\d+) bytes", open(sys.argv[4]).read())
print(json.dumps({"peer": "onnx-train", "mode": sys.argv[2], "batch": int(sys.argv[3]), "step_ms": round(ms, 3),
                  "samples_per_s": round(int(sys.argv[3]) * 1000 / ms, 1), "peak_bytes": int(peak.group(1)) if peak else None,
                  "first_loss": rows[0]["loss"], "last_loss": rows[-1]["loss"]}))
PY
}
{
  run_ot fp32 --fuse=off
  run_ot amp_fp16 --amp --fuse=lite
  run_ot amp_fp16_no_graph --amp --fuse=lite --no-cuda-graph  # what CUDA-graph replay of the step gains
  python3 "$here/encoder.py" "$out" ${ENCODER_ARGS:-} --torch-bench --batch "$batch" --steps "$steps" \
    --modes "${TORCH_MODES:-fp32,amp_fp16,amp_fp16_compiled}" 2>/dev/null
} | tee "$out/results.jsonl"
# The encoder's GEMM rate (--amp, profiled steps after the first) and the reference 4096^3 fp16 GEMM.
"$ot" "${common[@]}" --amp --fuse=lite --profile-ops > "$out/profile.txt" 2>&1 || cat "$out/profile.txt" >&2
gemm_bin=${BENCH_GEMM_RATE:-$(dirname "$ot")/bench_gemm_rate}
[ -x "$gemm_bin" ] && "$gemm_bin" --filter square_4096_f16 > "$out/gemm_ref.jsonl"
python3 - "$out/results.jsonl" <<'PY'
import json, sys
r = {(x["peer"], x["mode"]): x for x in map(json.loads, open(sys.argv[1]))}
amp, fp32 = r[("onnx-train", "amp_fp16")], r[("onnx-train", "fp32")]
pt_amp, pt_fp32 = r[("pytorch", "amp_fp16")], r[("pytorch", "fp32")]
print(f"onnx-train --amp / onnx-train fp32: {amp['samples_per_s'] / fp32['samples_per_s']:.2f}x (goal >= 1.5)")
print(f"onnx-train --amp / PyTorch autocast: {amp['samples_per_s'] / pt_amp['samples_per_s']:.2f}x (goal >= 1.1)")
print(f"onnx-train fp32 / PyTorch fp32: {fp32['samples_per_s'] / pt_fp32['samples_per_s']:.2f}x")
if ("pytorch", "amp_fp16_compiled") in r and "samples_per_s" in r[("pytorch", "amp_fp16_compiled")]:
    c = r[("pytorch", "amp_fp16_compiled")]
    print(f"onnx-train --amp / torch.compile autocast: {amp['samples_per_s'] / c['samples_per_s']:.2f}x (goal >= 1.0)")
if amp.get("peak_bytes") and fp32.get("peak_bytes"):
    print(f"peak device memory --amp / fp32: {amp['peak_bytes'] / fp32['peak_bytes']:.2f} (goal <= 0.6); "
          f"PyTorch autocast / fp32: {pt_amp['peak_bytes'] / pt_fp32['peak_bytes']:.2f}")
PY
python3 - "$out/profile.txt" "$out/gemm_ref.jsonl" <<'PY' || true
import json, re, sys
m = re.search(r"GEMMs: ([0-9.]+) ms/run, ([0-9.]+) TFLOP/s", open(sys.argv[1]).read())
ref = [json.loads(l) for l in open(sys.argv[2])] if len(sys.argv) > 2 else []
if m and ref:
    print(f"encoder GEMMs under --amp: {float(m.group(2)):.1f} TFLOP/s over {m.group(1)} ms per step = "
          f"{float(m.group(2)) / ref[0]['tflops']:.2f} of the 4096^3 fp16 GEMM's {ref[0]['tflops']:.1f} (goal >= 0.6)")
PY
