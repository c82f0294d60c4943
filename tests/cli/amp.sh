#!/usr/bin/env bash
# `--amp` end to end on the digits MLP: `passes --amp` prints the precision table and the Cast count; fp16 training
# logs loss_scale/param_norm/zero_grad_fraction and ends with the skipped count; --save writes fp32 weights; an fp32
# checkpoint resumes into an --amp run and back; a huge static scale is caught by --check-numerics naming a node
# and its input ranges; option errors are one line.
# With PYTHON (one that has onnx and numpy): a model whose gradients all flush to zero in fp16 without loss scaling
# gets the zero-gradient-norm warning.
# Usage: amp.sh ONNX_TRAIN_BINARY EXAMPLES_DIR [PYTHON]
set -u
tool=$(realpath "$1")
ex=$(realpath "$2")/digits_mlp
py=${3:-}
. "$(dirname "$0")/lib.sh"
MAX_ERR_LINES=2
common=(--data "$ex/train.npz" --loss cross_entropy --logits logits --labels y --batch 50 --no-shuffle --threads 2)

# passes --amp: a table of ops by precision; every Gemm half, the loss fp32; master copies and loss-scale state.
"$tool" passes "$ex/model.onnx" "${common[@]}" --amp=fp16 >"$tmp/passes.out" 2>&1 || bad "passes --amp failed"
grep -qE "^op +fp16 +fp32" "$tmp/passes.out" && ok || bad "no precision table header"
grep -qE "^Gemm +5 +0" "$tmp/passes.out" && ok || bad "Gemm row: $(grep Gemm "$tmp/passes.out")"
grep -qE "^SoftmaxCrossEntropyLoss +0 +1" "$tmp/passes.out" && ok || bad "loss row"
grep -qE "^Casts inserted: [0-9]+" "$tmp/passes.out" && ok || bad "no Cast count"
grep -q "0.weight.half" "$tmp/passes.out" && grep -q "loss_scale" "$tmp/passes.out" && ok || bad "states lack half copies or loss scale"
"$tool" passes "$ex/model.onnx" "${common[@]}" --amp=fp16 --keep-fp32 Relu | grep -qE "^Relu +0 +1" && ok ||
  bad "--keep-fp32 Relu"

# fp16 training: loss scale in the log, the final summary, the hardware warning on a CPU without fp16 arithmetic.
"$tool" train "$ex/model.onnx" "${common[@]}" --optimizer adam --lr 0.01 --steps 6 --amp=fp16 --quiet \
  --log-json "$tmp/log.jsonl" --save "$tmp/trained.onnx" --checkpoint "$tmp/ck16" >"$tmp/out" 2>"$tmp/err" ||
  bad "fp16 train failed: $(cat "$tmp/err")"
for field in '"loss_scale": 65536' '"param_norm":' '"zero_grad_fraction":' '"skipped": false'; do
  head -1 "$tmp/log.jsonl" | grep -qF -- "$field" && ok || bad "first log line lacks $field"
done
grep -q "steps skipped (non-finite gradients), final loss scale 65536" "$tmp/out" && ok || bad "no skipped summary: $(cat "$tmp/out")"
if grep -qw avx512_fp16 /proc/cpuinfo; then ok; else grep -q "warning: --amp=fp16: this CPU has no fp16 arithmetic" "$tmp/err" && ok || bad "no hardware warning"; fi
# --save writes fp32 weights.
python3 - "$ex/train.npz" "$tmp/x.npz" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, zipfile.ZipFile(sys.argv[2], "w") as o:
    o.writestr("x.npy", z.read("x.npy"))
PY
"$tool" run "$tmp/trained.onnx" --data "$tmp/x.npz" 2>&1 | grep -q "logits: float32\[" && ok || bad "saved model did not run"
"$tool" info "$tmp/trained.onnx" >"$tmp/info" 2>&1 && grep -qF "4 float tensors (18.8 KiB)" "$tmp/info" && ! grep -qi "float16\|bfloat16" "$tmp/info" && ok ||
  bad "saved model: $(cat "$tmp/info")"

# Checkpoints across precisions: fp16 -> fp32 and fp32 -> bf16 continue (same step count, finite losses).
"$tool" train "$ex/model.onnx" "${common[@]}" --optimizer adam --lr 0.01 --steps 8 --quiet --resume "$tmp/ck16" \
  --log-json "$tmp/r32.jsonl" >/dev/null 2>&1 && [ "$(head -1 "$tmp/r32.jsonl" | grep -o '"step": [0-9]*')" = '"step": 7' ] &&
  ok || bad "fp16 checkpoint did not resume in fp32"
"$tool" train "$ex/model.onnx" "${common[@]}" --optimizer adam --lr 0.01 --steps 4 --quiet --checkpoint "$tmp/ck32" \
  >/dev/null 2>&1 || bad "fp32 train failed"
