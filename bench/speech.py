"""The speech example's training step (examples/speech_ctc: Conv1d front end, 2-layer bidirectional LSTM or 2-layer
GRU, CTC) on onnx-train against PyTorch on the same CPU, the same model, weights and utterances.

    .venv-torch/bin/python bench/speech.py ONNX_TRAIN [--pairs P] [--steps S] [--threads T] [--batch B]

Both sides train the exported initial weights on examples/speech_ctc/trajectory.npz with Adam (lr 0.002), batch B,
S steps per run, in P interleaved pairs (onnx-train, then PyTorch, ...), at T threads on both sides (PyTorch's may be
set apart: --torch-threads), in fp32 and in
bf16 (onnx-train --amp=bf16; PyTorch's CPU autocast to bfloat16 around the model, the loss in fp32: F.ctc_loss on
log_softmax of the logits). A side's time is the median step time over its pairs, each run's first two steps left
out (the plan, the caches). Prints one line per model and precision and a Markdown table.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
ex = os.path.join(here, "..", "examples", "speech_ctc")
sys.path.insert(0, ex)
import export  # noqa: E402  (the example's model definition and initial weights)

warnings.filterwarnings("ignore")


def onnx_train_ms(tool, model, steps, threads, batch, bf16):
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.jsonl")
        args = [tool, "train", model, "--data", os.path.join(ex, "trajectory.npz"), "--loss", "ctc", "--logits",
                "logits", "--labels", "labels", "--label-lengths", "label_lengths", "--logit-lengths", "logit_lengths",
                "--batch", str(batch), "--steps", str(steps), "--no-shuffle", "--threads", str(threads),
                "--optimizer", "adam", "--lr", "0.002", "--log-json", log, "--quiet"]
        if bf16:
            args.append("--amp=bf16")
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "exit %d" % p.returncode)
        return [json.loads(line)["step_ms"] for line in open(log) if line.strip()][2:]


def torch_ms(cell, data, steps, threads, batch, bf16):
    torch.set_num_threads(threads)
    m = export.make(cell)
    m.train()
    opt = torch.optim.Adam(m.parameters(), lr=0.002)
    n = len(data["x"]) // batch
    ms = []
    for k in range(steps):
        j = k % n
        b = {key: torch.from_numpy(a[j * batch:(j + 1) * batch]) for key, a in data.items()}
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = m(b["x"])
        loss = F.ctc_loss(logits.float().log_softmax(2), b["labels"], b["logit_lengths"], b["label_lengths"])
        loss.backward()
        opt.step()
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms[2:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--precisions", default="fp32,bf16")
    # PyTorch's CPU RNNs can run slower on 2 threads than on 1: its best is what onnx-train is held to.
    ap.add_argument("--torch-threads", type=int, default=0, help="PyTorch's threads (default: --threads)")
    a = ap.parse_args()
    data = dict(np.load(os.path.join(ex, "trajectory.npz")))
    rows = []
    for cell, model in (("lstm", "model.onnx"), ("gru", "model_gru.onnx")):
        for prec in a.precisions.split(","):
            ours, theirs = [], []
            for _ in range(a.pairs):
                ours += onnx_train_ms(a.tool, os.path.join(ex, model), a.steps, a.threads, a.batch, prec == "bf16")
                theirs += torch_ms(cell, data, a.steps, a.torch_threads or a.threads, a.batch, prec == "bf16")
            o, t = float(np.median(ours)), float(np.median(theirs))
            print(f"{cell:5s} {prec}: onnx-train {o:8.1f} ms  PyTorch {t:8.1f} ms  PyTorch/onnx-train {t / o:.2f}",
                  flush=True)
            rows.append((cell, prec, o, t))
    print(f"\n| model | batch | precision | onnx-train ms | PyTorch ms | PyTorch / onnx-train |")
    print("| --- | --- | --- | --- | --- | --- |")
    for cell, prec, o, t in rows:
        name = "conv + 2-layer BiLSTM" if cell == "lstm" else "conv + 2-layer GRU"
        print(f"| {name} | {a.batch} | {prec} | {o:.1f} | {t:.1f} | {t / o:.2f} |")


if __name__ == "__main__":
    main()
