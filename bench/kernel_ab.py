"""Two builds of onnx-train on one training run, per op: A/B of a kernel change on a real model.

    python3 bench/kernel_ab.py TOOL_A TOOL_B MODEL DATA [--rounds 5] [--steps 6] [--ops MaxPoolGrad,OptimizerUpdate]
                               [-- extra train flags]

Each round runs A then B (alternating which goes first) with `--profile-ops`, so this VM's drift slows both alike.
Printed: per op (the named ones, else the five slowest of A), the median ms per step of each build over the rounds
and B / A; the median step time (the log's step_ms after the first two steps) and B / A; and the largest relative
difference between the two builds' losses at any step (a change that must not move the numbers should print 0).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def run(tool, a, extra, tmp, tag):
    log = os.path.join(tmp, tag + ".jsonl")
    args = [tool, "train", a.model, "--data", a.data, "--steps", str(a.steps), "--no-shuffle", "--profile-ops",
            "--quiet", "--log-json", log] + extra
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(args), p.stderr[-2000:]))
    ops = {}
    for line in p.stdout.splitlines():
        m = re.match(r"^(\w+)\s+(\d+)\s+([\d.]+)\s+[\d.]+%", line)
        if m:
            ops[m.group(1)] = float(m.group(3))
    steps = [json.loads(x) for x in open(log) if x.strip()]
    return ops, statistics.median([s["step_ms"] for s in steps[2:]] or [steps[-1]["step_ms"]]), \
        [s["loss"] for s in steps]


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--ops", default="")
    a = ap.parse_args(argv)
    res = {"A": [], "B": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = [("A", a.a), ("B", a.b)] if r % 2 == 0 else [("B", a.b), ("A", a.a)]
            for tag, tool in order:
                res[tag].append(run(tool, a, extra, tmp, tag))
    names = [o for o in a.ops.split(",") if o]
    if not names:
        first = res["A"][0][0]
        names = sorted(first, key=first.get, reverse=True)[:5]
    print("%-24s %12s %12s %8s" % ("op (ms per step)", "A", "B", "B / A"))
    for n in names:
        ma = statistics.median(r[0].get(n, 0.0) for r in res["A"])
        mb = statistics.median(r[0].get(n, 0.0) for r in res["B"])
        print("%-24s %12.2f %12.2f %7.2fx" % (n, ma, mb, mb / ma if ma else float("nan")))
    sa = statistics.median(r[1] for r in res["A"])
    sb = statistics.median(r[1] for r in res["B"])
    print("%-24s %12.2f %12.2f %7.2fx" % ("step (log step_ms)", sa, sb, sb / sa))
    la, lb = res["A"][0][2], res["B"][0][2]
    worst = max(abs(x - y) / abs(x) for x, y in zip(la, lb))
    print("losses: %d steps, largest relative difference A vs B %.2e" % (len(la), worst))


if __name__ == "__main__":
    main()
