"""Exports the bundled MLP example (an 8x8-digit classifier shape: 64 -> 128 -> 64 -> 10, GELU and ReLU,
with LayerNorm) from PyTorch, with a batch of inputs and PyTorch's outputs for them.

Needs PyTorch and numpy (Debian: python3-torch; run with /usr/bin/python3):
    /usr/bin/python3 examples/mlp/export.py
Writes model.onnx (dynamic batch axis), input.npz (array `x`) and expected.npz (array `logits`, PyTorch's
forward in float64 on the same weights, cast to float32).
"""
import os

import numpy as np
import torch
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.norm = nn.LayerNorm(128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        h = nn.functional.gelu(self.norm(self.fc1(x)))
        h = torch.relu(self.fc2(h))
        return self.fc3(h)


model = MLP().eval()
x = torch.rand(32, 64) * 16.0  # digit pixels are 0..16
torch.onnx.export(model, x, os.path.join(here, "model.onnx"), input_names=["x"], output_names=["logits"],
                  dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13)
with torch.no_grad():
    ref = model.double()(x.double()).float().numpy()
np.savez(os.path.join(here, "input.npz"), x=x.numpy())
np.savez(os.path.join(here, "expected.npz"), logits=ref)
print("exported model.onnx, input.npz, expected.npz")
