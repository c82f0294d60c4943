#!/usr/bin/env bash
# `onnx-train train` end to end on the digits MLP: the JSON log has one object per step with the documented
# fields and PyTorch's first losses, --save writes a model that runs, and user errors are one line.
# With PYTHON (a python that has onnxruntime): the Fashion-MNIST CNN trained a few steps and saved (BatchNorm in
# inference mode with its running statistics) gives ONNX Runtime the logits onnx-train gives.
# Usage: train.sh ONNX_TRAIN_BINARY EXAMPLES_DIR [PYTHON]
set -u
tool=$(realpath "$1")
ex=$(realpath "$2")/digits_mlp
py=${3:-}
. "$(dirname "$0")/lib.sh"
MAX_ERR_LINES=2

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

# --threads 1: the batch prefetch runs on the one thread TBB may use (it once waited forever).
# (Spelled out, not "${common[@]/2/1}", which rewrote the first "2" of every argument -- a clone's path included.)
one=(--data "$ex/train.npz" --loss cross_entropy --logits logits --labels y --batch 50 --no-shuffle --threads 1)
timeout 60 "$tool" train "$ex/model.onnx" "${one[@]}" --optimizer sgd --lr 0.1 --steps 3 --quiet \
  --log-json "$tmp/t1.jsonl" >/dev/null 2>&1 && [ "$(wc -l <"$tmp/t1.jsonl")" -eq 3 ] && ok || bad "--threads 1 run failed or hung"

# --eval-data: one evaluation line per epoch with loss and accuracy over all 297 test samples.
"$tool" train "$ex/model.onnx" "${common[@]}" --optimizer adam --lr 0.01 --epochs 2 --quiet \
  --eval-data "$ex/test.npz" --log-json "$tmp/eval.jsonl" >/dev/null 2>&1 || bad "train with --eval-data failed"
python3 - "$tmp/eval.jsonl" <<'PY' && ok || bad "evaluation lines wrong: $(grep eval "$tmp/eval.jsonl")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' in l]
assert [e["epoch"] for e in ev] == [1, 2], ev
assert all(e["samples"] == 297 and 0.5 < e["accuracy"] <= 1 and e["loss"] > 0 for e in ev), ev
assert ev[1]["loss"] < ev[0]["loss"], ev
PY

# SIGINT saves a checkpoint and exits 130; --resume then gives the losses of an uninterrupted run, exactly.
shuf=(--data "$ex/train.npz" --loss cross_entropy --logits logits --labels y --batch 50 --threads 2 --seed 5
      --optimizer adam --lr 0.01 --quiet)
"$tool" train "$ex/model.onnx" "${shuf[@]}" --steps 1000000 --checkpoint "$tmp/ck" --log-json "$tmp/int.jsonl" \
  >/dev/null 2>"$tmp/int.err" &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/int.jsonl" ] && [ "$(wc -l <"$tmp/int.jsonl")" -gt 40 ] && break; sleep 0.1; done
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] && ok || bad "SIGINT exit code $rc, want 130"
[ -f "$tmp/ck/checkpoint.npz" ] && ok || bad "no checkpoint after SIGINT"
grep -q "interrupted (SIGINT) after step" "$tmp/int.err" && ok || bad "no interruption message: $(cat "$tmp/int.err")"
k=$(tail -1 "$tmp/int.jsonl" | python3 -c "import json,sys;print(json.load(sys.stdin)['step'])")
n=$((k + 25))
"$tool" train "$ex/model.onnx" "${shuf[@]}" --steps $n --resume "$tmp/ck" --log-json "$tmp/int.jsonl" >/dev/null 2>&1 ||
  bad "resume failed"
"$tool" train "$ex/model.onnx" "${shuf[@]}" --steps $n --log-json "$tmp/ref.jsonl" >/dev/null 2>&1 || bad "reference run failed"
python3 - "$tmp/int.jsonl" "$tmp/ref.jsonl" <<'PY' && ok || bad "resumed losses differ from the uninterrupted run (stopped at $k)"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:3])
assert len(a) == len(b) and a == b, (len(a), len(b))
PY

