#!/usr/bin/env bash
# Data-parallel training under mpirun (2 ranks, 1 thread each, on one machine): DDP's semantics against one process.
#   - an MLP and the tiny transformer: 2 ranks x B follow 1 process x 2B within 1e-5 relative per step (SGD and Adam,
#     in file order and shuffled), with a bucket size that splits the gradients into several all-reduces;
#   - --grad-accum 2 (one all-reduce per optimizer step, of the sums) likewise within 1e-5; under --amp=fp16 a step
#     whose gradient overflows on rank 1 only is skipped by rank 0 too (the skip is decided on the mean);
#   - the CNN with BatchNorm (statistics per rank) follows PyTorch DDP's trajectory (gloo, 2 processes:
#     examples/fashion_cnn/ddp_trajectory.py, committed) within 1e-4 relative per step; with --sync-batchnorm it
#     follows 1 process x 2B within 1e-5 per step (30 steps);
#   - rank 0 alone writes the log (one line per step) and the saved model; a checkpoint taken by 2 ranks resumes on
#     2 ranks and continues the trajectory, and on 1 process at the same position in samples (refused where that is
#     not a whole number of steps);
#   - --profile's trace has the communication on a lane of its own; Ctrl-C on mpirun checkpoints the step all ranks
#     stopped after;
#   - --shard-optimizer equals the unsharded run within 1e-6 (plain, accumulating, fp16, bf16 accumulating: under
#     --amp the master weights are sharded too), its checkpoints equal the unsharded run's and resume either way (fp32
#     and bf16), rank 0's evaluation and --save see the gathered masters, and `plan --world-size N` shows its state
#     at 1/N;
#   - a rank given other data, or failing, ends the job with a one-line error per rank naming the rank.
# Usage: data_parallel.sh ONNX_TRAIN_BINARY EXAMPLES_DIR PYTHON
set -u
tool=$(realpath "$1")
ex=$(realpath "$2")
py=$3
. "$(dirname "$0")/lib.sh"
# CI runs as root; Open MPI refuses that unless told. One slot per rank on a machine with fewer cores is fine.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi() { timeout 120 mpirun --oversubscribe -np 2 "$@"; }
ce=(--loss cross_entropy --logits logits --labels y --threads 1 --quiet)

# same LOG_A LOG_B TOL: the two logs' losses agree within TOL relative at every step (and have the same length).
same() {
  "$py" - "$1" "$2" "$3" <<'PY'
import json, sys
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
la = [json.loads(l)["loss"] for l in open(a) if not json.loads(l).get("eval")]
lb = [json.loads(l)["loss"] for l in open(b) if not json.loads(l).get("eval")]
assert len(la) == len(lb) and la, f"{len(la)} vs {len(lb)} steps"
worst = max(abs(x - y) / abs(y) for x, y in zip(la, lb))
assert worst <= tol, f"max rel diff {worst:.2e} > {tol}"
PY
}

for model in digits_mlp tiny_lm; do
  data=$ex/$model/train.npz
  [ $model = tiny_lm ] && data=$ex/$model/data.npz
  for opt in sgd adam; do
    for order in --no-shuffle "--seed 7"; do
      # --bucket-mb 0.01: the gradients go in several buckets (ordered all-reduces).
      if mpi "$tool" train "$ex/$model/model.onnx" --data "$data" "${ce[@]}" --batch 8 --steps 6 $order \
           --optimizer $opt --bucket-mb 0.01 --log-json "$tmp/dp.jsonl" 2>"$tmp/err" &&
         "$tool" train "$ex/$model/model.onnx" --data "$data" "${ce[@]}" --batch 16 --steps 6 $order \
           --optimizer $opt --log-json "$tmp/one.jsonl" 2>>"$tmp/err" &&
         same "$tmp/dp.jsonl" "$tmp/one.jsonl" 1e-5 2>>"$tmp/err"; then ok
      else bad "$model $opt $order: 2 ranks x 8 vs 1 x 16: $(tail -1 "$tmp/err")"; fi
    done
  done
done

