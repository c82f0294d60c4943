"""A BERT-style encoder for the GPU benchmark (the CUDA-backend issue): token + learned position embeddings,
LayerNorm, N post-LN blocks x = LN(x + Attn(x)), x = LN(x + MLP(x)) with GELU (erf), and a classifier on the
first position ([CLS]) to 2 classes. Defaults are BERT-base: 12 layers, hidden 768, 12 heads, MLP 3072, seq 128,
vocabulary 30522. No dropout (so onnx-train and PyTorch train the same function).

Needs PyTorch and NumPy:
    python3 bench/gpu/encoder.py OUT_DIR [--layers 12 --hidden 768 --heads 12 --seq 128 --vocab 30522 --samples 2048]
        writes OUT_DIR/encoder.onnx (input x: int64[batch, seq]; output logits: float32[batch, 2]; opset 15, LayerNorm
        and GELU as their primitive ops) and OUT_DIR/encoder.npz (x: random token ids, y: int64 labels, seeded), so
        `onnx-train train OUT_DIR/encoder.onnx --data OUT_DIR/encoder.npz --loss cross_entropy --logits logits
        --labels y` trains it.
    python3 bench/gpu/encoder.py OUT_DIR --torch-bench [--batch 32 --steps 30 --device cuda]
        trains the same model (same seed, same weights) in PyTorch eager with Adam: fp32 (TF32 off) and
        torch.autocast(fp16) + GradScaler, and prints one JSON line per mode: samples/s (median step after warm-up)
        and peak device memory. The peer of `onnx-train train --amp` in bench/gpu/run.sh.
"""
import inspect
import json
import os
import statistics
import time

import numpy as np
import torch
from torch import nn

import bench_args


class Block(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.gelu = nn.GELU()

    def forward(self, h):
        b, t, d = h.shape
        hd = d // self.heads
        q, k, v = self.qkv(h).split(d, dim=-1)
        q = q.reshape(b, t, self.heads, hd).transpose(1, 2)
        k = k.reshape(b, t, self.heads, hd).transpose(1, 2)
        v = v.reshape(b, t, self.heads, hd).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / (hd ** 0.5), dim=-1)
        a = (att @ v).transpose(1, 2).reshape(b, t, d)
        h = self.ln1(h + self.proj(a))
        return self.ln2(h + self.fc2(self.gelu(self.fc1(h))))


class Encoder(nn.Module):
    def __init__(self, layers, d, heads, seq, vocab):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.randn(seq, d) * 0.02)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.blocks = nn.ModuleList([Block(d, heads, 4 * d) for _ in range(layers)])
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        h = self.ln(self.tok(x) + self.pos)
        for blk in self.blocks:
            h = blk(h)
        return self.head(h[:, 0])


def make(args):
    torch.manual_seed(0)
    return Encoder(args.layers, args.hidden, args.heads, args.seq, args.vocab)


def export(args):
    os.makedirs(args.out, exist_ok=True)
    model = make(args).eval()
    rng = np.random.default_rng(0)
    x = rng.integers(0, args.vocab, size=(args.samples, args.seq), dtype=np.int64)
    y = rng.integers(0, 2, size=(args.samples,), dtype=np.int64)
    np.savez(os.path.join(args.out, "encoder.npz"), x=x, y=y)
    path = os.path.join(args.out, "encoder.onnx")
    # The TorchScript exporter on every torch (2.x defaults to the dynamo one, which stores constants such as the
    # attention scale as initializers, and cannot write opset 15).
    extra = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, torch.from_numpy(x[:2]), path, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, opset_version=15,
                      do_constant_folding=False, **extra)
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"model": path, "params": params, "layers": args.layers, "hidden": args.hidden,
                      "seq": args.seq, "samples": args.samples}))


def torch_bench(args):
    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    data = np.load(os.path.join(args.out, "encoder.npz"))
    x = torch.from_numpy(data["x"][:args.batch]).to(dev)
    y = torch.from_numpy(data["y"][:args.batch]).to(dev)
    for mode in args.modes.split(","):
        model = make(args).to(dev).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        forward = model
        if mode.endswith("_compiled"):  # torch.compile'd: its first steps compile (minutes cold), the median skips them
            if not hasattr(torch, "compile"):
                print(json.dumps({"peer": "pytorch", "mode": mode, "error": "this torch has no torch.compile"}))
                continue
            forward = torch.compile(model)
        scaler = torch.cuda.amp.GradScaler(enabled=mode != "fp32" and dev.type == "cuda")
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        times = []
        for step in range(args.steps):
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=dev.type, dtype=torch.float16 if dev.type == "cuda" else torch.bfloat16,
                                enabled=mode != "fp32"):
                loss = nn.functional.cross_entropy(forward(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            times.append(time.perf_counter() - t0)
        ms = statistics.median(times[min(max(5, args.warmup), len(times) - 1):]) * 1e3
        peak = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else 0
        print(json.dumps({"peer": "pytorch", "mode": mode, "batch": args.batch, "step_ms": round(ms, 3),
                          "samples_per_s": round(args.batch / ms * 1e3, 1), "peak_bytes": peak,
                          "loss": float(loss)}))


def main():
    bench_args.main(export, torch_bench, layers=12, hidden=768, heads=12, seq=128, vocab=30522, samples=2048,
                    modes="fp32,amp_fp16", batch=32, steps=30)  # modes: fp32, amp_fp16, amp_fp16_compiled


if __name__ == "__main__":
    main()
