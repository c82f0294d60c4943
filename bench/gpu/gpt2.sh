#!/usr/bin/env bash
# GPT-2 124M (bench/gpu/gpt2.py: Hugging Face's config, seq 1024, batch 8, AdamW, bf16) on one GPU, side by side:
#   onnx-train --device cuda --amp=bf16 --fuse=lite   and   PyTorch autocast bf16, eager and torch.compile'd.
# Prints one JSON line per run (tokens/s from the median step after warm-up; peak device memory) and the ratios.
# Needs onnx-train (ONNX_TRAIN, default .gpu/bin/onnx-train), python3 with torch and transformers, and the libraries
# on LD_LIBRARY_PATH (scripts/gpu-check sets them). A cold torch.compile takes minutes: MODES=eager skips it.
# Usage: bench/gpu/gpt2.sh [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${OUT:-/tmp}/gpt2-bench}
ot=${ONNX_TRAIN:-$here/../../.gpu/bin/onnx-train}
batch=${BATCH:-8}
steps=${STEPS:-20}
mkdir -p "$out"
[ -f "$out/gpt2.onnx" ] || python3 "$here/gpt2.py" "$out" ${GPT2_ARGS:-} --samples $((batch * steps)) > /dev/null
"$ot" train "$out/gpt2.onnx" --data "$out/gpt2.npz" --optimizer adamw --lr 1e-4 --batch "$batch" --steps "$steps" \
  --no-shuffle --device cuda --amp=bf16 --fuse=lite --quiet --log-json "$out/ot.jsonl" > "$out/ot.log" 2>&1 ||
  { tail -5 "$out/ot.log" >&2; exit 1; }
{
  python3 - "$out/ot.jsonl" "$batch" "$out/ot.log" ${GPT2_ARGS:-} <<'PY'
import json, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' not in l]
ms = statistics.median(r["step_ms"] for r in rows[3:])
seq = 1024
for i, a in enumerate(sys.argv[4:]):
    if a == "--seq":
        seq = int(sys.argv[5 + i])
peak = re.search(r"peak device memory: (\d+) bytes", open(sys.argv[3]).read())
print(json.dumps({"peer": "onnx-train", "mode": "amp_bf16_lite", "batch": int(sys.argv[2]), "seq": seq,
                  "step_ms": round(ms, 3), "tokens_per_s": round(int(sys.argv[2]) * seq * 1000 / ms, 1),
                  "peak_bytes": int(peak.group(1)) if peak else None, "first_loss": rows[0]["loss"],
                  "last_loss": rows[-1]["loss"]}))
PY
  python3 "$here/gpt2.py" "$out" ${GPT2_ARGS:-} --torch-bench --batch "$batch" --steps "$steps" \
    --modes "${MODES:-eager,compiled}" 2>/dev/null
} | tee "$out/results.jsonl"
python3 - "$out/results.jsonl" <<'PY'
import json, sys
r = {x["mode"]: x for x in map(json.loads, open(sys.argv[1])) if "tokens_per_s" in x}
ot = r.get("amp_bf16_lite")
for m in ("eager_bf16", "compiled_bf16"):
    if ot and m in r:
        print(f"GPT-2 onnx-train --amp=bf16 / PyTorch {m}: {ot['tokens_per_s'] / r[m]['tokens_per_s']:.2f}x tokens/s")
PY
