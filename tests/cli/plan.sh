#!/usr/bin/env bash
# `onnx-train plan` end to end on the digits MLP: the JSON report has every part, the parts sum to the peak, the
# parameters and Adam's moments are the model's parameter bytes (x1, x2), doubling --batch doubles the saved
# activations, SGD has no moments, --data gives the shapes, the human table has its header, and user errors (a
# missing model file, an unknown logits name) exit non-zero with one line naming what is wrong. A model that stores
# its step (passes -o) is planned as stored.
# Usage: plan.sh ONNX_TRAIN_BINARY EXAMPLES_DIR
set -u
tool=$(realpath "$1")
ex=$(realpath "$2")/digits_mlp
. "$(dirname "$0")/lib.sh"

loss=(--loss cross_entropy --logits logits --labels y)
for run in "adam 64" "adam 128" "sgd 64"; do
  set -- $run
  "$tool" plan "$ex/model.onnx" "${loss[@]}" --optimizer "$1" --batch "$2" --json --threads 2 \
    >"$tmp/$1_$2.json" 2>"$tmp/err" && ok || { bad "plan --optimizer $1 --batch $2 exited non-zero"; cat "$tmp/err"; }
done
# The same shapes from the data file (its 50-sample arrays; --batch replaces axis 0).
"$tool" plan "$ex/model.onnx" "${loss[@]}" --data "$ex/train.npz" --batch 64 --json --threads 2 >"$tmp/data_64.json" \
  2>"$tmp/err" && ok || { bad "plan --data exited non-zero"; cat "$tmp/err"; }
# A model that stores its step (onnx-train passes -o, SGD) is planned as stored: its optimizer, no moments.
"$tool" passes "$ex/model.onnx" "${loss[@]}" --optimizer sgd -o "$tmp/step.onnx" >"$tmp/out" 2>&1 &&
  "$tool" plan "$tmp/step.onnx" --batch 64 --json --threads 2 >"$tmp/stored_64.json" 2>"$tmp/err" && ok ||
  { bad "plan of a stored step exited non-zero"; cat "$tmp/out" "$tmp/err"; }

if python3 - "$tmp" <<'PY'; then ok; else bad "plan JSON checks"; fi
import json, sys
d = sys.argv[1]
load = lambda n: json.load(open(f"{d}/{n}.json"))
a64, a128, s64, data64 = load("adam_64"), load("adam_128"), load("sgd_64"), load("data_64")
parts = ["parameters", "half_copies", "optimizer_state", "saved_activations", "gradients", "transient"]
keys = ["peak_bytes", "saved_activations_total", "arena_bytes", "batch", "precision", "largest"] + parts
errors = []
def check(cond, what):
    if not cond: errors.append(what)
for name, r in [("adam_64", a64), ("adam_128", a128), ("sgd_64", s64), ("data_64", data64)]:
    for k in keys:
        check(k in r, f"{name}: no key {k}")
    if errors: break
    check(all(isinstance(r[p], int) and r[p] >= 0 for p in parts), f"{name}: parts not non-negative ints")
    check(sum(r[p] for p in parts) == r["peak_bytes"], f"{name}: parts sum {sum(r[p] for p in parts)} != peak {r['peak_bytes']}")
    check(r["precision"] == "fp32", f"{name}: precision {r['precision']}")
    check(r["saved_activations"] <= r["saved_activations_total"], f"{name}: saved at peak > total")
    check(r["arena_bytes"] >= r["transient"] - r["constants"] - r["step_outputs"], f"{name}: arena below the transient peak")
    big = r["largest"]
    check(0 < len(big) <= 10, f"{name}: largest has {len(big)} entries")
    check(all(set(e) == {"name", "op", "dtype", "shape", "bytes"} for e in big), f"{name}: largest entries' keys")
    check([e["bytes"] for e in big] == sorted((e["bytes"] for e in big), reverse=True), f"{name}: largest not sorted")
    check(all(e["shape"][0] == r["batch"] for e in big), f"{name}: a saved activation without the batch axis")
    live = r.get("live_at_peak", [])
    check(0 < len(live) <= 10 and all(e["part"] in parts for e in live), f"{name}: live_at_peak {live}")
    check(sum(e["bytes"] for e in live) <= r["peak_bytes"], f"{name}: live_at_peak larger than the peak")
