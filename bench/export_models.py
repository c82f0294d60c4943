"""Exports the inference benchmark models from PyTorch into OUT_DIR (default bench/models):
  mlp.onnx  784 -> 1024 -> 1024 -> 10 with ReLU, batch 256         (GEMM-bound)
  cnn.onnx  3x(Conv3x3-BatchNorm-ReLU) + MaxPool + Linear, 3x64x64 input, batch 32 (convolution-bound)
each with <name>.npz holding the input `x`. Needs PyTorch (Debian: python3-torch; run with /usr/bin/python3).
"""
import os
import sys

import numpy as np
import torch
from torch import nn

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)

mlp = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def block(cin, cout):
    return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]


cnn = nn.Sequential(*block(3, 32), nn.MaxPool2d(2), *block(32, 64), nn.MaxPool2d(2), *block(64, 64),
                    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

for name, model, shape in [("mlp", mlp, (256, 784)), ("cnn", cnn, (32, 3, 64, 64))]:
    model.eval()
    x = torch.randn(*shape)
    torch.onnx.export(model, x, os.path.join(out, name + ".onnx"), input_names=["x"], output_names=["y"],
                      opset_version=13)
    np.savez(os.path.join(out, name + ".npz"), x=x.numpy())
print("exported to", out)