# Accumulation, and fp16's skipped steps decided alike on every rank.
m=$ex/digits_mlp
for model in digits_mlp tiny_lm; do
  data=$ex/$model/train.npz
  [ $model = tiny_lm ] && data=$ex/$model/data.npz
  if mpi "$tool" train "$ex/$model/model.onnx" --data "$data" "${ce[@]}" --batch 8 --grad-accum 2 --steps 5 \
       --no-shuffle --optimizer adam --log-json "$tmp/dp.jsonl" 2>"$tmp/err" &&
     "$tool" train "$ex/$model/model.onnx" --data "$data" "${ce[@]}" --batch 16 --grad-accum 2 --steps 5 \
       --no-shuffle --optimizer adam --log-json "$tmp/one.jsonl" 2>>"$tmp/err" &&
     same "$tmp/dp.jsonl" "$tmp/one.jsonl" 1e-5 2>>"$tmp/err"; then ok
  else bad "$model --grad-accum 2: 2 ranks x 8 vs 1 x 16: $(tail -1 "$tmp/err")"; fi
done
# fp16: rank 1's first batch (samples 16..31) scaled so that its activations overflow fp16; rank 0's is as usual.
"$py" - "$m/train.npz" "$tmp/loud.npz" <<'PY'
import numpy as np, sys
d = dict(np.load(sys.argv[1]))
d["x"] = d["x"].copy()
d["x"][16:32] *= 1e5
np.savez(sys.argv[2], **d)
PY
fp16=(--amp=fp16 --loss-scale-init 1 --steps 3 --no-shuffle --optimizer adam --batch 16)
if mpi "$tool" train "$m/model.onnx" --data "$tmp/loud.npz" "${ce[@]}" "${fp16[@]}" --log-json "$tmp/dp.jsonl" \
     2>"$tmp/err" &&
   "$tool" train "$m/model.onnx" --data "$tmp/loud.npz" "${ce[@]}" "${fp16[@]}" --log-json "$tmp/one.jsonl" \
     2>>"$tmp/err" &&
   "$py" - "$tmp/dp.jsonl" "$tmp/one.jsonl" 2>>"$tmp/err" <<'PY'; then ok
import json, sys
dp, one = ([json.loads(l)["skipped"] for l in open(f)] for f in sys.argv[1:3])
assert not one[0], "rank 0's batch alone overflows: the test data is wrong"
assert dp[0] and not any(dp[1:]), f"2 ranks skipped {dp}: rank 0 must skip the step rank 1 overflowed, only that one"
PY
else bad "--amp=fp16: a step that overflows on rank 1 only: $(tail -1 "$tmp/err")"; fi

# The CNN against PyTorch DDP: its first 960 training images, as the reference read them.
f=$ex/fashion_cnn
if "$py" "$f/convert.py" --out "$tmp/fashion" --limit 960 >/dev/null 2>"$tmp/err" &&
   mpi "$tool" train "$f/model.onnx" --data "$tmp/fashion/train.npz" "${ce[@]}" --batch 16 --steps 30 --no-shuffle \
     --optimizer adam --lr 0.001 --bucket-mb 0.02 --log-json "$tmp/cnn.jsonl" 2>>"$tmp/err" &&
   "$py" - "$tmp/cnn.jsonl" "$f/trajectory_ddp2.json" 2>>"$tmp/err" <<'PY'; then ok
import json, sys
ours = [json.loads(l)["loss"] for l in open(sys.argv[1])]
ref = json.load(open(sys.argv[2]))
want = ref["losses"]
assert ref["ranks"] == 2 and ref["batch"] == 16 and len(ours) == len(want) == 30, (len(ours), len(want))
worst = max(abs(a - b) / abs(b) for a, b in zip(ours, want))
assert worst <= 1e-4, f"max rel diff from PyTorch DDP {worst:.2e}"
assert ours[-1] < 0.8 * ours[0], f"loss {ours[0]} -> {ours[-1]}"
PY
else bad "fashion_cnn, 2 ranks x 16 against PyTorch DDP: $(tail -1 "$tmp/err")"; fi

