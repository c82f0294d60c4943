"""The speech CTC example's models: a small speech recognizer for spoken digit strings (make_data.py's log-mel
features in, per-frame character logits out, trained with a CTC loss), exported from PyTorch, and PyTorch's loss
trajectories for the trajectory tests.

Needs PyTorch and NumPy (Debian: python3-torch; run with /usr/bin/python3) and espeak-ng (for trajectory.npz):
    /usr/bin/python3 examples/speech_ctc/export.py
Writes:
  model.onnx      input x: float32[batch,40,frames] (make_data.py's features), output logits:
                  float32[frames',batch,17] (time-major, unnormalized: the CTC loss applies log-softmax;
                  frames' = make_data.subsampled_length(frames)). Conv1d(40->96, kernel 5, stride 2, padding 2)-ReLU -
                  Conv1d(96->96, kernel 3, padding 1)-ReLU - to time-major - 2-layer bidirectional LSTM (hidden 64
                  each way, ONNX LSTM nodes) - Linear(128->17). Opset 14, dynamic batch and frames,
                  do_constant_folding=False (the LSTM weights stay PyTorch's parameters; the gate reordering and
                  concatenation are nodes of the graph). No dropout or normalization: train and eval modes agree.
  model_gru.onnx  the same with a unidirectional 2-layer GRU (hidden 128, ONNX GRU nodes; the streaming form)
                  and Linear(128->17)
  trajectory.npz  the trajectories' data: 160 utterances from make_data.py (train voices, seed 1), the same arrays
                  as train.npz (x, labels, label_lengths, logit_lengths) with T and S from its own utterances,
                  features rounded to multiples of 1/64 so that the committed file compresses
  trajectory_adam.json, trajectory_gru_adam.json   PyTorch's per-step losses training model.onnx's (model_gru.onnx's)
                  initial weights with Adam (lr 0.002), batch 16, no shuffling (step k uses utterances
                  16(k mod 10)..16(k mod 10)+15, as `onnx-train train --no-shuffle`), 30 steps, each step's loss
                  before its update: F.ctc_loss(logits.log_softmax(2), labels, logit_lengths, label_lengths,
                  blank=0, reduction="mean", zero_infinity=False) in float32 (mean over the batch of each
                  utterance's loss divided by its label length); and the settings
train_torch.py imports make() from here.
"""
import json
import os
import sys

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import make_data  # noqa: E402

CHANNELS = 96
HIDDEN = {"lstm": 64, "gru": 128}


class SpeechModel(nn.Module):
    def __init__(self, cell="lstm", n_mels=make_data.N_MELS, classes=len(make_data.VOCAB)):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(n_mels, CHANNELS, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv1d(CHANNELS, CHANNELS, 3, stride=1, padding=1), nn.ReLU())
        h = HIDDEN[cell]
        if cell == "lstm":
            self.rnn = nn.LSTM(CHANNELS, h, num_layers=2, bidirectional=True)
            self.out = nn.Linear(2 * h, classes)
        else:
            self.rnn = nn.GRU(CHANNELS, h, num_layers=2)
            self.out = nn.Linear(h, classes)

    def forward(self, x):  # x: [batch, n_mels, frames]
        h = self.conv(x).permute(2, 0, 1)  # [frames', batch, channels]
        h, _ = self.rnn(h)
        return self.out(h)  # [frames', batch, classes]


def make(cell="lstm"):
    torch.manual_seed(0)
    return SpeechModel(cell)


def ctc(logits, labels, logit_lengths, label_lengths):
    return F.ctc_loss(logits.log_softmax(2), labels, logit_lengths, label_lengths, blank=0, reduction="mean",
                      zero_infinity=False)


BATCH, STEPS, LR, TRAJ_N = 16, 30, 0.002, 160
NAMES = {"lstm": ("model.onnx", "trajectory_adam.json"), "gru": ("model_gru.onnx", "trajectory_gru_adam.json")}


def trajectory(cell, data):
    m = make(cell).train()
    opt = torch.optim.Adam(m.parameters(), lr=LR)
    t = {k: torch.from_numpy(v) for k, v in data.items()}
    per_epoch = len(data["x"]) // BATCH
    losses = []
    for k in range(STEPS):
        s = slice(BATCH * (k % per_epoch), BATCH * (k % per_epoch) + BATCH)
        opt.zero_grad()
        loss = ctc(m(t["x"][s]), t["labels"][s], t["logit_lengths"][s], t["label_lengths"][s])
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def main():
    torch.set_num_threads(1)
    for T in range(1, 400):  # make_data's logit_lengths follow the front end's arithmetic
        assert make_data.subsampled_length(T) == SpeechModel().conv(torch.zeros(1, make_data.N_MELS, T)).shape[2]

    path = os.path.join(here, "trajectory.npz")
    data = make_data.generate({"train": TRAJ_N}, seed=1)["train"]
    data["x"] = np.round(data["x"] * 64) / 64
    make_data.save(path, data, compressed=True)
    print(f"trajectory.npz: x {data['x'].shape}, {os.path.getsize(path) / 1e6:.2f} MB")

    x = torch.from_numpy(data["x"][:BATCH])
    for cell, (model_name, traj_name) in NAMES.items():
        model = make(cell).train()
        onnx_path = os.path.join(here, model_name)
        torch.onnx.export(model, x, onnx_path, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "batch", 2: "frames"}, "logits": {0: "frames_out", 1: "batch"}},
                          opset_version=14, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        losses = trajectory(cell, data)
        settings = {"optimizer": "adam", "lr": LR, "batch": BATCH, "steps": STEPS, "loss": "ctc", "blank": 0,
                    "reduction": "mean", "logits": "logits", "labels": "labels", "logit_lengths": "logit_lengths",
                    "label_lengths": "label_lengths", "shuffle": False, "data": "trajectory.npz", "cell": cell}
        with open(os.path.join(here, traj_name), "w") as f:
            json.dump({**settings, "losses": losses}, f, indent=1)
        n = sum(p.numel() for p in model.parameters())
        print(f"{model_name}: {n} parameters, {os.path.getsize(onnx_path) / 1e6:.2f} MB; {traj_name}: "
              f"loss {losses[0]:.3f} -> {losses[-1]:.3f} ({100 * (1 - losses[-1] / losses[0]):.0f}% lower)")


if __name__ == "__main__":
    main()
