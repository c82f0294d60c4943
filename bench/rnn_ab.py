"""A/B of the CPU recurrent kernels' two paths on the speech example's models: oneDNN's RNN primitives against our
kernels around oneDNN GEMMs (cpu_ops/rnn_kernel.h), forced by ONNXTRAIN_CPU_RNN=primitive|gemm, in interleaved
rounds of the same training run (examples/speech_ctc, fp32, Adam, CTC).

    python3 bench/rnn_ab.py ONNX_TRAIN [--rounds R] [--steps S] [--threads 1,2] [--batch B]

Per model and thread count: the median step time of each path over its rounds (each run's first two steps left out),
the recurrent kernels' time per step from --profile-ops (forward node and RecurrentGrad), B/A, and the largest
relative difference of the two paths' losses. Prints a Markdown table.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
ex = os.path.join(here, "..", "examples", "speech_ctc")


def run(tool, model, path, steps, threads, batch):
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.jsonl")
        args = [tool, "train", os.path.join(ex, model), "--data", os.path.join(ex, "trajectory.npz"), "--loss", "ctc",
                "--logits", "logits", "--labels", "labels", "--label-lengths", "label_lengths", "--logit-lengths",
                "logit_lengths", "--batch", str(batch), "--steps", str(steps), "--no-shuffle", "--threads",
                str(threads), "--optimizer", "adam", "--lr", "0.002", "--log-json", log, "--quiet", "--profile-ops"]
        env = dict(os.environ, ONNXTRAIN_CPU_RNN=path)
        p = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
        rows = [json.loads(line) for line in open(log) if line.strip()]
    # --profile-ops: "OP  calls  ms  share  ..." per op type; the ms are per step.
    rnn = sum(float(m.group(1)) for m in re.finditer(r"^(?:LSTM|GRU|RNN|RecurrentGrad)\s+\d+\s+([\d.]+)", p.stdout +
                                                         p.stderr, re.M))
    return [r["step_ms"] for r in rows][2:], rnn, [r["loss"] for r in rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args()
    print("| model | threads | GEMM path ms/step (recurrent kernels) | primitives ms/step (recurrent kernels) |"
          " primitives / GEMM, step (kernels) | max rel loss diff |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model, name in (("model.onnx", "conv + 2-layer BiLSTM"), ("model_gru.onnx", "conv + 2-layer GRU")):
        for threads in [int(t) for t in a.threads.split(",")]:
            res = {"gemm": ([], []), "primitive": ([], [])}
            diff = 0.0
            for _ in range(a.rounds):
                losses = {}
                for path in ("gemm", "primitive"):
                    ms, rnn, loss = run(a.tool, model, path, a.steps, threads, a.batch)
                    res[path][0].append(statistics.median(ms))
                    res[path][1].append(rnn)
                    losses[path] = loss
                diff = max([diff] + [abs(x - y) / abs(x) for x, y in zip(losses["gemm"], losses["primitive"])])
            g = [statistics.median(v) for v in res["gemm"]]
            p = [statistics.median(v) for v in res["primitive"]]
            print("| %s | %d | %.1f (%.1f) | %.1f (%.1f) | %.2f (%.2f) | %.1e |" %
                  (name, threads, g[0], g[1], p[0], p[1], p[0] / g[0], p[1] / g[1], diff), flush=True)


if __name__ == "__main__":
    main()
