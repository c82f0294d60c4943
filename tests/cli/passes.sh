#!/usr/bin/env bash
# `onnx-train passes` end to end on the digits MLP: the step exports as a standard ONNX training model
# (TrainingInfoProto holding the step and its update bindings), the ONNX checker accepts it and ONNX Runtime runs
# its main graph (when PYTHON has onnx / onnxruntime), and `onnx-train train step.onnx` reproduces the losses of
# training the original model with the same options (sgd and adam), step for step.
# Usage: passes.sh ONNX_TRAIN_BINARY EXAMPLES_DIR [PYTHON]
set -u
tool=$(realpath "$1")
ex=$(realpath "$2")/digits_mlp
py=${3:-}
. "$(dirname "$0")/lib.sh"

data=(--data "$ex/train.npz" --batch 50 --no-shuffle --steps 6 --threads 2 --quiet)
loss=(--loss cross_entropy --logits logits --labels y)
for opt in "sgd --lr 0.1" "adam"; do
  name=${opt%% *}
  # shellcheck disable=SC2086
  if "$tool" passes "$ex/model.onnx" "${loss[@]}" --optimizer $opt -o "$tmp/step_$name.onnx" >"$tmp/out" 2>&1; then ok
  else bad "passes ($name) exited non-zero"; cat "$tmp/out"; continue; fi
  grep -q "parameters" "$tmp/out" && grep -q "OptimizerUpdate" "$tmp/out" && ok || bad "passes ($name) summary: $(cat "$tmp/out")"
  # shellcheck disable=SC2086
  "$tool" train "$ex/model.onnx" "${loss[@]}" --optimizer $opt "${data[@]}" --log-json "$tmp/direct_$name.jsonl" \
    >"$tmp/out" 2>&1 || { bad "train model.onnx ($name)"; cat "$tmp/out"; }
  "$tool" train "$tmp/step_$name.onnx" "${data[@]}" --log-json "$tmp/step_$name.jsonl" --save "$tmp/trained_$name.onnx" \
    >"$tmp/out" 2>&1 || { bad "train step.onnx ($name)"; cat "$tmp/out"; }
  if python3 - "$tmp/direct_$name.jsonl" "$tmp/step_$name.jsonl" <<'PY'; then ok; else bad "losses of step.onnx ($name) differ"; fi
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"eval"' not in l]
b = [json.loads(l)["loss"] for l in open(sys.argv[2]) if '"eval"' not in l]
print("direct", a, "\nstep  ", b)
sys.exit(0 if len(a) == 6 and len(a) == len(b) and all(abs(x - y) <= 1e-6 * abs(x) for x, y in zip(a, b)) else 1)
PY
done

# A model exported with dynamic batch and sequence axes (pos_lm: a positional table sliced by the input's length):
# the stored step keeps the symbolic dims and trains at any batch size and length; its first loss at 16 x 16 is
# PyTorch's (examples/pos_lm/trajectory_variable_batch.json).
pos=$(dirname "$ex")/pos_lm
"$tool" passes "$pos/model.onnx" --optimizer adamw --lr 0.003 -o "$tmp/pos_step.onnx" >"$tmp/out" 2>&1 && ok ||
  { bad "passes pos_lm exited non-zero"; cat "$tmp/out"; }
if [ -n "$py" ] && "$py" -c "import onnx" 2>/dev/null; then
  "$py" - "$tmp/pos_step.onnx" <<'PY' && ok || bad "pos_lm step: symbolic dims not kept"
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m)
dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in m.graph.input}
print(dims)
sys.exit(0 if dims.get("x") == ["batch", "seq"] and dims.get("y") == ["batch", "seq"] else 1)
PY
fi
for b in 16 5; do
  "$tool" train "$tmp/pos_step.onnx" --data "$pos/data.npz" --batch $b --steps 2 --no-shuffle --threads 2 --quiet \
    --log-json "$tmp/pos_$b.jsonl" >"$tmp/out" 2>&1 && ok || { bad "train pos_lm step at batch $b"; cat "$tmp/out"; }
done
python3 - "$tmp/pos_16.jsonl" "$pos/trajectory_variable_batch.json" <<'PY' && ok || bad "pos_lm step: first loss differs from PyTorch's"
import json, sys
first = json.loads(open(sys.argv[1]).readline())["loss"]
want = json.load(open(sys.argv[2]))["losses"][0]
print(first, want)
sys.exit(0 if abs(first - want) <= 1e-5 * abs(want) else 1)
PY

