"""oneDNN calls of onnx-train's training step and of PyTorch's on one model of the corpus, side by side.

    .venv-torch/bin/python bench/onednn_side_by_side.py TOOL OUT_DIR NAME [--steps 4] [--threads 2] [--bf16] [--top 25]

Both sides train bench/models_full.py's model NAME (exported in OUT_DIR/NAME by bench/models.sh) for --steps steps
with ONEDNN_VERBOSE=1, and each call after the first step (plans, JIT) is grouped by primitive, implementation,
propagation kind and shape. Printed: per group the calls per step and the ms per step of each side, the groups
where the two differ most first, then the totals by primitive kind -- which calls are identical on both sides
(same implementation and shape) and where the time differs (reorders, another implementation, calls only one side
makes). Its statistic is one run per side: the VM's noise shows in single groups; the totals are what to read.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))


def parse(lines, steps):
    """Groups of exec lines: key -> [calls, ms], per step, over the steps after the first (counted by the marker
    lines the caller splits them with)."""
    g = collections.defaultdict(lambda: [0.0, 0.0])
    for line in lines:
        f = line.strip().split(",")
        if len(f) < 6 or f[1] != "exec":
            continue
        try:
            ms = float(f[-1])
        except ValueError:
            continue
        prop = "forward" if f[5].startswith("forward") else f[5]  # a convolution's inference and training kernels agree
        key = (f[3], f[4], prop, f[-2])  # primitive, implementation, propagation, shape
        g[key][0] += 1.0 / steps
        g[key][1] += ms / steps
    return g


def ours(tool, d, spec, steps, threads, bf16):
    """onnx-train's exec lines of steps 2..steps (the first one's lines are dropped by its count of step lines)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = []
        log = os.path.join(tmp, "log.jsonl")
        for n in (1, steps):
            args = [tool, "train", os.path.join(d, "model.onnx"), "--data", os.path.join(d, "data.npz"), "--batch",
                    str(spec.batch), "--steps", str(n), "--no-shuffle", "--threads", str(threads), "--optimizer",
                    "adam", "--lr", "1e-4", "--quiet", "--log-json", log]
            args += ["--loss-output", "loss"] if spec.loss == "inside" else [
                "--loss", "cross_entropy", "--logits", "logits", "--labels", "y"]
            if bf16:
                args.append("--amp=bf16")
            p = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, ONEDNN_VERBOSE="1"))
            if p.returncode != 0:
                sys.exit("onnx-train failed: " + p.stderr[-2000:])
            out.append([x for x in p.stdout.splitlines() + p.stderr.splitlines() if ",exec," in x])
        # The run of `steps` minus the run of 1: the later steps' calls.
        first, all_ = parse(out[0], 1), parse(out[1], 1)
        g = {}
        for k, (c, ms) in all_.items():
            c0, ms0 = first.get(k, (0.0, 0.0))
            g[k] = [(c - c0) / (steps - 1), max(ms - ms0, 0.0) / (steps - 1)]
        step_ms = [json.loads(x)["step_ms"] for x in open(log) if x.strip()][1:]
        return g, sum(step_ms) / len(step_ms)


def theirs(name, steps, threads, bf16):
    """PyTorch's exec lines of steps 2..steps, from a child process (ONEDNN_VERBOSE is read once per process)."""
    code = f"""
import os, sys
sys.path.insert(0, {here!r})
sys.path.insert(0, {os.path.join(here, "..", "tests", "models")!r})
import numpy as np, torch
import models
from models_full import FULL
spec = [s for s in FULL if s.name == {name!r}][0]
data = spec.data(np.random.default_rng(0), spec.batch)
torch.manual_seed(0)
m = spec.make(False)
models.torch_ms(spec, m, data, 1, {threads}, {bf16})
print("@@STEP@@", flush=True)
ms = models.torch_ms(spec, m, data, {steps - 1} + 2, {threads}, {bf16})  # torch_ms drops its first two
print("@@MS@@", sum(ms) / len(ms), flush=True)
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, ONEDNN_VERBOSE="1"))
    if p.returncode != 0:
        sys.exit("PyTorch failed: " + p.stderr[-2000:])
    lines = p.stdout.splitlines()
    at = lines.index("@@STEP@@")
    step_ms = float([x for x in lines if x.startswith("@@MS@@")][0].split()[1])
    return parse([x for x in lines[at + 1:] if not x.startswith("@@")], steps + 1), step_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("out")
    ap.add_argument("name")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json", help="also write the groups here")
    a = ap.parse_args()
    sys.path.insert(0, here)
    sys.path.insert(0, os.path.join(here, "..", "tests", "models"))
    from models_full import FULL  # noqa: E402
    spec = [s for s in FULL if s.name == a.name][0]
    o, o_step = ours(a.tool, os.path.join(a.out, a.name), spec, a.steps, a.threads, a.bf16)
    t, t_step = theirs(a.name, a.steps, a.threads, a.bf16)
    keys = set(o) | set(t)
    rows = sorted(keys, key=lambda k: -abs(o.get(k, [0, 0])[1] - t.get(k, [0, 0])[1]))
    print(f"{a.name} {'bf16' if a.bf16 else 'fp32'}, {a.threads} threads, per step (steps 2..{a.steps})")
    print(f"{'onnx-train calls':>16} {'ms':>8} {'PyTorch calls':>14} {'ms':>8}  primitive implementation prop shape")
    for k in rows[:a.top]:
        oc, om = o.get(k, [0, 0])
        tc, tm = t.get(k, [0, 0])
        print(f"{oc:16.1f} {om:8.2f} {tc:14.1f} {tm:8.2f}  {' '.join(k)}")
    tot = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for k in keys:
        kind = k[0] + (" (same impl+shape on both)" if k in o and k in t else " (one side only)")
        tot[kind][0] += o.get(k, [0, 0])[0]
        tot[kind][1] += o.get(k, [0, 0])[1]
        tot[kind][2] += t.get(k, [0, 0])[0]
        tot[kind][3] += t.get(k, [0, 0])[1]
    print("\ntotals by primitive")
    for kind, (oc, om, tc, tm) in sorted(tot.items(), key=lambda x: -(x[1][1] + x[1][3])):
        print(f"{oc:16.1f} {om:8.2f} {tc:14.1f} {tm:8.2f}  {kind}")
    o_all = sum(v[1] for v in o.values())
    t_all = sum(v[1] for v in t.values())
    print(f"{'':16} {o_all:8.2f} {'':14} {t_all:8.2f}  every oneDNN call")
    print(f"{'':16} {o_step:8.2f} {'':14} {t_step:8.2f}  the step (mean)")
    print(f"{'':16} {o_step - o_all:8.2f} {'':14} {t_step - t_all:8.2f}  the step outside oneDNN")
    if a.json:
        json.dump({"ours": {"|".join(k): v for k, v in o.items()}, "pytorch": {"|".join(k): v for k, v in t.items()}},
                  open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
