#!/usr/bin/env bash
# --fuse end to end: `plan --fuse=off|lite|full --json` on the tiny transformer at batch 64 (clusters with their ops,
# inputs, outputs and bytes; the merges refused with a reason; lite's planned peak not above off's; every cluster
# within the 64-operand limit; a budget below the unfused peak reported as unreachable), `train --fuse=full` on
# the digits MLP, `check --fuse` over a few node tests, `run --fuse` on the MLP, `passes --fuse` (printed, exported and
# trained again), and user errors (an unknown mode, a bad --memory-budget)
# exiting non-zero with one line.
# Usage: fuse.sh ONNX_TRAIN_BINARY EXAMPLES_DIR
set -u
tool=$(realpath "$1")
ex=$(realpath "$2")
. "$(dirname "$0")/lib.sh"

lm=(plan "$ex/tiny_lm/model.onnx" --loss cross_entropy --logits logits --labels y --data "$ex/tiny_lm/data.npz"
    --batch 64 --json --threads 2)
for mode in off lite full; do
  "$tool" "${lm[@]}" --fuse=$mode >"$tmp/$mode.json" 2>"$tmp/err" && ok ||
    { bad "plan --fuse=$mode exited non-zero"; cat "$tmp/err"; }
done
"$tool" "${lm[@]}" --fuse=full --memory-budget 1M >"$tmp/tight.json" 2>"$tmp/err" && ok ||
  { bad "plan --memory-budget 1M exited non-zero"; cat "$tmp/err"; }

if python3 - "$tmp" <<'PY'; then ok; else bad "plan --fuse JSON checks"; fi
import json, sys
d = sys.argv[1]
r = {m: json.load(open(f"{d}/{m}.json")) for m in ["off", "lite", "full", "tight"]}
errors = []
def check(cond, what):
    if not cond: errors.append(what)
check(r["off"]["fusion"]["mode"] == "off" and r["off"]["fusion"]["clusters"] == [], "off made clusters")
for m in ["lite", "full"]:
    f = r[m]["fusion"]
    check(f["mode"] == m, f"{m}: mode {f['mode']}")
    check(len(f["clusters"]) > 0, f"{m}: no cluster in the transformer")
    for c in f["clusters"]:
        check(set(c) >= {"name", "ops", "inputs", "outputs", "input_bytes", "output_bytes", "saved_bytes"}, f"{m}: keys {set(c)}")
        check(len(c["ops"]) >= 2 and c["inputs"] + c["outputs"] <= 64, f"{m}: cluster {c['name']} size")
        check(c["saved_bytes"] > 0, f"{m}: cluster {c['name']} saved nothing")
        check(c.get("kind") in ("cluster", "fold"), f"{m}: cluster {c['name']} kind {c.get('kind')}")
        if m == "lite" and c.get("kind") == "cluster":
            check(c["outputs"] == 1, f"lite cluster with {c['outputs']} outputs")
    # The residual folds (passes/fuse_residual_norm.h): each block's two norms, forward and backward.
    folds = [c["ops"] for c in f["clusters"] if c.get("kind") == "fold"]
    check(sum(1 for o in folds if o[0].startswith("LayerNormalization ") and o[1].startswith("Add ")) == 4,
          f"{m}: residual Add folds {folds}")
    check(sum(1 for o in folds if o[0].startswith("LayerNormGrad ") and o[1].startswith("Sum ")) == 4,
          f"{m}: residual Sum folds {folds}")
    check(f["saved_bytes"] == sum(c["saved_bytes"] for c in f["clusters"]), f"{m}: saved_bytes is not the clusters' sum")
    check(all(x["reason"] for x in f["refused"]), f"{m}: a refusal without a reason")
    check(f["fused_ops"] == sum(len(c["ops"]) for c in f["clusters"]), f"{m}: fused_ops")
check(r["lite"]["peak_bytes"] <= r["off"]["peak_bytes"], f"lite peak {r['lite']['peak_bytes']} > off {r['off']['peak_bytes']}")
check(r["lite"]["kernels"] < r["off"]["kernels"], "lite runs no fewer kernels than off")
t = r["tight"]["fusion"]
check(t["memory_budget"] == 1000000 and t["budget_unreachable"], f"1M budget not reported unreachable: {t.get('budget_unreachable')}")
check(r["tight"]["peak_bytes"] <= r["off"]["peak_bytes"], "a tight budget raised the peak")
if errors:
    print("\n".join(errors)); sys.exit(1)
