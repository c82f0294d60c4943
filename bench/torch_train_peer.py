"""PyTorch peer of the training benchmarks: the same model, batch, data and thread count as onnx-train; Adam
(lr 1e-3), cross-entropy; one step = zero_grad, forward, loss, backward, optimizer step.
NAME is mlp or cnn (train_models.py) or tiny_lm (examples/tiny_lm/export.py's TinyLM, random init: the same shapes
as model.onnx, which is all a timing needs). PRECISION bf16 runs forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16) (fp32 weights and optimizer, as onnx-train's --amp=bf16 keeps them).
Prints: median step ms, then the process's peak RSS in MiB, then the RSS after import + data load (baseline).
Usage: torch_train_peer.py NAME DATA.npz THREADS STEPS [fp32|bf16] [BATCH]
"""
import ast
import contextlib
import os
import resource
import statistics
import sys
import time

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from train_models import BATCH, build  # noqa: E402


def tiny_lm():
    """TinyLM from examples/tiny_lm/export.py without running that script: importing it would rewrite the example's
    model.onnx, data.npz and trajectories. Only its imports, constant assignments, classes and functions run."""
    path = os.path.join(os.path.dirname(here), "examples", "tiny_lm", "export.py")
    tree = ast.parse(open(path).read(), path)

    def keep(n):
        if isinstance(n, ast.ImportFrom):
            return n.module != "trajectory"  # lives beside examples/, only for writing trajectories
        if isinstance(n, ast.Assign):
            elts = n.value.elts if isinstance(n.value, ast.Tuple) else [n.value]
            return all(isinstance(e, ast.Constant) for e in elts)  # VOCAB, D, ... = 64, 64, ...
        return isinstance(n, (ast.Import, ast.ClassDef, ast.FunctionDef))

    tree.body = [n for n in tree.body if keep(n)]
    ns = {"__name__": "tiny_lm_export", "__file__": path}
    exec(compile(tree, path, "exec"), ns)
    return ns["make"]()


name, data, threads, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
precision = sys.argv[5] if len(sys.argv) > 5 else "fp32"
b = int(sys.argv[6]) if len(sys.argv) > 6 else BATCH.get(name, 32)
assert precision in ("fp32", "bf16"), precision
torch.set_num_threads(threads)
torch.set_num_interop_threads(1)
d = np.load(data)
x, y = torch.from_numpy(d["x"]), torch.from_numpy(d["y"])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
model = (tiny_lm() if name == "tiny_lm" else build(name)).train()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
per_epoch = x.shape[0] // b
times = []
for k in range(steps + 3):
    j = k % per_epoch
    xb, yb = x[j * b:(j + 1) * b], y[j * b:(j + 1) * b]
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
    with amp:
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    times.append((time.perf_counter() - t0) * 1e3)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("%.3f %.1f %.1f" % (statistics.median(times[3:]), peak, base))
