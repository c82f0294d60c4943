"""The reference loss trajectories of the example models, shared by their export scripts: PyTorch trains
`make()` (the exported model's initial weights) with torch.optim on (x, y) in file order -- step k takes samples
B*(k mod n) .. B*(k mod n)+B-1 with n = len(x) // B, the remainder dropped, as `onnx-train train --no-shuffle`
does -- with cross-entropy on the logits, and writes trajectory_<optimizer>.json: the settings and the loss of
each step (before its update).
"""
import json
import os

import torch
from torch import nn


def write_trajectories(here, make, x, y, batch, steps, settings, extra=None, train_mode=False):
    """settings: {"sgd": {"lr": ...}, "adam": {...}}; extra: more keys for the JSON (e.g. the data source)."""
    per_epoch = len(x) // batch
    for name, kw in settings.items():
        m = make()
        if train_mode:
            m.train()
        opt = torch.optim.SGD(m.parameters(), **kw) if name == "sgd" else torch.optim.Adam(m.parameters(), **kw)
        losses = []
        for k in range(steps):
            j = k % per_epoch
            xb = torch.from_numpy(x[j * batch:(j + 1) * batch])
            yb = torch.from_numpy(y[j * batch:(j + 1) * batch])
            opt.zero_grad()
            loss = nn.functional.cross_entropy(m(xb), yb)
            loss.backward()
            opt.step()
            losses.append(float(loss))
        with open(os.path.join(here, f"trajectory_{name}.json"), "w") as f:
            json.dump({"optimizer": name, **kw, "batch": batch, "steps": steps, "loss": "cross_entropy",
                       "logits": "logits", "labels": "y", "shuffle": False, **(extra or {}), "losses": losses},
                      f, indent=1)
