"""Data-parallel scaling on one machine: onnx-train under `mpirun -np 2` (1 thread per rank) against one process at
1 thread and at 2 threads, the same global batch, in interleaved rounds.

    python3 bench/data_parallel.py ONNX_TRAIN [--rounds R] [--steps S] [--bucket-mb MB]

Models: the tiny transformer (examples/tiny_lm, 16 sequences per rank) and the fashion CNN (examples/fashion_cnn,
BatchNorm, 32 images per rank; its data converted to /tmp by the example's convert.py). Per round and model: one run
of each configuration, each run's median step time after its first two steps; samples/s = global batch / step.
A fifth runs the 2 ranks with --shard-optimizer (ZeRO stage 1: reduce-scatter, sharded Adam, all-gather), against
the plain 2 ranks. A fourth configuration runs two independent processes at once (1 thread, batch B each, no communication): the most
2 ranks could reach on this machine. Prints per model the medians over the rounds, the ratios, and -- from a separate --profile-ops run of the 2 ranks
with --bucket-mb (default 0.02: at least 4 buckets on the CNN) -- the all-reduce time per step and the share of it
hidden behind the backward.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
ex = os.path.join(here, "..", "examples")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(tool, model, data, batch, steps, threads, ranks, extra=()):
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.jsonl")
        args = [tool, "train", model, "--data", data, "--loss", "cross_entropy", "--logits", "logits", "--labels", "y",
                "--batch", str(batch), "--steps", str(steps), "--no-shuffle", "--threads", str(threads), "--optimizer",
                "adam", "--log-json", log, "--quiet", *extra]
        if ranks > 1:
            args = ["mpirun", "--oversubscribe", "-np", str(ranks)] + args
        p = subprocess.run(args, capture_output=True, text=True, env=ENV)
        if p.returncode != 0:
            sys.exit("failed: %s\n%s" % (" ".join(args), p.stderr[-2000:]))
        ms = [json.loads(line)["step_ms"] for line in open(log) if line.strip()][2:]
        return statistics.median(ms), p.stdout


def run_pair(tool, model, data, batch, steps):
    """Two independent processes at once, 1 thread each, batch `batch` each (no communication): what 2 ranks could
    reach on this machine if the all-reduce cost nothing. Returns the slower one's median step."""
    with tempfile.TemporaryDirectory() as tmp:
        procs, logs = [], []
        for i in range(2):
            log = os.path.join(tmp, "log%d.jsonl" % i)
            logs.append(log)
            args = [tool, "train", model, "--data", data, "--loss", "cross_entropy", "--logits", "logits", "--labels",
                    "y", "--batch", str(batch), "--steps", str(steps), "--no-shuffle", "--threads", "1", "--optimizer",
                    "adam", "--log-json", log, "--quiet"]
            procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV))
        for p in procs:
            if p.wait() != 0:
                sys.exit("failed: %s" % p.stderr.read().decode()[-2000:])
        return max(statistics.median([json.loads(line)["step_ms"] for line in open(log) if line.strip()][2:])
                   for log in logs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--bucket-mb", default="0.02")
    a = ap.parse_args()
    fashion = "/tmp/onnx-train-bench-fashion"
    if not os.path.exists(os.path.join(fashion, "train.npz")):
        subprocess.run([sys.executable, os.path.join(ex, "fashion_cnn", "convert.py"), "--out", fashion, "--limit",
                        "4096"], check=True, capture_output=True)
    models = [("tiny transformer (tiny_lm)", os.path.join(ex, "tiny_lm", "model.onnx"),
               os.path.join(ex, "tiny_lm", "data.npz"), 16),
              ("CNN with BatchNorm (fashion_cnn)", os.path.join(ex, "fashion_cnn", "model.onnx"),
               os.path.join(fashion, "train.npz"), 32)]
    print("| model | global batch | 1 process x 1 thread | 1 process x 2 threads | 2 ranks x 1 thread | "
          "2 independent processes x 1 thread | 2 ranks / 1x1 | 2 ranks / 1x2 | 2 independent / 1x1 | "
          "all-reduce per step (hidden) | 2 ranks --shard-optimizer | sharded / 2 ranks |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, model, data, b in models:
        t = {"1x1": [], "1x2": [], "2x1": [], "pair": [], "zero": []}
        for _ in range(a.rounds):
            t["1x1"].append(run(a.tool, model, data, 2 * b, a.steps, 1, 1)[0])
            t["1x2"].append(run(a.tool, model, data, 2 * b, a.steps, 2, 1)[0])
            t["2x1"].append(run(a.tool, model, data, b, a.steps, 1, 2)[0])
            t["pair"].append(run_pair(a.tool, model, data, b, a.steps))
            t["zero"].append(run(a.tool, model, data, b, a.steps, 1, 2, ("--shard-optimizer",))[0])
        sps = {k: 2 * b / (statistics.median(v) / 1e3) for k, v in t.items()}
        _, out = run(a.tool, model, data, b, a.steps, 1, 2, ("--profile-ops", "--bucket-mb", a.bucket_mb))
        m = re.search(r"all-reduce \(rank 0\): ([\d.]+) buckets per step, ([\d.]+) ms .*?: (\d+)% hidden", out)
        comm = "%s buckets, %s ms (%s%%)" % m.groups() if m else "?"
        print("| %s | %d | %.0f samples/s | %.0f | %.0f | %.0f | %.2fx | %.2fx | %.2fx | %s | %.0f | %.2fx |" %
              (name, 2 * b, sps["1x1"], sps["1x2"], sps["2x1"], sps["pair"], sps["2x1"] / sps["1x1"],
               sps["2x1"] / sps["1x2"], sps["pair"] / sps["1x1"], comm, sps["zero"], sps["zero"] / sps["2x1"]),
              flush=True)


if __name__ == "__main__":
    main()
