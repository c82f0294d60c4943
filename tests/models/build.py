"""Builds the corpus of exported models and PyTorch's reference trajectories.

    .venv-torch/bin/python tests/models/build.py OUT_DIR [NAME ...]

For each model of the zoo (tests/models/zoo_*.py; all, or the NAMEs given), OUT_DIR/NAME/ gets
  model17.onnx   torch.onnx.export at opset 17 (do_constant_folding=False, TrainingMode.TRAINING, dynamic batch)
  model14.onnx   the same at opset 14
  dropout.onnx   opset 17 with the model's default dropout (the same weights)
  data.npz       the training samples (inputs, labels)
  ref.json       the settings, PyTorch's per-step losses (SGD and AdamW at 1 thread, both again at 2 threads and in
                 float64 for how far PyTorch's own run moves with the reduction order and the rounding, AdamW
                 with dropout) and PyTorch's median step time
A model is rebuilt only when its ref.json is missing or older than the zoo's sources. Every random layer is off in
the reference runs (dropout, attention dropout, layerdrop, stochastic depth set to 0), so the trajectories are
deterministic.
"""
import copy
import glob
import json
import os
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from zoo import all_specs  # noqa: E402

warnings.filterwarnings("ignore")


def export(m, example, path, spec, opset):
    outputs = ["loss"] if spec.loss == "inside" else ["logits"]
    dyn = {}
    for name in spec.inputs:
        dyn[name] = {0: "batch"}
        if name in spec.seq_inputs:
            dyn[name][1] = "seq"
    if spec.loss != "inside":
        dyn["logits"] = {1: "batch"} if spec.loss == "ctc" else {0: "batch"}
    torch.onnx.export(m, example, path, input_names=spec.inputs, output_names=outputs, dynamic_axes=dyn,
                      opset_version=opset, do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)


def batch_tensors(spec, data, k):
    per_epoch = spec.samples // spec.batch
    j = k % per_epoch
    return {name: torch.from_numpy(a[j * spec.batch:(j + 1) * spec.batch]) for name, a in data.items()}


def train(spec, state, data, optimizer, threads, dropout=False, dtype=torch.float32, skip=()):
    """PyTorch's losses (before each update) and step times, from the exported weights; with dtype float64, the
    model and the float inputs in float64 (how far rounding alone moves the run). Steps (0-based) in `skip` update
    nothing, as a step that fp16 loss scaling skips changes no weight and no optimizer state."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m = spec.make(dropout)
    m.load_state_dict(state)
    m.train()
    m.to(dtype)
    if optimizer == "sgd":
        opt = torch.optim.SGD(m.parameters(), lr=spec.lr_sgd)
    else:
        opt = torch.optim.AdamW(m.parameters(), lr=spec.lr_adamw, weight_decay=0.01)
    losses, ms = [], []
    for k in range(spec.steps):
        b = {n: t.to(dtype) if t.is_floating_point() else t for n, t in batch_tensors(spec, data, k).items()}
        t0 = time.perf_counter()
        opt.zero_grad()
        out = m(*[b[n] for n in spec.inputs])
        if spec.loss == "inside":
            loss = out
        elif spec.loss == "ctc":
            loss = F.ctc_loss(out.log_softmax(2), b["labels"], b["logit_lengths"], b["label_lengths"])
        else:
            loss = F.cross_entropy(out, b["y"])
        loss.backward()
        if k not in skip:
            opt.step()
        ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss))
    return losses, float(np.median(ms[1:]))


def initial_state(spec):
    """The weights every run starts from (the same on every call: torch.manual_seed(0), then the model)."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    m = spec.make(False)
    m.train()
    return m, copy.deepcopy(m.state_dict())


def build(spec, out):
    d = os.path.join(out, spec.name)
    os.makedirs(d, exist_ok=True)
    m, state = initial_state(spec)
    data = spec.data(np.random.default_rng(0), spec.samples)
    np.savez(os.path.join(d, "data.npz"), **data)
    example = tuple(torch.from_numpy(data[n][:spec.batch]) for n in spec.inputs)
    for opset in (17, 14):
        m.load_state_dict(state)  # tracing in training mode moves BatchNorm's running statistics
        export(m, example, os.path.join(d, f"model{opset}.onnx"), spec, opset)
    torch.manual_seed(0)
    md = spec.make(True)
    md.load_state_dict(state)
    md.train()
    export(md, example, os.path.join(d, "dropout.onnx"), spec, 17)

    # Float tensors of the export that PyTorch does not train (buffers): onnx-train must not train them either.
    params = {n for n, _ in m.named_parameters()}
    frozen = sorted(n for n, t in state.items() if n not in params and t.is_floating_point()
                    and "running_" not in n)

    ref = {"name": spec.name, "library": spec.library, "params": sum(p.numel() for p in m.parameters()),
           "inputs": spec.inputs, "loss": spec.loss, "batch": spec.batch, "samples": spec.samples,
           "steps": spec.steps, "lr_sgd": spec.lr_sgd, "lr_adamw": spec.lr_adamw, "weight_decay": 0.01,
           "freeze": frozen, "note": spec.note, "max_skipped": spec.max_skipped,
           "torch": torch.__version__}
    for opt in ("sgd", "adamw"):
        ref[opt], ms1 = train(spec, state, data, opt, 1)
        ref[opt + "_2threads"], ms2 = train(spec, state, data, opt, 2)
        try:
            ref[opt + "_float64"], _ = train(spec, state, data, opt, 1, dtype=torch.float64)
        except (RuntimeError, TypeError):  # a model that builds float32 constants of its own (finfo(float32).min)
            ref[opt + "_float64"] = None
        if opt == "adamw":
            ref["torch_step_ms_1thread"], ref["torch_step_ms_2threads"] = ms1, ms2
    ref["adamw_dropout"], _ = train(spec, state, data, "adamw", 1, dropout=True)
    with open(os.path.join(d, "ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
    return ref


def main():
    out = sys.argv[1]
    names = sys.argv[2:]
    specs = all_specs()
    listed = [l.strip() for l in open(os.path.join(here, "MODELS")) if l.strip() and not l.startswith("#")]
    if sorted(listed) != sorted(s.name for s in specs):
        sys.exit("build.py: tests/models/MODELS and the zoo disagree: " +
                 ", ".join(sorted(set(listed) ^ {s.name for s in specs})))
    unknown = set(names) - {s.name for s in specs}
    if unknown:
        sys.exit(f"build.py: no model named {', '.join(sorted(unknown))}")
    newest = max(os.path.getmtime(p) for p in glob.glob(os.path.join(here, "*.py")))
    for spec in specs:
        if names and spec.name not in names:
            continue
        ref_path = os.path.join(out, spec.name, "ref.json")
        if os.path.exists(ref_path) and os.path.getmtime(ref_path) >= newest:
            continue
        t0 = time.perf_counter()
        ref = build(spec, out)
        drop = 1 - np.mean(ref["adamw"][-3:]) / ref["adamw"][0]
        print(f"{spec.name:24s} {ref['params']:8d} params  AdamW {ref['adamw'][0]:.4f} -> {ref['adamw'][-1]:.4f} "
              f"({100 * drop:.0f}% down)  SGD {ref['sgd'][0]:.4f} -> {ref['sgd'][-1]:.4f}  "
              f"{time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
