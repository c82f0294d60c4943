"""The training benchmark's models, shared by the exporter (here) and the PyTorch peer (torch_train_peer.py):
  mlp  784 -> 1024 -> 1024 -> 10 with ReLU, batch 256               (GEMM-bound)
  cnn  3x(Conv3x3-BatchNorm-ReLU) + MaxPool + Linear, 3x64x64, batch 32 (convolution-bound)
Exported in training mode (BatchNorm with batch statistics), with data: <name>_train.npz holding x and labels y
(8 batches, random). Needs PyTorch (Debian: python3-torch; run with /usr/bin/python3).
Usage: train_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import torch
from torch import nn

BATCH = {"mlp": 256, "cnn": 32}
SHAPE = {"mlp": (784,), "cnn": (3, 64, 64)}


def build(name):
    torch.manual_seed(0)
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))

    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.Sequential(*block(3, 32), nn.MaxPool2d(2), *block(32, 64), nn.MaxPool2d(2), *block(64, 64),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def main(out):
    os.makedirs(out, exist_ok=True)
    for name in ("mlp", "cnn"):
        model = build(name).train()
        b = BATCH[name]
        rng = np.random.default_rng(0)
        x = rng.standard_normal((8 * b,) + SHAPE[name]).astype(np.float32)
        y = rng.integers(0, 10, 8 * b).astype(np.int64)
        torch.onnx.export(model, torch.from_numpy(x[:b]), os.path.join(out, name + "_train.onnx"),
                          input_names=["x"], output_names=["logits"], opset_version=15,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
        np.savez(os.path.join(out, name + "_train.npz"), x=x, y=y)
    print("exported to", out)


if __name__ == "__main__":
    main(sys.argv[1])
