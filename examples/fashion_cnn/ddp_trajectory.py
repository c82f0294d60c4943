"""PyTorch DistributedDataParallel's loss trajectory for the fashion CNN, the reference for onnx-train's
data-parallel run (`mpirun -np 2 onnx-train train ... --batch 16`).

Needs PyTorch, NumPy and the onnx package (Debian: python3-torch, python3-onnx; run with /usr/bin/python3) and
Debian's dataset-fashion-mnist:
    /usr/bin/python3 examples/fashion_cnn/ddp_trajectory.py
Writes trajectory_ddp2.json: 2 ranks (gloo, one thread each, on this machine), per-rank batch 16, no shuffling,
step k of rank r on samples [(2k + r) * 16, (2k + r + 1) * 16) of the training split in file order (DDP's
assignment, as onnx-train's --no-shuffle), cross-entropy (mean) on the logits, Adam lr 0.001, 30 steps, train mode;
"losses" is each step's loss (before its update) averaged over the ranks, which is what onnx-train logs.
BatchNorm normalizes with each rank's own batch statistics (no SyncBatchNorm), so these losses differ from one
process at batch 32; that run is recorded as "losses_single_batch32" for comparison (its losses are
trajectory_adam.json's first 30, which checks the weights and data loaded here).
"""
import json
import os
import socket
import sys
import time

import numpy as np
import onnx
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from onnx import numpy_helper
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import convert  # noqa: E402  (the idx reader export.py and the demo data use)

SRC = "/usr/share/datasets/fashion-mnist"
RANKS, BATCH, STEPS, LR = 2, 16, 30, 0.001


def load(n):
    """The first n training images and labels, as export.py reads them (x: pixel / 255 in float32)."""
    _, images = convert.read_idx(convert.find(SRC, "train-images-idx3-ubyte"))
    _, labels = convert.read_idx(convert.find(SRC, "train-labels-idx1-ubyte"))
    x = np.frombuffer(images, np.uint8).reshape(-1, 1, 28, 28)[:n].astype(np.float32) / np.float32(255)
    return x, np.frombuffer(labels, np.uint8)[:n].astype(np.int64)


def make():
    """export.py's model, with its initial weights read from the committed model.onnx (whose initializers are
    named after the state_dict's keys), so the start is the exported model's whatever the seed gives today."""
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    init = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
            for t in onnx.load(os.path.join(here, "model.onnx")).graph.initializer}
    missing, unexpected = model.load_state_dict(init, strict=False)
    assert not unexpected and all(k.endswith("num_batches_tracked") for k in missing), (missing, unexpected)
    return model.train()


def train(model, batches, step_loss=float):
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    losses = []
    for xb, yb in batches:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(torch.from_numpy(xb)), torch.from_numpy(yb))
        loss.backward()  # DDP all-reduces (averages) the gradients here
        opt.step()
        losses.append(step_loss(loss))
    return losses


def rank_main(rank, port, x, y, out):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    model = nn.parallel.DistributedDataParallel(make())

    def mean_over_ranks(loss):
        t = loss.detach().clone()
        dist.all_reduce(t)
        return float(t / RANKS)

    first = [(k * RANKS + rank) * BATCH for k in range(STEPS)]
    losses = train(model, [(x[i:i + BATCH], y[i:i + BATCH]) for i in first], mean_over_ranks)
    if rank == 0:
        out.put(losses)
    dist.destroy_process_group()


def main():
    start = time.time()
    x, y = load(RANKS * BATCH * STEPS)
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = mp.spawn(rank_main, args=(port, x, y, out), nprocs=RANKS, join=False)
    ddp = out.get()
    procs.join()

    torch.set_num_threads(1)
    g = RANKS * BATCH
    single = train(make(), [(x[k * g:(k + 1) * g], y[k * g:(k + 1) * g]) for k in range(STEPS)])
    ref = json.load(open(os.path.join(here, "trajectory_adam.json")))
    assert abs(single[0] - ref["losses"][0]) <= 1e-6 * abs(ref["losses"][0]), (single[0], ref["losses"][0])

    with open(os.path.join(here, f"trajectory_ddp{RANKS}.json"), "w") as f:
        json.dump({"optimizer": "adam", "lr": LR, "batch": BATCH, "ranks": RANKS, "steps": STEPS,
                   "loss": "cross_entropy", "logits": "logits", "labels": "y", "shuffle": False,
                   "data": ref["data"], "losses": ddp, "losses_single_batch32": single}, f, indent=1)
    print(f"ddp    {ddp[:5]} ... {ddp[-1]}\nsingle {single[:5]} ... {single[-1]}\n{time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