# The exported step re-imports and exports byte-identically (onnx-train passes on it is refused: it is a step).
"$tool" passes "$tmp/step_sgd.onnx" -o "$tmp/again.onnx" >"$tmp/out" 2>"$tmp/err" && bad "passes on a step model succeeded" || {
  grep -q "training_info" "$tmp/err" && ok || bad "passes on a step model: $(cat "$tmp/err")"; }

# --disable-pass: an optional rewrite left out shows in the step (the transformer's MatMul+Add and LayerNorm chains
# stay as exported without pattern_fusion) and trains to the same losses; a required pass or an unknown name is an
# error that lists the passes that can be disabled.
lm=$(dirname "$ex")/tiny_lm
lmo=(--loss cross_entropy --logits logits --labels y --batch 8)
"$tool" passes "$lm/model.onnx" "${lmo[@]}" --dump-after step >"$tmp/fused_step" 2>&1 &&
  "$tool" passes "$lm/model.onnx" "${lmo[@]}" --dump-after step --disable-pass pattern_fusion >"$tmp/raw_step" 2>&1 && ok ||
  { bad "passes --disable-pass pattern_fusion exited non-zero"; tail -3 "$tmp/raw_step"; }
grep -q "MatMulBias(" "$tmp/fused_step" && grep -q "LayerNormalization(" "$tmp/fused_step" && ok ||
  bad "the default step has no MatMulBias or LayerNormalization"
grep -q "MatMulBias(\|LayerNormalization(" "$tmp/raw_step" && bad "--disable-pass pattern_fusion still fused" || ok
grep -q "ReduceMean(" "$tmp/raw_step" && ok || bad "--disable-pass pattern_fusion: no ReduceMean in the step"
for d in "" "--disable-pass=pattern_fusion,fold_transpose,fuse_bias_grad"; do
  # shellcheck disable=SC2086
  "$tool" train "$lm/model.onnx" "${lmo[@]}" --data "$lm/data.npz" --steps 4 --no-shuffle --threads 2 --quiet \
    --log-json "$tmp/lm${d:+_raw}.jsonl" $d >"$tmp/out" 2>&1 || { bad "train $d exited non-zero"; cat "$tmp/out"; }
done
python3 - "$tmp/lm.jsonl" "$tmp/lm_raw.jsonl" <<'PY' && ok || bad "losses with passes disabled differ"
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
sys.exit(0 if len(a) == 4 and len(b) == 4 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)) else 1)
PY
for bad_name in amp nosuchpass; do
  "$tool" train "$lm/model.onnx" "${lmo[@]}" --data "$lm/data.npz" --steps 1 --disable-pass $bad_name >"$tmp/out" 2>&1 &&
    bad "--disable-pass $bad_name accepted" || {
    grep -q "disable-pass $bad_name" "$tmp/out" && grep -q "fold_transpose" "$tmp/out" && ok ||
      bad "--disable-pass $bad_name: $(cat "$tmp/out")"; }
done

if [ -n "$py" ] && "$py" -c "import onnx, onnxruntime" 2>/dev/null; then
  if "$py" - "$tmp/step_adam.onnx" "$ex/test.npz" <<'PY'; then ok; else bad "onnx checker / onnxruntime on step.onnx"; fi
import sys
import numpy as np
import onnx
import onnxruntime as ort
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m)
assert len(m.training_info) == 1 and len(m.training_info[0].update_binding) > 0
assert any(o.domain == "ai.onnxtrain" and o.version == 1 for o in m.opset_import)
keys = {p.key: p.value for p in m.metadata_props}
assert "onnx-train.loss" in keys, keys
x = np.load(sys.argv[2])["x"][:5].astype(np.float32)
so = ort.SessionOptions()
so.log_severity_level = 3  # the optimizer states are unused initializers of the main graph: no warnings for them
out = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
assert out[0].shape == (5, 10), out[0].shape
PY
else
  echo "note: no python with onnx and onnxruntime given: checker and onnxruntime checks skipped"
fi

# --dump-after PASS prints the graph after that pass only; an unknown pass is an error naming it.
"$tool" passes "$ex/model.onnx" "${loss[@]}" --dump-after autodiff >"$tmp/dump" 2>&1 || bad "passes --dump-after exited non-zero"
grep -q -- "--- after autodiff ---" "$tmp/dump" && ! grep -q -- "--- after optimizer ---" "$tmp/dump" &&
  grep -q "ReluGrad" "$tmp/dump" && ok || bad "--dump-after autodiff printed: $(head -3 "$tmp/dump")"
"$tool" passes "$ex/model.onnx" "${loss[@]}" --dump-after nope >"$tmp/dump" 2>&1 && bad "--dump-after nope succeeded" ||
  { grep -q "no pass 'nope'" "$tmp/dump" && ok || bad "--dump-after nope: $(cat "$tmp/dump")"; }

finish