PY

# The CNN in bf16 (the kernel folds take half types): each Relu that feeds a MaxPool has its ReluGrad folded into the
# pool's gradient, each BatchNormalization its Relu (passes/fuse_pool_relu.h, passes/fuse_batch_norm.h).
"$tool" plan "$ex/fashion_cnn/model.onnx" --loss cross_entropy --logits logits --labels y --batch 32 --amp=bf16 \
  --fuse=lite --json >"$tmp/cnn.json" 2>"$tmp/err" && ok ||
  { bad "plan fashion_cnn --amp=bf16 exited non-zero"; cat "$tmp/err"; }
if python3 - "$tmp/cnn.json" <<'PY'; then ok; else bad "fashion_cnn bf16 folds"; fi
import json, sys
folds = [[o.split(" ")[0] for o in c["ops"]] for c in json.load(open(sys.argv[1]))["fusion"]["clusters"]
         if c.get("kind") == "fold"]
want = {("MaxPoolGrad", "ReluGrad"): 2, ("BatchNormalization", "Relu"): 2}
got = {k: sum(1 for f in folds if tuple(f) == k) for k in want}
if got != want:
    print(f"folds {folds}"); sys.exit(1)
PY

# Training with full fusion, and the node tests with fusion (every result as without it).
"$tool" train "$ex/digits_mlp/model.onnx" --data "$ex/digits_mlp/train.npz" --loss cross_entropy --logits logits \
  --labels y --batch 50 --steps 3 --fuse=full --threads 2 >"$tmp/out" 2>"$tmp/err" && ok ||
  { bad "train --fuse=full exited non-zero"; cat "$tmp/err"; }
grep -q "^fusion full:" "$tmp/err" && ok || bad "train --fuse=full printed no fusion line"
node=/usr/share/libonnx-testdata/data/node
if [ -d "$node" ]; then
  "$tool" check --fuse=full "$node/test_softmax_axis_1_expanded" "$node/test_layer_normalization_2d_axis1_expanded" \
    "$node/test_relu" >"$tmp/out" 2>&1
  grep -q "^3 passed, 0 failed" "$tmp/out" && ok || { bad "check --fuse=full"; cat "$tmp/out"; }
  grep -q "PASS test_softmax_axis_1_expanded (fused: " "$tmp/out" && ok || { bad "softmax expanded not fused"; cat "$tmp/out"; }
fi

# run --fuse: the fused inference of the MLP (Gelu and LayerNorm patterns, clusters) gives the outputs of its ops as
# exported (--disable-pass pattern_fusion,fusion) within the fusion tolerance (1e-5 relative or 1e-7 absolute; the fused
# LayerNorm and Gelu kernels round differently from the ReduceMean/Sub/Pow/Sqrt/Div and Div/Erf/Add/Mul chains they
# replace). --fuse=off keeps the pattern fusions, as train does.
for mode in off lite full; do
  "$tool" run "$ex/mlp/model.onnx" --data "$ex/mlp/input.npz" --fuse=$mode -o "$tmp/run_$mode.npz" >/dev/null \
    2>"$tmp/err" && ok || { bad "run --fuse=$mode exited non-zero"; cat "$tmp/err"; }
done
"$tool" run "$ex/mlp/model.onnx" --data "$ex/mlp/input.npz" --disable-pass pattern_fusion,fusion -o "$tmp/run_raw.npz" \
  >/dev/null 2>"$tmp/err" && ok || { bad "run --disable-pass pattern_fusion,fusion exited non-zero"; cat "$tmp/err"; }
for mode in off raw; do
  "$tool" run "$ex/mlp/model.onnx" --data "$ex/mlp/input.npz" --fuse=off --profile-ops \
    $([ $mode = raw ] && echo --disable-pass pattern_fusion) >"$tmp/prof_$mode" 2>&1
done
grep -q "^Gelu " "$tmp/prof_off" && ! grep -q "^Erf " "$tmp/prof_off" && ok ||
  { bad "run --fuse=off did not run the fused Gelu"; cat "$tmp/prof_off"; }
