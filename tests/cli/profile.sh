#!/usr/bin/env bash
# train --profile FILE: a Chrome trace of one step. The tiny transformer under --amp=bf16 --fuse=lite for 3 steps:
# the trace holds one complete event per kernel of the step (the count the summary line reports), on threads that
# the metadata names, each with node, op, precision and bytes that follow from its operand shapes; Casts appear in
# bfloat16, the fused clusters with the ops they replaced; events of one thread do not overlap; the per-kind sums
# add up to the kernel time. A run of one step still writes its trace; an unwritable path is a one-line error.
# Usage: profile.sh ONNX_TRAIN_BINARY EXAMPLES_DIR
set -u
tool=$(realpath "$1")
ex=$(realpath "$2")
. "$(dirname "$0")/lib.sh"

lm=(train "$ex/tiny_lm/model.onnx" --loss cross_entropy --logits logits --labels y --data "$ex/tiny_lm/data.npz"
    --batch 16 --no-shuffle --threads 2 --optimizer adam)
"$tool" "${lm[@]}" --steps 3 --amp=bf16 --fuse=lite --profile "$tmp/t.json" >"$tmp/out" 2>"$tmp/err" && ok ||
  { bad "train --profile exited non-zero"; cat "$tmp/err"; }
grep -q "^profile of step 2: $tmp/t.json (" "$tmp/err" && ok || { bad "no summary line for step 2"; cat "$tmp/err"; }

if python3 - "$tmp/t.json" "$tmp/err" <<'PY'; then ok; else bad "profile trace checks"; fi
import json, re, sys
doc = json.load(open(sys.argv[1]))
line = [l for l in open(sys.argv[2]) if l.startswith("profile of step")][0]
errors = []
def check(cond, what):
    if not cond: errors.append(what)
ev = [e for e in doc["traceEvents"] if e["ph"] == "X"]
meta = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
other = doc["otherData"]
check(other["step"] == 2 and other["precision"] == "bfloat16" and other["fuse"] == "lite", f"otherData {other}")
check(len(ev) == other["kernels"] and f"({len(ev)} kernels" in line, f"{len(ev)} events, summary: {line}")
check(len(ev) > 50, f"only {len(ev)} kernels in a transformer step")
size = {"float32": 4, "bfloat16": 2, "float16": 2, "int64": 8, "int32": 4, "bool": 1, "uint8": 1, "int8": 1, "float64": 8}
def nbytes(t):
    m = re.fullmatch(r"(\w+)\[([\d,]*)\]", t)
    n = 1
    for d in filter(None, m.group(2).split(",")): n *= int(d)
    return n * size[m.group(1)]
nodes = set()
for e in ev:
    a = e["args"]
    check(e["tid"] in meta, f"thread {e['tid']} has no name")
    check(e["dur"] >= 0 and e["ts"] >= 0, f"{a['node']}: negative time")
    check(e["cat"] == a["precision"], f"{a['node']}: category {e['cat']} != precision {a['precision']}")
    check(a["bytes_read"] == sum(map(nbytes, a["inputs"])), f"{a['node']}: bytes_read {a['bytes_read']} vs {a['inputs']}")
    check(a["bytes_written"] == sum(map(nbytes, a["outputs"])), f"{a['node']}: bytes_written")
    check(a["bytes"] == a["bytes_read"] + a["bytes_written"], f"{a['node']}: bytes")
    nodes.add(a["node"])
check(len(nodes) == len(ev), "a node appears twice")
casts = [e for e in ev if e["name"] == "Cast"]
check(any(e["args"]["precision"] == "bfloat16" for e in casts), "no Cast to bfloat16 in an --amp=bf16 step")
fused = [e for e in ev if e["name"] == "FusedElementwise"]
check(len(fused) > 0 and all(len(e["args"]["fused_ops"]) >= 2 for e in fused), "fused clusters without their ops")
check(any(e["args"]["precision"] == "bfloat16" for e in ev if e["args"]["op"].endswith("MatMul")), "no bf16 MatMul")
by_tid = {}
for e in ev: by_tid.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
for tid, spans in by_tid.items():
    spans.sort()
    check(all(b[0] >= a[1] - 1e-3 for a, b in zip(spans, spans[1:])), f"thread {tid}: overlapping kernels")
