"""GPT-2 of the GPU benchmark: Hugging Face's GPT2LMHeadModel at the 124M configuration (12 layers, 768 wide, 12
heads, vocabulary 50257) with sequence length --seq (1024), weights drawn from a seed (nothing is downloaded), the
language-modelling loss computed inside the model (labels = the input ids, shifted by the model), dropout off.

  gpt2.py OUT [--layers ... --seq ...]               exports OUT/gpt2.onnx (TorchScript exporter, opset 14) and
                                                      OUT/gpt2.npz (random token ids "input_ids" and "labels")
  gpt2.py OUT --torch-bench [--modes eager,compiled]  PyTorch's step on the same data: AdamW, bf16 autocast,
                                                      eager and torch.compile'd; one JSON line per mode with
                                                      tokens/s from the median step after warm-up (compilation
                                                      excluded) and peak device memory.
Small sizes (--layers 1 --hidden 64 --heads 2 --seq 32 --vocab 128) run on the CPU for a check of the export.
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


def config(args):
    import transformers as tf
    kw = dict(vocab_size=args.vocab, n_positions=args.seq, n_embd=args.hidden, n_layer=args.layers, n_head=args.heads,
              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    return tf, tf.GPT2Config(**kw)


class LmLoss(nn.Module):
    """(input_ids, labels) -> the model's scalar loss, as one positional forward the exporter can trace."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, labels):
        return self.model(input_ids=input_ids, labels=labels, return_dict=False)[0]


def make(args):
    tf, cfg = config(args)
    torch.manual_seed(0)
    try:
        model = tf.GPT2LMHeadModel._from_config(cfg, attn_implementation="eager")
    except (TypeError, AttributeError):
        model = tf.GPT2LMHeadModel(cfg)
    return model


def data(args):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, args.vocab, size=(args.samples, args.seq), dtype=np.int64)
    return ids


def diff_symbolic(g, x, n, dim, prepend, append):
    """aten::diff (first order) as x[1:] - x[:-1] along dim, after concatenating prepend and append there:
    transformers 5's mask code calls torch.diff on the position ids (with prepend), which the TorchScript exporter
    has no symbolic for."""
    try:
        from torch.onnx import symbolic_helper as sh
    except ImportError:  # torch >= 2.9 keeps it with the TorchScript exporter
        from torch.onnx._internal.torchscript_exporter import symbolic_helper as sh
    if sh._get_const(n, "i", "n") != 1:
        raise RuntimeError("diff_symbolic: only first-order torch.diff")
    d = sh._get_const(dim, "i", "dim")
    parts = [t for t in (prepend, x, append) if t is not None and not sh._is_none(t)]
    if len(parts) > 1:
        x = g.op("Concat", *parts, axis_i=d)
    axis = g.op("Constant", value_t=torch.tensor([d], dtype=torch.int64))
    one = g.op("Constant", value_t=torch.tensor([1], dtype=torch.int64))
    zero = g.op("Constant", value_t=torch.tensor([0], dtype=torch.int64))
    end = g.op("Constant", value_t=torch.tensor([2**62], dtype=torch.int64))
    minus_one = g.op("Constant", value_t=torch.tensor([-1], dtype=torch.int64))
    return g.op("Sub", g.op("Slice", x, one, end, axis), g.op("Slice", x, zero, minus_one, axis))


def export(args):
    os.makedirs(args.out, exist_ok=True)
    torch.onnx.register_custom_op_symbolic("aten::diff", diff_symbolic, 14)
    ids = data(args)
    np.savez(os.path.join(args.out, "gpt2.npz"), input_ids=ids, labels=ids)
    model = LmLoss(make(args)).eval()
    path = os.path.join(args.out, "gpt2.onnx")
    sample = torch.from_numpy(ids[:2])
    extra = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, (sample, sample), path, input_names=["input_ids", "labels"], output_names=["loss"],
                      dynamic_axes={"input_ids": {0: "batch"}, "labels": {0: "batch"}}, opset_version=14,
                      do_constant_folding=False, **extra)
    print(json.dumps({"model": path, "params": sum(p.numel() for p in model.parameters()), "layers": args.layers,
                      "seq": args.seq, "samples": args.samples}))


def torch_bench(args):
    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    ids = torch.from_numpy(np.load(os.path.join(args.out, "gpt2.npz"))["input_ids"][:args.batch]).to(dev)
    for mode in args.modes.split(","):
        model = LmLoss(make(args)).to(dev).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        step_fn = model
        if mode == "compiled":
            if not hasattr(torch, "compile"):
                print(json.dumps({"peer": "pytorch", "mode": mode, "error": "this torch has no torch.compile"}))
                continue
            step_fn = torch.compile(model)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        times = []
        for _ in range(args.steps + args.warmup):
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                loss = step_fn(ids, ids)
            loss.backward()
            opt.step()
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            times.append(time.perf_counter() - t0)
        ms = statistics.median(times[args.warmup:]) * 1e3
        print(json.dumps({"peer": "pytorch", "mode": f"{mode}_bf16", "batch": args.batch, "seq": args.seq,
                          "step_ms": round(ms, 3), "tokens_per_s": round(args.batch * args.seq / ms * 1e3, 1),
                          "first_step_s": round(times[0], 2),
                          "peak_bytes": torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else 0,
                          "loss": float(loss)}), flush=True)


def main():
    bench_args.main(export, torch_bench, layers=12, hidden=768, heads=12, seq=1024, vocab=50257, samples=160,
                    modes="eager,compiled", batch=8, steps=20)


if __name__ == "__main__":
    main()