# --profile: the communication has a lane of its own in rank 0's trace, one all-reduce per bucket, each after its
# bucket's AllReduceStart kernel.
if mpi "$tool" train "$ex/tiny_lm/model.onnx" --data "$ex/tiny_lm/data.npz" "${ce[@]}" --batch 8 --steps 3 \
     --no-shuffle --bucket-mb 0.02 --profile "$tmp/trace.json" 2>"$tmp/err" &&
   "$py" - "$tmp/trace.json" 2>>"$tmp/err" <<'PY'; then ok
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
starts = sorted((e for e in ev if e["name"] == "AllReduceStart"), key=lambda e: e["ts"])
comm = sorted((e for e in ev if e.get("cat") == "communication"), key=lambda e: e["ts"])
assert len(starts) > 3 and len(comm) == len(starts), f"{len(starts)} starts, {len(comm)} all-reduces"
assert len({e["tid"] for e in comm}) == 1 and comm[0]["tid"] not in {e["tid"] for e in starts}
for s, c in zip(starts, comm):
    assert c["ts"] >= s["ts"] + s["dur"] - 1e-3 and c["dur"] >= 0, (s, c)
PY
else bad "the communication lane of --profile: $(tail -1 "$tmp/err")"; fi

# --sync-batchnorm: BatchNorm on the global batch's statistics, so 2 ranks x 16 follow 1 process x 32 (both NCHW:
# --sync-batchnorm leaves the channels_last pass out, so the one process does too).
if mpi "$tool" train "$f/model.onnx" --data "$tmp/fashion/train.npz" "${ce[@]}" --batch 16 --steps 30 --no-shuffle \
     --optimizer adam --sync-batchnorm --log-json "$tmp/sbn.jsonl" 2>"$tmp/err" &&
   "$tool" train "$f/model.onnx" --data "$tmp/fashion/train.npz" "${ce[@]}" --batch 32 --steps 30 --no-shuffle \
     --optimizer adam --disable-pass channels_last --log-json "$tmp/one.jsonl" 2>>"$tmp/err" &&
   same "$tmp/sbn.jsonl" "$tmp/one.jsonl" 1e-5 2>>"$tmp/err"; then ok
else bad "fashion_cnn --sync-batchnorm, 2 ranks x 16 vs 1 x 32: $(tail -1 "$tmp/err")"; fi

# Files: rank 0 writes the log and the model; a checkpoint of 2 ranks resumes on 2 and continues the trajectory.
m=$ex/digits_mlp
args=("$m/model.onnx" --data "$m/train.npz" "${ce[@]}" --batch 8 --no-shuffle --optimizer adam)
rm -rf "$tmp/ck"
if mpi "$tool" train "${args[@]}" --steps 8 --log-json "$tmp/full.jsonl" --save "$tmp/saved.onnx" 2>"$tmp/err" &&
   [ "$(wc -l <"$tmp/full.jsonl")" -eq 8 ] && [ -s "$tmp/saved.onnx" ]; then ok
else bad "rank 0's log ($(wc -l <"$tmp/full.jsonl" 2>/dev/null) lines, want 8) and model: $(tail -1 "$tmp/err")"; fi
if mpi "$tool" train "${args[@]}" --steps 4 --checkpoint "$tmp/ck" 2>"$tmp/err" &&
   mpi "$tool" train "${args[@]}" --steps 8 --resume "$tmp/ck" --log-json "$tmp/resumed.jsonl" 2>>"$tmp/err" &&
   "$py" - "$tmp/resumed.jsonl" "$tmp/full.jsonl" 2>>"$tmp/err" <<'PY'; then ok
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
f = {x["step"]: x["loss"] for x in map(json.loads, open(sys.argv[2]))}
assert [x["step"] for x in r] == [5, 6, 7, 8], [x["step"] for x in r]
worst = max(abs(x["loss"] - f[x["step"]]) / abs(f[x["step"]]) for x in r)
assert worst <= 1e-6, f"resumed steps differ by {worst:.2e}"
PY
else bad "checkpoint of 2 ranks resumed on 2: $(tail -1 "$tmp/err")"; fi
# On another number of ranks: the position in samples (4 steps x 2 ranks x 8 = 64 samples = step 8 of 1 process x 8:
# its log starts at step 9).
if "$tool" train "${args[@]}" --steps 10 --resume "$tmp/ck" --log-json "$tmp/on1.jsonl" >"$tmp/out" 2>"$tmp/err" &&
   [ "$(head -c 12 "$tmp/on1.jsonl")" = '{"step": 9, ' ]; then ok