check(a64["batch"] == 64 and a128["batch"] == 128, "batch")
# The digits MLP: 64 -> 64 -> 10 with biases, float32 (examples/digits_mlp/export.py).
params = 4 * (64 * 64 + 64 + 64 * 10 + 10)
for name, r in [("adam_64", a64), ("adam_128", a128), ("sgd_64", s64)]:
    check(r["parameters"] == params, f"{name}: parameters {r['parameters']} != {params}")
# Adam: exp_avg and exp_avg_sq per parameter, plus lr (float64) and step (int64); SGD: only those two.
check(a64["optimizer_state"] == 2 * params + 16, f"adam optimizer_state {a64['optimizer_state']}")
check(s64["optimizer_state"] == 16, f"sgd optimizer_state {s64['optimizer_state']}")
ratio = a128["saved_activations_total"] / a64["saved_activations_total"]
check(1.9 <= ratio <= 2.1, f"saved activations x{ratio:.3f} for twice the batch")
check(s64["saved_activations_total"] == a64["saved_activations_total"], "the optimizer changed the saved activations")
check({k: data64[k] for k in parts} == {k: a64[k] for k in parts}, "--data gave other figures than the declared shapes")
stored = load("stored_64")
check(stored["optimizer"] == "sgd" and stored["optimizer_state"] == 16 and stored["parameters"] == params,
      f"stored step: {stored['optimizer']}, optimizer_state {stored['optimizer_state']}, parameters {stored['parameters']}")
check(stored["saved_activations_total"] == s64["saved_activations_total"], "stored step: other saved activations")
if errors: print(json.dumps(a64, indent=1)[:1500])
for e in errors: print("  " + e)
sys.exit(1 if errors else 0)
PY

# The human table: header, every part, the peak at 100%.
"$tool" plan "$ex/model.onnx" "${loss[@]}" --batch 64 --threads 2 >"$tmp/table" 2>&1 || bad "plan (table) exited non-zero"
grep -Eq "^part +bytes +size +% of peak$" "$tmp/table" && ok || bad "table header: $(head -4 "$tmp/table")"
for row in parameters "half copies" "optimizer state" "saved activations" gradients transient; do
  grep -Eq "^$row +[0-9]+ +[0-9.]+ (B|KiB|MiB) +[0-9.]+%$" "$tmp/table" && ok || bad "table row '$row': $(cat "$tmp/table")"
done
grep -Eq "^peak +[0-9]+ .* 100\.0%$" "$tmp/table" && ok || bad "table peak row: $(cat "$tmp/table")"
grep -q "largest saved activations" "$tmp/table" && ok || bad "table without the largest saved activations"

# A CNN on the CPU is planned as `train` runs it: its activations channels-last (the channels_last pass), the
# fashion CNN's first convolution [8, 28, 28, 16] rather than [8, 16, 28, 28]; --disable-pass channels_last plans NCHW.
cnn=$(dirname "$ex")/fashion_cnn/model.onnx
for layout in nhwc nchw; do
  extra=(); [ $layout = nchw ] && extra=(--disable-pass channels_last)
  "$tool" plan "$cnn" "${loss[@]}" --batch 8 --json --threads 2 "${extra[@]}" >"$tmp/cnn_$layout.json" 2>"$tmp/err" ||
    { bad "plan of the fashion CNN ($layout) exited non-zero"; cat "$tmp/err"; }
done
if python3 - "$tmp" <<'PY'; then ok; else bad "plan of the CNN: layouts"; fi
import json, sys
shapes = lambda n: [e["shape"] for e in json.load(open(f"{sys.argv[1]}/cnn_{n}.json"))["largest"]]
nhwc, nchw = shapes("nhwc"), shapes("nchw")
assert [8, 28, 28, 16] in nhwc and [8, 16, 28, 28] not in nhwc, nhwc
assert [8, 16, 28, 28] in nchw and [8, 28, 28, 16] not in nchw, nchw
PY

# User errors: one line naming the problem, non-zero exit.
"$tool" plan "$tmp/missing.onnx" "${loss[@]}" --batch 64 >"$tmp/out" 2>&1 && bad "plan of a missing file succeeded" ||
  { [ "$(wc -l <"$tmp/out")" -eq 1 ] && grep -q "missing.onnx" "$tmp/out" && ok || bad "missing file: $(cat "$tmp/out")"; }
"$tool" plan "$ex/model.onnx" --loss cross_entropy --logits nope --labels y --batch 64 >"$tmp/out" 2>&1 &&
  bad "plan with --logits nope succeeded" ||
  { grep -q "nope" "$tmp/out" && grep -q "model.onnx" "$tmp/out" && ok || bad "--logits nope: $(cat "$tmp/out")"; }

finish
