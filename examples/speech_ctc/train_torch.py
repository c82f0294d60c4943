"""The speech CTC example's PyTorch recipe: trains export.py's model (the same initial weights as model.onnx or
model_gru.onnx) on make_data.py's train.npz with Adam and a CTC loss, then measures the greedy-decoded character
error rate on test.npz, whose voices the training split never uses. It is the reference for what
`onnx-train train model.onnx --loss ctc ...` should reach with the same settings.

Needs PyTorch and NumPy (Debian: python3-torch; run with /usr/bin/python3):
    /usr/bin/python3 examples/speech_ctc/make_data.py --out /tmp/speech
    /usr/bin/python3 examples/speech_ctc/train_torch.py --data /tmp/speech [--cell lstm|gru] [--steps N]
        [--batch 16] [--lr 0.002] [--lr-schedule constant|cosine] [--clip-grad-norm 5] [--threads 2] [--seed 0]
Each batch has the file's full T frames (zero-padded, as onnx-train trains it); the CTC loss is
F.ctc_loss(logits.log_softmax(2), labels, logit_lengths, label_lengths, blank=0, reduction="mean"). The learning
rate is constant (the default; cosine: Hugging Face's decay to 0 at the last step, no warm-up, as onnx-train's
--lr-schedule cosine). Each epoch visits the training set in a new random order, the remainder dropped.
Greedy decoding: the argmax class of each frame up to logit_lengths, repeats merged, blanks dropped; CER = the
Levenshtein edits over all test utterances / their label characters (spaces included). Prints the loss and test
CER every --eval-every steps, the training time (evaluation excluded) and the mean time of a step.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from export import ctc, make  # noqa: E402


def load(path):
    d = np.load(path)
    return {k: torch.from_numpy(d[k]) for k in ("x", "labels", "label_lengths", "logit_lengths")}


def edit_distance(a, b):
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def greedy(logits, lengths):
    """logits [T', B, C] -> list of id lists."""
    best = logits.argmax(2).t().tolist()
    out = []
    for seq, n in zip(best, lengths.tolist()):
        ids, prev = [], 0
        for c in seq[:n]:
            if c != prev and c != 0:
                ids.append(c)
            prev = c
        out.append(ids)
    return out


def evaluate(model, data, batch=100):
    model.eval()
    edits = chars = 0
    with torch.no_grad():
        for s in range(0, len(data["x"]), batch):
            hyp = greedy(model(data["x"][s:s + batch]), data["logit_lengths"][s:s + batch])
            for h, lab, n in zip(hyp, data["labels"][s:s + batch].tolist(), data["label_lengths"][s:s + batch]):
                edits += edit_distance(h, lab[:n])
                chars += int(n)
    model.train()
    return edits / chars


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="make_data.py's output folder")
    ap.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    ap.add_argument("--steps", type=int, help="default: 600 (lstm), 500 (gru)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.002)
    ap.add_argument("--lr-schedule", choices=["constant", "cosine"], default="constant")
    ap.add_argument("--clip-grad-norm", type=float, default=5.0, help="0: no clipping")
    ap.add_argument("--eval-every", type=int, default=100, help="steps between test CERs (not timed)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="the shuffling")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    steps = args.steps or {"lstm": 600, "gru": 500}[args.cell]

    train, test = load(os.path.join(args.data, "train.npz")), load(os.path.join(args.data, "test.npz"))
    model = make(args.cell).train()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    if args.lr_schedule == "cosine":
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 0.5 * (1 + math.cos(math.pi * k / steps)))
    n = len(train["x"])
    per_epoch = n // args.batch
    rng = np.random.default_rng(args.seed)
    print(f"{args.cell}: {sum(p.numel() for p in model.parameters())} parameters; {n} utterances, x "
          f"{tuple(train['x'].shape)}; batch {args.batch}, {steps} steps ({steps / per_epoch:.1f} epochs), "
          f"lr {args.lr} {args.lr_schedule}, {args.threads} threads", flush=True)
    train_time, losses = 0.0, []
    for k in range(steps):
        if k % per_epoch == 0:  # a new epoch: a new order, the remainder dropped
            order = torch.from_numpy(rng.permutation(n))
        t0 = time.time()
        idx = order[(k % per_epoch) * args.batch:(k % per_epoch + 1) * args.batch]
        opt.zero_grad()
        loss = ctc(model(train["x"][idx]), train["labels"][idx], train["logit_lengths"][idx],
                   train["label_lengths"][idx])
        loss.backward()
        if args.clip_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
        opt.step()
        if args.lr_schedule == "cosine":
            sched.step()
        train_time += time.time() - t0
        losses.append(float(loss))
        if (k + 1) % args.eval_every == 0 or k + 1 == steps:
            cer = evaluate(model, test)
            print(f"step {k + 1}: loss {np.mean(losses[-args.eval_every:]):.3f} (mean of the last "
                  f"{min(args.eval_every, len(losses))}), test CER {100 * cer:.1f}%, {train_time:.1f} s training",
                  flush=True)
    print(f"{steps} steps in {train_time:.1f} s: {1000 * train_time / steps:.0f} ms per step (batch {args.batch}, "
          f"{args.threads} threads); test CER {100 * cer:.1f}% (unseen voices)")


if __name__ == "__main__":
    main()