else bad "a 2-rank checkpoint resumed by 1 process: $(cat "$tmp/out" "$tmp/err" | tail -2) / $(head -c 40 "$tmp/on1.jsonl")"; fi
rm -rf "$tmp/ck1"
"$tool" train "${args[@]}" --steps 3 --checkpoint "$tmp/ck1" >/dev/null 2>&1
if mpi "$tool" train "${args[@]}" --steps 6 --resume "$tmp/ck1" >"$tmp/out" 2>"$tmp/err"; then
  bad "resumed 3 steps of 1 x 8 (24 samples) on 2 ranks x 8"
elif grep -q "is not a whole number of steps of 2 ranks x 1 x 8" "$tmp/err"; then ok
else bad "24 samples on 2 ranks x 8: $(grep error "$tmp/err" | head -1)"; fi

# --shard-optimizer (ZeRO stage 1): gradients reduce-scattered, each rank's shard of Adam's moments updated, the
# parameters all-gathered -- the unsharded run's trajectory within 1e-6 (several buckets; accumulation, which
# all-reduces the sums, and fp16 with loss scaling, whose skip decision and norm are summed over the ranks).
for model in digits_mlp tiny_lm; do
  data=$ex/$model/train.npz
  [ $model = tiny_lm ] && data=$ex/$model/data.npz
  # Under --amp the fp32 master weights are sharded too (passes/shard_masters.h): the half copies come from the
  # all-gathered shards, also on the micro-steps of --grad-accum.
  for extra in "" "--grad-accum 2" "--amp=fp16 --clip-grad-norm 0.5" "--amp=bf16 --grad-accum 2"; do
    a=("$ex/$model/model.onnx" --data "$data" "${ce[@]}" --batch 8 --steps 5 --seed 3 --optimizer adamw \
      --bucket-mb 0.02 $extra)
    if mpi "$tool" train "${a[@]}" --shard-optimizer --log-json "$tmp/zero.jsonl" 2>"$tmp/err" &&
       mpi "$tool" train "${a[@]}" --log-json "$tmp/ddp.jsonl" 2>>"$tmp/err" &&
       same "$tmp/zero.jsonl" "$tmp/ddp.jsonl" 1e-6 2>>"$tmp/err"; then ok
    else bad "$model --shard-optimizer $extra against unsharded: $(tail -1 "$tmp/err")"; fi
  done
done
# Checkpoints hold the state per parameter, whether sharded or not: the two runs' files hold the same arrays, and
# each resumes the other way, continuing the unsharded trajectory. Under --amp the sharded masters are gathered
# into the parameters' arrays as an unsharded run writes them.
zbase=("$ex/tiny_lm/model.onnx" --data "$ex/tiny_lm/data.npz" "${ce[@]}" --batch 8 --no-shuffle --optimizer adam \
  --bucket-mb 0.02)
for amp in "" --amp=bf16; do
rm -rf "$tmp/ckz" "$tmp/ckd"
zargs=("${zbase[@]}" $amp)
if mpi "$tool" train "${zargs[@]}" --steps 6 --log-json "$tmp/zfull.jsonl" 2>"$tmp/err" &&
   mpi "$tool" train "${zargs[@]}" --steps 3 --shard-optimizer --checkpoint "$tmp/ckz" 2>>"$tmp/err" &&
   mpi "$tool" train "${zargs[@]}" --steps 3 --checkpoint "$tmp/ckd" 2>>"$tmp/err" &&
   mpi "$tool" train "${zargs[@]}" --steps 6 --resume "$tmp/ckz" --log-json "$tmp/z2d.jsonl" 2>>"$tmp/err" &&
   mpi "$tool" train "${zargs[@]}" --steps 6 --shard-optimizer --resume "$tmp/ckd" --log-json "$tmp/d2z.jsonl" \
     2>>"$tmp/err" &&
   "$py" - "$tmp" 2>>"$tmp/err" <<'PY'; then ok
