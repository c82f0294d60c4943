"""PyTorch peer of the training benchmark: the same model (train_models.py), batch, data and thread count as
onnx-train; Adam (lr 1e-3), cross-entropy; one step = zero_grad, forward, loss, backward, optimizer step.
Prints: median step ms, then the process's peak RSS in MiB, then the RSS after import + data load (baseline).
Usage: torch_train_peer.py NAME DATA.npz THREADS STEPS
"""
import resource
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from train_models import BATCH, build  # noqa: E402

name, data, threads, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
torch.set_num_interop_threads(1)
d = np.load(data)
x, y = torch.from_numpy(d["x"]), torch.from_numpy(d["y"])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
model = build(name).train()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
b = BATCH[name]
per_epoch = x.shape[0] // b
times = []
for k in range(steps + 3):
    j = k % per_epoch
    xb, yb = x[j * b:(j + 1) * b], y[j * b:(j + 1) * b]
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    times.append((time.perf_counter() - t0) * 1e3)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("%.3f %.1f %.1f" % (statistics.median(times[3:]), peak, base))
