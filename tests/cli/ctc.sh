#!/usr/bin/env bash
# `onnx-train train --loss ctc` end to end on a tiny frame classifier made here with onnx (x [batch, 8, 4] ->
# Transpose -> MatMul -> Add -> logits [8, batch, 5], time-major): the loss falls, --eval-data reports the token
# and word error rates (console and --log-json), and every mistake in the CTC data or flags is one line naming the
# file, the sample and the value.
# Usage: ctc.sh ONNX_TRAIN_BINARY PYTHON (a python with numpy and onnx)
set -u
tool=$(realpath "$1")
py=$2
. "$(dirname "$0")/lib.sh"
MAX_ERR_LINES=2

"$py" - "$tmp" <<'PY' || { echo "FAIL: could not write the model and data"; exit 1; }
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

d = sys.argv[1]
rng = np.random.default_rng(0)
w = (0.1 * rng.standard_normal((4, 5))).astype(np.float32)
nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="tr", perm=[1, 0, 2]),
         helper.make_node("MatMul", ["xt", "w"], ["z"], name="mm"),
         helper.make_node("Add", ["z", "b"], ["logits"], name="bias")]
g = helper.make_graph(nodes, "ctc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 4])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [8, "batch", 5])],
                      [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.zeros(5, np.float32), "b")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/model.onnx")


def data(n):
    """Label c (1..4) is "spoken" as feature c-1 high over two frames, a frame of silence after each label."""
    x = 0.1 * rng.standard_normal((n, 8, 4)).astype(np.float32)
    labels = np.zeros((n, 3), np.int64)
    label_lengths = rng.integers(1, 4, n).astype(np.int64)
    for i in range(n):
        for j in range(label_lengths[i]):
            c = rng.integers(1, 5)
            labels[i, j] = c
            x[i, 3 * j:3 * j + 2, c - 1] += 2.0
    logit_lengths = np.minimum(8, 3 * label_lengths).astype(np.int64)
    return dict(x=x, labels=labels, label_lengths=label_lengths, logit_lengths=logit_lengths)


np.savez(f"{d}/train.npz", **data(64))
np.savez(f"{d}/test.npz", **data(32))
with open(f"{d}/vocab.txt", "w") as f:
    f.write("<blank>\n<space>\na\nb\nc\n")  # ids 2-4 letters, 1 separates words


def bad(name, **change):
    a = data(16)
    for key, (i, j, v) in change.items():
        if j is None:
            a[key][i] = v
        else:
            a[key][i, j] = v
    np.savez(f"{d}/{name}.npz", **a)


bad("blank_label", labels=(3, 0, 0), label_lengths=(3, None, 2))
bad("long_labels", label_lengths=(5, None, 4))
bad("long_logits", logit_lengths=(6, None, 9))
bad("class_5", labels=(2, 0, 5), label_lengths=(2, None, 1))
# Sample 7 needs 3 frames for labels [1, 1] (a blank between) and has 2.
bad("unfit", labels=(7, 0, 1), logit_lengths=(7, None, 2))
a = np.load(f"{d}/unfit.npz")
a = {k: a[k] for k in a.files}
a["labels"][7, 1] = 1
a["label_lengths"][7] = 2
np.savez(f"{d}/unfit.npz", **a)
PY

m=$tmp/model.onnx
ctc=(--loss ctc --logits logits --labels labels --label-lengths label_lengths --logit-lengths logit_lengths)
if "$tool" train "$m" --data "$tmp/train.npz" "${ctc[@]}" --optimizer adam --lr 0.1 --batch 16 --epochs 12 \
     --eval-data "$tmp/test.npz" --ctc-vocab "$tmp/vocab.txt" --log-json "$tmp/log.jsonl" --threads 2 \
     >"$tmp/out" 2>&1; then ok; else bad "train --loss ctc exited non-zero"; cat "$tmp/out"; fi
# The loss falls by more than half, and the last evaluation decodes most labels right.
"$py" - "$tmp/log.jsonl" <<'PY' && ok || bad "the CTC run did not learn: $(tail -2 "$tmp/log.jsonl")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["loss"] for r in rows if not r.get("eval")]
evals = [r for r in rows if r.get("eval")]
assert len(steps) == 48 and len(evals) == 12, (len(steps), len(evals))
assert steps[-1] < 0.5 * steps[0], steps
assert 0 <= evals[-1]["token_error_rate"] < 0.2 and 0 <= evals[-1]["word_error_rate"] < 0.5, evals[-1]
assert evals[-1]["token_error_rate"] < evals[0]["token_error_rate"], evals
PY
grep -q "token errors .*% word errors .*%" "$tmp/out" && ok || bad "no error rates printed: $(tail -3 "$tmp/out")"

d=$tmp
expect_error "$d/blank_label.npz: sample 3: label 0 is the blank (0)" train "$m" --data "$d/blank_label.npz" "${ctc[@]}"
expect_error "$d/long_labels.npz: sample 5: 'label_lengths' is 4, outside [0, 3] (the width of 'labels')" \
  train "$m" --data "$d/long_labels.npz" "${ctc[@]}"
expect_error "$d/long_logits.npz: sample 6: 'logit_lengths' is 9, beyond the 8 frames of 'logits'" \
  train "$m" --data "$d/long_logits.npz" "${ctc[@]}"
expect_error "$d/class_5.npz: sample 2: label 0 is 5, outside [0, 5), the classes of 'logits'" \
  train "$m" --data "$d/class_5.npz" "${ctc[@]}"
expect_error "$d/unfit.npz: sample 7: its 2 labels need 3 frames, it has 2 ('logit_lengths'); --ctc-zero-infinity" \
  train "$m" --data "$d/unfit.npz" "${ctc[@]}"
expect_error "$d/blank_label.npz: sample 3: label 0 is the blank (0)" \
  train "$m" --data "$d/train.npz" --eval-data "$d/blank_label.npz" "${ctc[@]}"
# --ctc-zero-infinity: the unfit sample adds 0, the run trains and says so.
if "$tool" train "$m" --data "$d/unfit.npz" "${ctc[@]}" --ctc-zero-infinity --batch 8 --steps 2 --quiet \
     --log-json "$tmp/zi.jsonl" >"$tmp/out" 2>"$tmp/err"; then ok; else bad "--ctc-zero-infinity run failed"; cat "$tmp/err"; fi
grep -qF "unfit.npz: 1 samples (the first: 7) have fewer frames than their labels need" "$tmp/err" && ok ||
  bad "no note of the unfit sample: $(cat "$tmp/err")"
"$py" -c "import json,math,sys; assert all(math.isfinite(json.loads(l)['loss']) for l in open(sys.argv[1]))" \
  "$tmp/zi.jsonl" && ok || bad "a loss was not finite with --ctc-zero-infinity"
# Flags.
expect_error "--label-lengths needs --loss ctc" train "$m" --data "$d/train.npz" --loss mse --logits logits \
  --labels y --label-lengths n
expect_error "--loss ctc needs --logit-lengths NAME and --label-lengths NAME" train "$m" --data "$d/train.npz" \
  --loss ctc --logits logits --labels labels
expect_error "--blank 7 is not a class of 'logits'" train "$m" --data "$d/train.npz" "${ctc[@]}" --blank 7
expect_error "nope.txt: cannot open the vocabulary (--ctc-vocab)" train "$m" --data "$d/train.npz" "${ctc[@]}" \
  --ctc-vocab "$d/nope.txt"
finish