import json, sys
import numpy as np
t = sys.argv[1]
z, d = np.load(f"{t}/ckz/checkpoint.npz"), np.load(f"{t}/ckd/checkpoint.npz")
assert sorted(z.keys()) == sorted(d.keys()), set(z.keys()) ^ set(d.keys())
moments = [k for k in z.keys() if k.endswith(".exp_avg_sq")]
assert len(moments) > 10 and all(np.abs(d[k]).max() > 0 for k in moments), "no per-parameter moments"
assert all(k[: -len(".exp_avg_sq")] in z.keys() for k in moments), "a parameter's array is missing"
for k in z.keys():
    if k != "__trainer_meta__":
        assert np.allclose(z[k], d[k], rtol=1e-6, atol=1e-9), k
full = {x["step"]: x["loss"] for x in map(json.loads, open(f"{t}/zfull.jsonl"))}
for f in ("z2d", "d2z"):
    r = [json.loads(l) for l in open(f"{t}/{f}.jsonl")]
    assert [x["step"] for x in r] == [4, 5, 6], (f, [x["step"] for x in r])
    worst = max(abs(x["loss"] - full[x["step"]]) / abs(full[x["step"]]) for x in r)
    assert worst <= 1e-6, f"{f}: resumed steps differ by {worst:.2e}"
PY
else bad "--shard-optimizer $amp checkpoints, resumed unsharded and back: $(tail -1 "$tmp/err")"; fi
done
# With sharded masters the parameters are gathered for rank 0's evaluation and --save: the same evaluation losses
# and the same saved weights as the unsharded run.
sargs=("$ex/tiny_lm/model.onnx" --data "$ex/tiny_lm/data.npz" --eval-data "$ex/tiny_lm/data.npz" "${ce[@]}" \
  --batch 8 --steps 4 --no-shuffle --optimizer adamw --bucket-mb 0.02 --amp=bf16)
rm -f "$tmp/sz.onnx" "$tmp/sd.onnx"
if mpi "$tool" train "${sargs[@]}" --shard-optimizer --save "$tmp/sz.onnx" --log-json "$tmp/sz.jsonl" 2>"$tmp/err" &&
   mpi "$tool" train "${sargs[@]}" --save "$tmp/sd.onnx" --log-json "$tmp/sd.jsonl" 2>>"$tmp/err" &&
   "$py" - "$tmp" 2>>"$tmp/err" <<'PY'; then ok
import json, sys
import numpy as np
import onnx
from onnx import numpy_helper
t = sys.argv[1]
ev = [[x["loss"] for x in map(json.loads, open(f"{t}/{f}.jsonl")) if x.get("eval")] for f in ("sz", "sd")]
assert len(ev[0]) == 1 and len(ev[1]) == 1, ev
assert all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(*ev)), ev
z, d = [{i.name: numpy_helper.to_array(i) for i in onnx.load(f"{t}/{f}.onnx").graph.initializer} for f in ("sz", "sd")]
assert sorted(z) == sorted(d) and len(z) > 10, set(z) ^ set(d)
for k in z:
    assert z[k].dtype == d[k].dtype and np.allclose(z[k], d[k], rtol=1e-6, atol=1e-9), k
PY
else bad "--shard-optimizer --amp=bf16 --eval-data --save against unsharded: $(tail -1 "$tmp/err")"; fi
# plan --world-size: one rank's optimizer state is 1/N of it (the step counter and lr aside).
for n in 1 2 4; do
  "$tool" plan "${zbase[@]}" --world-size $n --shard-optimizer --json >"$tmp/plan$n.json" 2>"$tmp/err" || bad "plan --world-size $n: $(tail -1 "$tmp/err")"
done
if "$py" - "$tmp" 2>>"$tmp/err" <<'PY'; then ok
import json, sys
s = [json.load(open(f"{sys.argv[1]}/plan{n}.json"))["optimizer_state"] for n in (1, 2, 4)]
p = json.load(open(f"{sys.argv[1]}/plan1.json"))["parameters"]
assert all(abs(s[i] - 2 * p / n) < 1e-3 * p for i, n in enumerate((1, 2, 4))), (s, p)
PY
else bad "plan --world-size 1/2/4 --shard-optimizer: optimizer state $(tail -1 "$tmp/err")"; fi
# Under --amp the fp32 masters join the moments in the shard: 3 parameter sizes over N, and what stays whole is
# only the parameters a float32 op reads (LayerNorm's).
for n in 1 2 4; do
  "$tool" plan "${zbase[@]}" --amp=bf16 --world-size $n --shard-optimizer --json >"$tmp/aplan$n.json" 2>"$tmp/err" ||
    bad "plan --amp=bf16 --world-size $n: $(tail -1 "$tmp/err")"