# --grad-accum and --lr-schedule reach the log: lr follows a linear warm-up then decay over optimizer steps.
"$tool" train "$ex/model.onnx" "${common[@]}" --optimizer sgd --lr 0.1 --grad-accum 3 --lr-schedule linear \
  --warmup 2 --steps 6 --quiet --log-json "$tmp/sched.jsonl" >/dev/null 2>&1 || bad "schedule run failed"
got=$(python3 -c "import json;print(' '.join('%.4g' % json.loads(l)['lr'] for l in open('$tmp/sched.jsonl')))")
[ "$got" = "0 0.05 0.1 0.075 0.05 0.025" ] && ok || bad "scheduled lr $got"

if [ -n "$py" ] && "$py" -c "import onnxruntime, numpy" 2>/dev/null && [ -d /usr/share/datasets/fashion-mnist ]; then
  fx=$(realpath "$2")/fashion_cnn
  python3 "$fx/convert.py" --out "$tmp/fashion" --limit 640 >/dev/null || bad "convert.py failed"
  "$tool" train "$fx/model.onnx" --data "$tmp/fashion/train.npz" --loss cross_entropy --logits logits --labels y \
    --batch 64 --steps 10 --threads 2 --quiet --save "$tmp/fashion.onnx" >/dev/null 2>&1 || bad "fashion train failed"
  python3 - "$tmp/fashion/test.npz" "$tmp/fx.npz" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, zipfile.ZipFile(sys.argv[2], "w") as o:
    o.writestr("x.npy", z.read("x.npy"))
PY
  "$tool" run "$tmp/fashion.onnx" --data "$tmp/fx.npz" -o "$tmp/fout.npz" --threads 2 >/dev/null 2>&1 || bad "run saved CNN"
  "$py" - "$tmp/fashion.onnx" "$tmp/fx.npz" "$tmp/fout.npz" <<'PY' && ok || bad "ONNX Runtime disagrees on the saved CNN"
import sys
import numpy as np
import onnxruntime as ort
x = np.load(sys.argv[2])["x"]
want = np.load(sys.argv[3])["logits"]
got = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
assert got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-4), np.abs(got - want).max()
PY
else
  echo "note: no python with onnxruntime (or no dataset-fashion-mnist): the saved CNN is not checked with ONNX Runtime"
fi

expect_error "no scalar float output" train "$ex/model.onnx" --data "$ex/train.npz" --steps 1
expect_error "no array named 'y'" train "$ex/model.onnx" --data "$tmp/x.npz" --loss cross_entropy --logits logits --labels y --steps 1
expect_error "unknown optimizer" train "$ex/model.onnx" "${common[@]}" --optimizer rmsprop --steps 1
expect_error "--logits: the model has no value 'nope'" train "$ex/model.onnx" --data "$ex/train.npz" --loss cross_entropy --logits nope --labels y

expect_error "unknown --lr-schedule 'step'" train "$ex/model.onnx" "${common[@]}" --lr-schedule step --steps 1
expect_error "samples do not fill one step" train "$ex/model.onnx" "${common[@]}" --grad-accum 31 --steps 1
expect_error "no checkpoint.npz" train "$ex/model.onnx" "${common[@]}" --steps 1 --resume "$tmp/nowhere"
shuf25=(--data "$ex/train.npz" --loss cross_entropy --logits logits --labels y --batch 25 --threads 2 --seed 5
        --optimizer adam --lr 0.01 --quiet)  # shuf with another batch (spelled out: no pattern rewrite of paths)
expect_error "the checkpoint was made with batch 50" train "$ex/model.onnx" "${shuf25[@]}" --steps 1 --resume "$tmp/ck"
expect_error "x.npz: no array named 'y'" train "$ex/model.onnx" "${common[@]}" --steps 1 --eval-data "$tmp/x.npz"

finish
