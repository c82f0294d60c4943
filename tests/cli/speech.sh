#!/usr/bin/env bash
# The speech example (examples/speech_ctc: a Conv1d front end, a 2-layer bidirectional LSTM or a 2-layer GRU, CTC on
# characters) against PyTorch's committed trajectories on its committed utterances: fp32 Adam within 1e-3 relative of
# F.ctc_loss at every step (on both CPU paths of the recurrent layers), the loss falling by at least 20%; --amp=bf16 and --amp=fp16 (dynamic loss scaling, at
# most 3 skipped steps) ending within 3% of PyTorch's final fp32 loss; and checkpoints crossing precisions: an fp32
# checkpoint resumed by an --amp=fp16 run, and an fp16 one by an fp32 run, continue PyTorch's trajectory.
# Usage: speech.sh ONNX_TRAIN_BINARY EXAMPLES_DIR
set -u
tool=$(realpath "$1")
ex=$(realpath "$2")/speech_ctc
. "$(dirname "$0")/lib.sh"

ctc=(--data "$ex/trajectory.npz" --loss ctc --logits logits --labels labels --label-lengths label_lengths
     --logit-lengths logit_lengths --optimizer adam --lr 0.002 --batch 16 --no-shuffle --threads 2 --quiet)
# compare LOG REF KIND: KIND fp32 (every step within 1e-3, a 20% fall) or amp (final within 3%, <= 3 skipped), or
# resume (the first logged step within 1e-2 of the reference's same step).
compare() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
log, ref, kind = sys.argv[1:]
rows = [json.loads(l) for l in open(log) if not json.loads(l).get("eval")]
want = json.load(open(ref))["losses"]
ours = [r["loss"] for r in rows]
rel = lambda a, b: abs(a - b) / abs(b)
if kind == "fp32":
    worst = max(rel(a, b) for a, b in zip(ours, want))
    assert len(ours) == len(want) and worst <= 1e-3, f"max rel err {worst:.2e}"
    assert ours[-1] <= 0.8 * ours[0], f"loss {ours[0]} -> {ours[-1]}"
elif kind == "amp":
    skipped = sum(r["skipped"] for r in rows)
    assert rel(ours[-1], want[-1]) <= 0.03 and skipped <= 3, f"final {ours[-1]} vs {want[-1]}, {skipped} skipped"
else:
    step = rows[0]["step"]
    assert rel(ours[0], want[step - 1]) <= 1e-2, f"step {step}: {ours[0]} vs {want[step - 1]}"
PY
}
# Both CPU paths of the recurrent layers (cpu_ops/rnn_kernel.h): the GEMM path (the default) and oneDNN's RNN
# primitives, which both models' layers match.
for path in gemm primitive; do
  for cell in lstm gru; do
    model=$ex/model.onnx ref=$ex/trajectory_adam.json
    [ $cell = gru ] && model=$ex/model_gru.onnx ref=$ex/trajectory_gru_adam.json
    if ONNXTRAIN_CPU_RNN=$path "$tool" train "$model" "${ctc[@]}" --steps 30 --log-json "$tmp/$cell.jsonl" \
         2>"$tmp/err" && compare "$tmp/$cell.jsonl" "$ref" fp32 2>>"$tmp/err"; then ok
    else bad "$cell fp32 ($path): $(tail -1 "$tmp/err")"; fi
  done
done
for amp in bf16 fp16; do
  if "$tool" train "$ex/model.onnx" "${ctc[@]}" --steps 30 --amp=$amp --log-json "$tmp/$amp.jsonl" 2>"$tmp/err" &&
     compare "$tmp/$amp.jsonl" "$ex/trajectory_adam.json" amp 2>>"$tmp/err"; then ok; else bad "lstm $amp: $(tail -1 "$tmp/err")"; fi
done
# fp32 -> fp16 and fp16 -> fp32 through a checkpoint after 4 steps: the resumed run's step 5 is PyTorch's step 5.
for pair in "fp32 fp16" "fp16 fp32"; do
  set -- $pair
  first=() second=()
  [ "$1" = fp16 ] && first=(--amp=fp16)
  [ "$2" = fp16 ] && second=(--amp=fp16)
  rm -rf "$tmp/ck"
  if "$tool" train "$ex/model.onnx" "${ctc[@]}" --steps 4 "${first[@]}" --checkpoint "$tmp/ck" 2>"$tmp/err" &&
     "$tool" train "$ex/model.onnx" "${ctc[@]}" --steps 8 "${second[@]}" --resume "$tmp/ck" \
       --log-json "$tmp/resumed.jsonl" 2>>"$tmp/err" &&
     compare "$tmp/resumed.jsonl" "$ex/trajectory_adam.json" resume 2>>"$tmp/err"; then ok
  else bad "checkpoint $1 -> $2: $(tail -1 "$tmp/err")"; fi
done
finish