done
if "$py" - "$tmp" 2>>"$tmp/err" <<'PY'; then ok
import json, sys
j = [json.load(open(f"{sys.argv[1]}/aplan{n}.json")) for n in (1, 2, 4)]
p = j[0]["parameters"]
assert abs(j[0]["optimizer_state"] - 2 * p) < 1e-3 * p, (j[0]["optimizer_state"], p)
for i, n in ((1, 2), (2, 4)):
    assert abs(j[i]["optimizer_state"] - 3 * p / n) < 1e-3 * p, (n, j[i]["optimizer_state"], p)
    assert 0 < j[i]["parameters"] < p / 4, (n, j[i]["parameters"], p)
PY
else bad "plan --amp=bf16 --world-size 1/2/4 --shard-optimizer: $(tail -1 "$tmp/err")"; fi
if mpi "$tool" train "$ex/tiny_lm/model.onnx" --data "$ex/tiny_lm/data.npz" "${ce[@]}" --batch 8 --steps 1 \
     --shard-optimizer --optimizer lamb >"$tmp/out" 2>"$tmp/err"; then
  bad "--shard-optimizer with LAMB ran"
elif grep -q "shard-optimizer: LAMB" "$tmp/err"; then ok
else bad "--shard-optimizer with LAMB: $(grep error "$tmp/err" | head -1)"; fi

# Ctrl-C on mpirun (which sends every rank SIGTERM): the ranks stop after the same step and rank 0 checkpoints it.
rm -rf "$tmp/ckint"
mpirun --oversubscribe -np 2 "$tool" train "${args[@]}" --steps 1000000 --checkpoint "$tmp/ckint" \
  --log-json "$tmp/int.jsonl" >/dev/null 2>"$tmp/int.err" &
pid=$!
for _ in $(seq 200); do [ -s "$tmp/int.jsonl" ] && [ "$(wc -l <"$tmp/int.jsonl")" -gt 20 ] && break; sleep 0.1; done
kill -INT $pid
for _ in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -KILL $pid 2>/dev/null && bad "mpirun still ran 30 s after Ctrl-C"
wait $pid 2>/dev/null
k=$(wc -l <"$tmp/int.jsonl")
if [ -f "$tmp/ckint/checkpoint.npz" ] && grep -q "interrupted (SIGTERM) after step $k;" "$tmp/int.err"; then ok
else bad "Ctrl-C on mpirun: no checkpoint or message after step $k: $(head -3 "$tmp/int.err")"; fi

# A rank that differs or fails ends the job: every rank says which, exit status non-zero, no rank left waiting.
"$py" - "$m/train.npz" "$tmp/other.npz" <<'PY'
import numpy as np, sys
d = dict(np.load(sys.argv[1]))
d["x"] = d["x"][::-1].copy()
np.savez(sys.argv[2], **d)
PY
timeout 120 mpirun --oversubscribe -np 1 "$tool" train "${args[@]}" --steps 2 : \
  -np 1 "$tool" train "$m/model.onnx" --data "$tmp/other.npz" "${ce[@]}" --batch 8 --no-shuffle --optimizer adam \
  --steps 2 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "rank 1 reads other data than rank 0" "$tmp/err"; then ok
else bad "a rank with other data (exit $rc): $(grep error "$tmp/err" | head -2)"; fi
timeout 120 mpirun --oversubscribe -np 1 "$tool" train "${args[@]}" --steps 2 : \
  -np 1 "$tool" train "${args[@]}" --steps 2 --lr-schedule nonsense >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "onnx-train: error: rank 1: " "$tmp/err"; then ok
else bad "a failing rank (exit $rc): $(grep error "$tmp/err" | head -2)"; fi
finish
