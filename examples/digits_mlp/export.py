"""The digits MLP example: scikit-learn's 8x8 digits (1797 images, 10 classes), an MLP 64 -> 64 -> 10 exported
from PyTorch, the data as .npz, and PyTorch's loss trajectories for the trajectory tests.

Needs PyTorch and scikit-learn (Debian: python3-torch python3-sklearn; run with /usr/bin/python3):
    /usr/bin/python3 examples/digits_mlp/export.py
Writes:
  model.onnx         input x: float32[batch,64] (pixels / 16), output logits: float32[batch,10]; initial weights
  train.npz          x (1500 x 64 float32), y (1500 int64)     -- arrays named after the model input and labels
  test.npz           x (297 x 64), y (297)
  trajectory_<opt>.json  PyTorch's per-step losses training this model from these weights on
                     train.npz with batch 50, no shuffling (step k of an epoch uses samples 50k..50k+49; 30
                     steps an epoch), cross-entropy
                     (mean), for `sgd` (lr 0.1) and `adam` (lr 0.01), 36 steps each, and the settings used
"""
import os
import sys

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from trajectory import write_trajectories  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)

digits = load_digits()
x = (digits.data / 16.0).astype(np.float32)
y = digits.target.astype(np.int64)
np.savez(os.path.join(here, "train.npz"), x=x[:1500], y=y[:1500])
np.savez(os.path.join(here, "test.npz"), x=x[1500:], y=y[1500:])


def make():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


model = make().eval()
torch.onnx.export(model, torch.from_numpy(x[:50]), os.path.join(here, "model.onnx"), input_names=["x"],
                  output_names=["logits"], dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                  opset_version=13)

batch, steps = 50, 36
xtr, ytr = x[:1500], y[:1500]
per_epoch = len(xtr) // batch  # 30: steps 31..36 are the second epoch's first batches (no shuffling)
settings = {"sgd": dict(lr=0.1), "adam": dict(lr=0.01)}
write_trajectories(here, make, xtr, ytr, batch, steps, settings)
print("exported model.onnx, train.npz, test.npz, trajectories")