"$tool" train "$ex/model.onnx" "${common[@]}" --optimizer adam --lr 0.01 --steps 6 --quiet --resume "$tmp/ck32" \
  --amp=bf16 --log-json "$tmp/r16.jsonl" >/dev/null 2>&1 && [ "$(wc -l <"$tmp/r16.jsonl")" -eq 2 ] && ok ||
  bad "fp32 checkpoint did not resume with --amp=bf16"

# A scale that grows every step oscillates at the overflow: every other step skipped (its norm null in the JSON), one
# warning that the scale keeps going down.
"$tool" train "$ex/model.onnx" "${common[@]}" --steps 130 --amp=fp16 --loss-scale-growth-interval 1 --quiet \
  --log-json "$tmp/osc.jsonl" >/dev/null 2>"$tmp/osc.err" || bad "oscillating run failed: $(cat "$tmp/osc.err")"
[ "$(grep -c "warning: the loss scale went down" "$tmp/osc.err")" -eq 1 ] && ok || bad "halving warning: $(cat "$tmp/osc.err")"
python3 - "$tmp/osc.jsonl" <<'PY' && ok || bad "oscillating log"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
late = rows[100:]
skipped = [r for r in late if r["skipped"]]
assert 0.3 < len(skipped) / len(late) < 0.7, len(skipped)
assert all(r["grad_norm"] is None for r in skipped)
# A skipped step halves the scale the next step uses; a finite one doubles it (growth interval 1).
for a, b in zip(late, late[1:]):
    assert b["loss_scale"] == a["loss_scale"] * (0.5 if a["skipped"] else 2), (a, b)
PY

# A scale that overflows fp16 at once: --check-numerics names the node, its precision and its input range.
expect_error "--check-numerics: node '" train "$ex/model.onnx" "${common[@]}" --steps 2 --amp=fp16 --loss-scale 1e30 --check-numerics
grep -q "ran in float16; input 0 '.*' float32 range \[" "$tmp/err" && ok || bad "no precision/range: $(cat "$tmp/err")"

# loss = 1e-9 * sum(x W): dW = 1e-9 * x^T, below fp16's smallest subnormal: with --loss-scale 1 every gradient
# element is zero, and the run says so once.
if [ -n "$py" ] && "$py" -c "import onnx, numpy" 2>/dev/null; then
  "$py" - "$tmp" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
d = sys.argv[1]
w = numpy_helper.from_array(np.full((4, 3), 0.5, np.float32), "W")
k = numpy_helper.from_array(np.array(1e-9, np.float32), "k")
g = helper.make_graph(
    [helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0),
     helper.make_node("Mul", ["s", "k"], ["loss"])],
    "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], [w, k])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), d + "/tiny.onnx")
np.savez(d + "/tiny.npz", x=np.random.default_rng(0).uniform(0.5, 1, (64, 4)).astype(np.float32))
PY
  "$tool" train "$tmp/tiny.onnx" --data "$tmp/tiny.npz" --batch 16 --steps 3 --amp=fp16 --loss-scale 1 --freeze '^k$' \
    --quiet >/dev/null 2>"$tmp/zero.err" || bad "tiny run failed: $(cat "$tmp/zero.err")"
  [ "$(grep -c "the gradient norm is 0" "$tmp/zero.err")" -eq 1 ] && grep -q "try --loss-scale dynamic" "$tmp/zero.err" && ok ||
    bad "no zero-norm warning: $(cat "$tmp/zero.err")"
  "$tool" train "$tmp/tiny.onnx" --data "$tmp/tiny.npz" --batch 16 --steps 3 --amp=fp16 --freeze '^k$' --quiet \
    >/dev/null 2>"$tmp/zero2.err" && ! grep -q "the gradient norm is 0" "$tmp/zero2.err" && ok ||
    bad "dynamic scaling still warned: $(cat "$tmp/zero2.err")"
fi

expect_error "--amp: unknown precision 'fp8'" train "$ex/model.onnx" "${common[@]}" --steps 1 --amp=fp8
expect_error "--keep-fp32 and --keep-fp32-node need --amp" train "$ex/model.onnx" "${common[@]}" --steps 1 --keep-fp32 Relu
expect_error "--keep-fp32-node: the graph has no node named 'nope'" train "$ex/model.onnx" "${common[@]}" --steps 1 --amp --keep-fp32-node nope
expect_error "--loss-scale: 'big' is not dynamic, none or a positive number" train "$ex/model.onnx" "${common[@]}" --steps 1 --amp=fp16 --loss-scale big
expect_error "--fp16-infinity must be in (0, 65504]" train "$ex/model.onnx" "${common[@]}" --steps 1 --amp=fp16 --fp16-infinity 1e6

finish
