#!/usr/bin/env bash
# `onnx-train train` end to end on the digits MLP: the JSON log has one object per step with the documented
# fields and PyTorch's first losses, --save writes a model that runs, and user errors are one line.
# Usage: train.sh ONNX_TRAIN_BINARY EXAMPLES_DIR
set -u
tool=$(realpath "$1")
ex=$(realpath "$2")/digits_mlp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

common=(--data "$ex/train.npz" --loss cross_entropy --logits logits --labels y --batch 50 --no-shuffle --threads 2)
if "$tool" train "$ex/model.onnx" "${common[@]}" --optimizer sgd --lr 0.1 --steps 4 --quiet \
     --log-json "$tmp/log.jsonl" --save "$tmp/trained.onnx" >"$tmp/out" 2>&1; then ok; else bad "train exited non-zero"; cat "$tmp/out"; fi
[ "$(wc -l <"$tmp/log.jsonl")" -eq 4 ] && ok || bad "log has $(wc -l <"$tmp/log.jsonl") lines, want 4"
for field in '"step": 1,' '"loss":' '"lr":' '"grad_norm":' '"skipped": false' '"step_ms":'; do
  head -1 "$tmp/log.jsonl" | grep -qF -- "$field" && ok || bad "first log line lacks $field"
done
# PyTorch's first two SGD losses (examples/digits_mlp/trajectory_sgd.json), to 4 decimals.
first=$(python3 -c "import json;print('%.4f %.4f' % tuple(json.load(open('$ex/trajectory_sgd.json'))['losses'][:2]))")
got=$(python3 -c "import json;l=[json.loads(x)['loss'] for x in open('$tmp/log.jsonl')];print('%.4f %.4f' % tuple(l[:2]))")
[ "$first" = "$got" ] && ok || bad "losses $got, PyTorch $first"
# The saved model differs from the initial one and runs.
cmp -s "$ex/model.onnx" "$tmp/trained.onnx" && bad "saved model equals the initial one" || ok
python3 - "$ex/test.npz" "$tmp/x.npz" <<'PY' 2>/dev/null || cp "$ex/train.npz" "$tmp/x.npz"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, zipfile.ZipFile(sys.argv[2], "w") as o:
    o.writestr("x.npy", z.read("x.npy"))
PY
"$tool" run "$tmp/trained.onnx" --data "$tmp/x.npz" 2>&1 | grep -q "logits: float32\[297,10\]" && ok || bad "trained model did not run"

expect_error() {
  local want=$1
  shift
  "$tool" "$@" >"$tmp/o" 2>"$tmp/e"
  local rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l <"$tmp/e")" -le 2 ] && grep -qF -- "$want" "$tmp/e"; then ok; else
    bad "onnx-train $* (exit $rc), wanted '$want':"; cat "$tmp/e"; fi
}
expect_error "no scalar float output" train "$ex/model.onnx" --data "$ex/train.npz" --steps 1
expect_error "no array named 'y'" train "$ex/model.onnx" --data "$tmp/x.npz" --loss cross_entropy --logits logits --labels y --steps 1
expect_error "unknown optimizer" train "$ex/model.onnx" "${common[@]}" --optimizer rmsprop --steps 1
expect_error "--logits: the model has no value 'nope'" train "$ex/model.onnx" --data "$ex/train.npz" --loss cross_entropy --logits nope --labels y

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
