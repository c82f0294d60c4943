"""The corpus's shared pieces: a model's Spec and the synthetic data generators.

A Spec says how to build one model (random initialization from torch.manual_seed, every random layer off unless
dropout=True), which arrays it reads, how its loss is taken, and the training run its PyTorch trajectory and the
onnx-train runs share: `steps` optimizer steps over `samples` samples in file order (batch `batch`, no shuffling),
SGD (lr_sgd) and AdamW (lr_adamw, weight decay 0.01, PyTorch's betas and eps).

The data is learnable (labels are a function of the inputs), so a run that does not learn shows as a loss that
does not fall.
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import numpy as np
import torch
from torch import nn


@dataclass
class Spec:
    name: str
    library: str  # transformers, torchvision, timm, torch
    # make(dropout) -> nn.Module whose forward takes the arrays named in `inputs` (in order) as tensors and returns
    # the scalar loss (loss == "inside") or the logits (loss == "cross_entropy"; loss == "ctc": time-major logits
    # [frames, batch, classes] for F.ctc_loss, the data holding labels, label_lengths and logit_lengths).
    make: Callable[[bool], nn.Module]
    # data(rng, n) -> {name: array}: the model's inputs and, for cross_entropy, the int64 labels "y".
    data: Callable[[np.random.Generator, int], Dict[str, np.ndarray]]
    inputs: List[str]
    loss: str = "inside"          # "inside" (the model's output "loss"), "cross_entropy" or "ctc" (on output "logits")
    batch: int = 8
    samples: int = 32             # samples / batch steps per epoch; the run cycles through them
    steps: int = 15
    lr_sgd: float = 0.1
    lr_adamw: float = 3e-3
    # Inputs whose axis 1 is dynamic too (sequence length), besides the batch axis of every input.
    seq_inputs: List[str] = field(default_factory=list)
    note: str = ""                # why a bound or setting differs (shown in the README table)
    # Steps skipped by fp16 dynamic loss scaling that are expected (at most 3 are allowed by the check).
    max_skipped: int = 3


def count_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


# ---- data --------------------------------------------------------------------------------------------------


def tokens_classified(vocab: int, seq: int, classes: int, pad: bool = False, first: int = 0):
    """input_ids (and attention_mask) with label = first token mod classes; with pad, each sample's tail after a
    random length is padding (id 0, mask 0); with first, the first token is one of ids 1..first (each then recurs
    across the batches, so what one batch teaches helps the next instead of only being memorized)."""

    def gen(rng, n):
        ids = rng.integers(1, vocab, size=(n, seq), dtype=np.int64)
        if first:
            ids[:, 0] = rng.integers(1, first + 1, size=n)
        mask = np.ones((n, seq), np.int64)
        if pad:
            lens = rng.integers(seq // 2, seq + 1, size=n)
            for i, l in enumerate(lens):
                ids[i, l:] = 0
                mask[i, l:] = 0
        out = {"input_ids": ids, "attention_mask": mask, "labels": ids[:, 0] % classes}
        return out

    return gen


def tokens_tagged(vocab: int, seq: int, classes: int):
    """Token classification: each token's label is its id mod classes."""

    def gen(rng, n):
        ids = rng.integers(1, vocab, size=(n, seq), dtype=np.int64)
        return {"input_ids": ids, "attention_mask": np.ones((n, seq), np.int64), "labels": ids % classes}

    return gen


def counting_tokens(vocab: int, seq: int, stride_choices=(1,), low: int = 0):
    """Language modelling: each sequence counts up from a random start by a stride (over ids low..vocab-1,
    wrapping), so the next token is predictable from the previous two; labels are the inputs (the model shifts
    them). `low` keeps special ids (a padding id) out of the data."""

    def gen(rng, n):
        span = vocab - low
        start = rng.integers(0, span, size=(n, 1))
        stride = rng.choice(np.array(stride_choices), size=(n, 1))
        ids = (low + (start + stride * np.arange(seq)[None, :]) % span).astype(np.int64)
        return {"input_ids": ids, "labels": ids.copy()}

    return gen


def copy_tokens(vocab: int, seq: int, low: int = 2):
    """Sequence to sequence: the target is the source (ids from `low`, below it the special tokens)."""

    def gen(rng, n):
        ids = rng.integers(low, vocab, size=(n, seq), dtype=np.int64)
        return {"input_ids": ids, "attention_mask": np.ones((n, seq), np.int64), "labels": ids.copy()}

    return gen


def images_classified(channels: int, size: int, classes: int, names=("x", "y"), noise: float = 1.0):
    """Images: noise plus one of `classes` fixed random templates (the label), so the class is linearly visible;
    `names`: the image's and the label's array names."""

    def gen(rng, n):
        templates = np.random.default_rng(1234).standard_normal((classes, channels, size, size)).astype(np.float32)
        y = rng.integers(0, classes, size=n).astype(np.int64)
        x = noise * rng.standard_normal((n, channels, size, size)).astype(np.float32) + templates[y]
        return {names[0]: x.astype(np.float32), names[1]: y}

    return gen


def audio_classified(length: int, classes: int):
    """Raw audio: a sine of one of `classes` frequencies (the label) with random phase and noise."""

    def gen(rng, n):
        y = rng.integers(0, classes, size=n).astype(np.int64)
        t = np.arange(length, dtype=np.float32)[None, :]
        freq = (0.02 + 0.03 * y).astype(np.float32)[:, None]
        phase = rng.uniform(0, 2 * np.pi, size=(n, 1)).astype(np.float32)
        x = np.sin(2 * np.pi * freq * t + phase) + 0.1 * rng.standard_normal((n, length)).astype(np.float32)
        return {"input_values": x.astype(np.float32), "labels": y}

    return gen


class Positional(nn.Module):
    """Calls `m` with the exported inputs as keyword arguments and returns `.loss` or `.logits`."""

    def __init__(self, m: nn.Module, names: List[str], out: str):
        super().__init__()
        self.m, self.names, self.out = m, names, out

    def forward(self, *args):
        r = self.m(**dict(zip(self.names, args)))
        return getattr(r, self.out) if not isinstance(r, torch.Tensor) else r