grep -q "^Erf " "$tmp/prof_raw" && ! grep -q "^Gelu " "$tmp/prof_raw" && ok ||
  { bad "run --disable-pass pattern_fusion fused the Gelu"; cat "$tmp/prof_raw"; }
"$tool" run "$ex/mlp/model.onnx" --data "$ex/mlp/input.npz" --fuse=off >"$tmp/run_off" 2>"$tmp/err"
grep -q "^logits: float32\[32,10\] sum=" "$tmp/run_off" && ok || { bad "run printed no summary"; cat "$tmp/run_off"; }
python3 - "$tmp" <<'PY' && ok || bad "run --fuse changed the outputs"
import ast, struct, sys, zipfile
def load(path):  # float32 arrays of an .npz, without numpy
    out = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            b = z.read(name)
            assert b[:6] == b"\x93NUMPY", name
            hl = struct.unpack("<H", b[8:10])[0] if b[6] == 1 else struct.unpack("<I", b[8:12])[0]
            start = 10 if b[6] == 1 else 12
            h = ast.literal_eval(b[start:start + hl].decode("latin1"))
            assert h["descr"] == "<f4" and not h["fortran_order"], h
            n = 1
            for d in h["shape"]: n *= d
            out[name[:-4]] = (h["shape"], struct.unpack("<%df" % n, b[start + hl:start + hl + 4 * n]))
    return out
t = sys.argv[1]
off = load(t + "/run_raw.npz")
for mode in ("off", "lite", "full"):
    got = load(t + f"/run_{mode}.npz")
    assert sorted(got) == sorted(off), (mode, sorted(got), sorted(off))
    for k, (shape, b) in off.items():
        gshape, a = got[k]
        assert gshape == shape, (mode, k, gshape, shape)
        worst = max(abs(x - y) - (1e-7 + 1e-5 * abs(y)) for x, y in zip(a, b))
        assert worst <= 0, (mode, k, worst)
PY
# passes --fuse: the printed and exported step shows the fused nodes; the exported step trains as the unfused one.
lmp=(passes "$ex/tiny_lm/model.onnx" --loss cross_entropy --logits logits --labels y --batch 16)
"$tool" "${lmp[@]}" --fuse full --dump-after fusion -o "$tmp/fstep.onnx" >"$tmp/pout" 2>"$tmp/err" && ok ||
  { bad "passes --fuse full exited non-zero"; cat "$tmp/err"; }
grep -q "^--- after fusion ---" "$tmp/pout" && grep -q "FusedElementwise" "$tmp/pout" && grep -q "MatMulEpilogue" "$tmp/pout" &&
  grep -q "^fusion full: " "$tmp/pout" && ok || { bad "passes --fuse full printed no fused step"; head -5 "$tmp/pout"; }
"$tool" "${lmp[@]}" -o "$tmp/ustep.onnx" >/dev/null 2>&1 && ok || bad "passes without --fuse"
grep -q "FusedElementwise" "$tmp/ustep.onnx" && bad "passes without --fuse fused the step" || ok
for s in fstep ustep; do
  "$tool" train "$tmp/$s.onnx" --data "$ex/tiny_lm/data.npz" --batch 16 --steps 3 --no-shuffle --quiet --fuse off \
    --log-json "$tmp/$s.json" 2>"$tmp/err" && ok || { bad "training the exported $s"; cat "$tmp/err"; }
done
python3 - "$tmp" <<'PY' && ok || bad "the fused exported step trains differently"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f"{sys.argv[1]}/{s}.json")] for s in ("fstep", "ustep"))
assert len(a) == 3 and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b)), (a, b)
PY
expect_error "--dump-after fusion: give --fuse" "${lmp[@]}" --dump-after fusion

expect_error "--fuse: 'bogus' is not a fusion mode" run "$ex/mlp/model.onnx" --data "$ex/mlp/input.npz" --fuse=bogus

expect_error "--fuse: 'most' is not a fusion mode" train "$ex/digits_mlp/model.onnx" --data "$ex/digits_mlp/train.npz" \
  --loss cross_entropy --logits logits --labels y --fuse most
expect_error "--memory-budget: 'lots' is not a size" plan "$ex/digits_mlp/model.onnx" --loss cross_entropy \
  --logits logits --labels y --batch 8 --memory-budget lots
finish