kinds = other["kernel_ms_by_kind"]
check(abs(sum(k["ms"] for k in kinds.values()) - sum(e["dur"] for e in ev) / 1e3) < 1e-3, "kinds do not sum")
check(sum(k["kernels"] for k in kinds.values()) == len(ev), "kind counts do not sum")
check(kinds["casts"]["kernels"] == len(casts), "casts count")
if errors:
    print("\n".join(errors[:20]))
    sys.exit(1)
PY

# One step: its trace is still written (step 1).
"$tool" "${lm[@]}" --steps 1 --profile "$tmp/one.json" --quiet >/dev/null 2>"$tmp/err" && ok || { bad "1 step"; cat "$tmp/err"; }
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['otherData']['step'] == 1 and d['otherData']['precision'] == 'fp32'" \
  "$tmp/one.json" && ok || bad "the one-step trace"
expect_error "--profile: cannot write '$tmp/no/such/dir/t.json'" "${lm[@]}" --steps 1 --profile "$tmp/no/such/dir/t.json"

# --profile-ops: per-op times of the steps after the first, each GEMM op with the rate its counted operations give,
# and the GEMMs' total: ms and TFLOP/s that agree with each other (rate = flops / time, flops > 0).
"$tool" "${lm[@]}" --steps 3 --quiet --profile-ops >"$tmp/ops" 2>"$tmp/err" && ok || { bad "--profile-ops"; cat "$tmp/err"; }
if python3 - "$tmp/ops" <<'PY'; then ok; else bad "--profile-ops table"; cat "$tmp/ops"; fi
import re, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[0].split() == ["op", "kernels", "ms/run", "share", "TFLOP/s"], lines[0]
rows = {l.split()[0]: l.split() for l in lines[1:] if l and not l.startswith(("slowest", " ", "GEMMs"))}
gemm_ops = [op for op in ("MatMul", "Gemm", "MatMulBias", "MatMulTrans", "GemmSum") if op in rows]
assert gemm_ops, rows.keys()
for op in gemm_ops:
    assert len(rows[op]) == 5 and float(rows[op][4]) > 0, rows[op]
assert "LayerNormalization" in rows and len(rows["LayerNormalization"]) == 4, rows.get("LayerNormalization")  # no rate
total = [l for l in lines if l.startswith("GEMMs:")]
m = re.match(r"GEMMs: ([0-9.]+) ms/run, ([0-9.]+) TFLOP/s", total[0])
ms = sum(float(rows[op][2]) for op in gemm_ops)
assert abs(float(m.group(1)) - ms) <= 0.002 * len(gemm_ops) + 1e-9, (m.group(1), ms)
assert float(m.group(2)) > 0
PY

# run --repeat --profile-ops: the per-op times are those of the timed runs, not the first (which makes the plan and
# JITs oneDNN's kernels: counted in, this MLP's ops read ~1.2 ms per run against a ~0.04 ms median run). Per run they
# add up to about one run: at most 3x the median plus 0.3 ms (room for one 9 ms preemption among the 30 runs).
"$tool" run "$ex/mlp/model.onnx" --data "$ex/mlp/input.npz" --repeat 30 --threads 1 --profile-ops >"$tmp/rops" \
  2>"$tmp/err" && ok || { bad "run --profile-ops"; cat "$tmp/err"; }
if python3 - "$tmp/rops" <<'PY'; then ok; else bad "run --profile-ops excludes the first run"; cat "$tmp/rops"; fi
import re, sys
lines = open(sys.argv[1]).read().splitlines()
med = float(re.match(r"runs: 30  median: ([0-9.]+) ms", lines[0]).group(1))
i = lines.index(next(l for l in lines if l.startswith("op ")))
rows = []
for l in lines[i + 1:]:
    if l.startswith(("GEMMs", "slowest")):
        break
    rows.append(l.split())
total = sum(float(r[2]) for r in rows)
assert 0 < total <= 3 * med + 0.3, (total, med)
PY
finish
