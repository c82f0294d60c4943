"""The pos_lm example: a GPT-style language model as people write it -- a learned positional table sliced by the
input's length, `pos[: x.shape[1]]`, and a causal mask built for that length -- exported by torch.onnx.export with
its batch and sequence axes dynamic, and PyTorch's losses for a run whose batches change size.

Needs PyTorch and NumPy (Debian: python3-torch; run with /usr/bin/python3 or the corpus venv):
    /usr/bin/python3 examples/pos_lm/export.py
Writes:
  model.onnx    inputs x, y: int64[batch, seq] (tokens and next tokens), output loss: float32 scalar (the mean
                cross-entropy inside). Token embedding + pos[:seq] (a [32, 48] table), 2 pre-LN encoder blocks with a
                causal mask, a linear head. No dropout. Opset 17, do_constant_folding=False, training mode.
  data.npz      x, y: int64[64, 16]: each sequence counts up (mod 40) from a random start by a stride of 1 or 3,
                y is x shifted by one
  trajectory_variable_batch.json  PyTorch's per-step losses (AdamW, lr 3e-3, weight decay 0.01) on a run whose
                steps take (16 sequences of 16 tokens), (5 of 12), (16 of 16), ... : the "batches" list gives each
                step's first sample, count and length (samples in file order, the first `length` tokens)
"""
import json
import os

import numpy as np
import torch
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
VOCAB, D, MAX_LEN, SEQ = 40, 48, 32, 16


class PosLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(0.02 * torch.randn(MAX_LEN, D))
        layer = nn.TransformerEncoderLayer(D, 4, 2 * D, dropout=0.0, batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, x, y):
        t = x.shape[1]
        h = self.emb(x) + self.pos[:t]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        logits = self.head(self.enc(h, mask=mask))
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    m = PosLM()
    m.train()
    rng = np.random.default_rng(0)
    n = 64
    start = rng.integers(0, VOCAB, size=(n, 1))
    stride = rng.choice(np.array([1, 3]), size=(n, 1))
    seq = (start + stride * np.arange(SEQ + 1)[None, :]) % VOCAB
    x, y = seq[:, :-1].astype(np.int64), seq[:, 1:].astype(np.int64)
    np.savez(os.path.join(here, "data.npz"), x=x, y=y)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    torch.onnx.export(m, (torch.from_numpy(x[:4]), torch.from_numpy(y[:4])), os.path.join(here, "model.onnx"),
                      input_names=["x", "y"], output_names=["loss"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}, opset_version=17,
                      do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
    m.load_state_dict(state)
    # (first sample, count, length) per step: the batch size and the sequence length change between steps.
    batches = [(0, 16, 16), (16, 5, 12), (21, 16, 16), (37, 5, 12), (42, 16, 16), (0, 16, 16)]
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.01)
    losses = []
    for first, count, length in batches:
        opt.zero_grad()
        loss = m(torch.from_numpy(x[first:first + count, :length]), torch.from_numpy(y[first:first + count, :length]))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    with open(os.path.join(here, "trajectory_variable_batch.json"), "w") as f:
        json.dump({"optimizer": "adamw", "lr": 3e-3, "weight_decay": 0.01, "batches": batches, "losses": losses}, f,
                  indent=1)
    print("losses", losses)


if __name__ == "__main__":
    main()
