"""The tiny LM example: a character-level transformer language model (2 pre-LN blocks) exported from PyTorch, its
data (token ids of a text this script generates deterministically), and PyTorch's loss trajectories for the
trajectory tests.

Needs PyTorch and NumPy (Debian: python3-torch; run with /usr/bin/python3):
    /usr/bin/python3 examples/tiny_lm/export.py
Writes:
  model.onnx    input x: int64[batch,32] (token ids), output logits: float32[batch,64,32] (batch, vocab, position:
                the class axis second, as ONNX's SoftmaxCrossEntropyLoss and torch's cross_entropy take it, so
                `--loss cross_entropy --logits logits --labels y` trains it with labels y: int64[batch,32]).
                Token embedding (Gather) + learned positional embedding [32,64]; 2 blocks of
                x + Attn(LN(x)), x + MLP(LN(x)) with 4 heads of 16, a causal mask added (0 on and below the
                diagonal, -1e9 above; ConstantOfShape -> Trilu, no initializer), MLP 64 -> 256 -> GELU (erf) -> 64; final LayerNorm;
                a linear head to 64 logits. No dropout. Opset 15 (LayerNorm and GELU exported as their
                primitive ops).
  data.npz      x, y: int64[1024,32]; y is x shifted by one character (the next token at every position);
                sequence i is characters 32i..32i+32 of the generated text
  trajectory_<opt>.json  PyTorch's per-step losses training this model from these weights on data.npz, batch 16,
                no shuffling (step k uses sequences 16k..16k+15), cross-entropy (mean over all positions),
                for `sgd` (lr 0.1) and `adam` (lr 0.001), 32 steps each, and the settings used
"""
import math
import os
import random
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from trajectory import write_trajectories  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
VOCAB, D, HEADS, T, LAYERS = 64, 64, 4, 32, 2


def text(n_chars):
    """Sentences from a small grammar, drawn by a seeded random.Random (the same text on every machine)."""
    rng = random.Random(1234)
    subj = ["the cat", "a dog", "my friend", "the old man", "our teacher", "a small bird", "the river", "she", "he",
            "the children", "every morning", "the wind"]
    verb = ["sees", "likes", "follows", "paints", "finds", "carries", "watches", "remembers", "builds", "hears"]
    obj = ["the moon", "a red ball", "the quiet garden", "seven apples", "the long road", "a bright star",
           "the blue house", "some bread", "the open window", "a paper boat"]
    tail = [".", ".", ".", "!", "?", ", and then it rains.", " at night.", " near the sea.", " again.",
            ", slowly."]
    out = []
    size = 0
    while size < n_chars:
        s = f"{rng.choice(subj)} {rng.choice(verb)} {rng.choice(obj)}{rng.choice(tail)}"
        s = s[0].upper() + s[1:] + ("\n" if rng.random() < 0.2 else " ")
        out.append(s)
        size += len(s)
    return "".join(out)[:n_chars]


# Token ids: '\n', ' ', then the printable characters that occur, in sorted order; the remaining ids up to 64
# never occur in the data (the model still has 64 classes).
N = 1024
corpus = text(N * T + 1)
chars = sorted(set(corpus))
assert len(chars) <= VOCAB, len(chars)
ids = np.array([chars.index(c) for c in corpus], dtype=np.int64)
x = ids[:N * T].reshape(N, T)
y = ids[1:N * T + 1].reshape(N, T)
np.savez_compressed(os.path.join(here, "data.npz"), x=x, y=y)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.gelu = nn.GELU()

    def forward(self, h):
        b = h.shape[0]
        q, k, v = self.qkv(self.ln1(h)).split(D, dim=-1)
        q, k, v = (t.reshape(b, T, HEADS, D // HEADS).transpose(1, 2) for t in (q, k, v))  # [b, heads, T, hd]
        # The mask is made here, not kept as a buffer: a buffer would be a float initializer, which a trainer
        # of the ONNX model takes for a parameter. Exported as ConstantOfShape -> Trilu (constant operands).
        mask = torch.triu(torch.full((T, T), -1e9), diagonal=1)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // HEADS) + mask, dim=-1)
        a = (att @ v).transpose(1, 2).reshape(b, T, D)
        h = h + self.proj(a)
        return h + self.fc2(self.gelu(self.fc1(self.ln2(h))))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(T, D) * 0.02)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, x):
        h = self.tok(x) + self.pos
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.ln(h)).transpose(1, 2)  # [batch, vocab, T]


def make():
    torch.manual_seed(0)
    return TinyLM()


batch, steps = 16, 32
# TrainingMode.TRAINING: in eval mode the exporter merges initializers of equal value (every LayerNorm's
# weight starts as ones), so five LayerNorms would share one trained weight. No op here differs between modes.
model = make().train()
torch.onnx.export(model, torch.from_numpy(x[:batch]), os.path.join(here, "model.onnx"), input_names=["x"],
                  output_names=["logits"], dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                  opset_version=15, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)

settings = {"sgd": dict(lr=0.1), "adam": dict(lr=0.001)}
write_trajectories(here, make, x, y, batch, steps, settings)
print(f"exported model.onnx, data.npz ({len(chars)} distinct characters), trajectories")
