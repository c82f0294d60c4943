"""The corpus's families at their full-size configurations: onnx-train's training step against PyTorch's and ONNX
Runtime Training's.

    .venv-torch/bin/python bench/models.py ONNX_TRAIN OUT_DIR [--pairs P] [--steps S] [--threads T] [--no-ort]
        [--ort-python PY] [NAME ...]

Each model is built at its published size (BERT-base, GPT-2 124M, ResNet-18 at 224x224, ...) with random weights,
exported once (opset 17, dynamic batch) into OUT_DIR, and trained on random learnable data with Adam (lr 1e-4) for
S steps by both sides, in P interleaved pairs (onnx-train, then PyTorch, then onnx-train...), in fp32 and in bf16
(onnx-train --amp=bf16; PyTorch's CPU autocast to bfloat16), at T threads on both sides (torch.set_num_threads,
onnx-train --threads). A side's time is the median step time over its pairs, each pair's steps after the first
two (the plan, the caches). Prints one line per model and precision and a Markdown table at the end.

ONNX Runtime Training (onnxruntime-training-cpu 1.19.2, its on-device training API; bench/ort_train_peer.py run by
PY, default .venv-ort/bin/python, made by scripts/ort-training-venv) is a third peer in fp32: each pair becomes a
triple (onnx-train, PyTorch, ORT), on a second export of the same model at opset 14 (OUT_DIR/NAME/model14.onnx:
PyTorch writes LayerNorm there as primitive ops, whose gradients ORT has; the peer fixes the batch axis to the
batch, as onnx-train plans for it: ORT dies of SIGFPE in AveragePool's gradient with a symbolic batch). Its
artifacts (training graph with CrossEntropyLoss on the logits or the model's loss, Adam as torch's, checkpoint) are
built once per model, outside the timing. Where ORT cannot build the gradient its column says why. --no-ort (or no
PY) leaves it out.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "tests", "models"))
from models_full import FULL  # noqa: E402

warnings.filterwarnings("ignore")


def export(spec, path, data, opset=17):
    torch.manual_seed(0)
    m = spec.make(False)
    m.train()
    example = tuple(torch.from_numpy(data[n][:2]) for n in spec.inputs)
    dyn = {n: {0: "batch"} for n in spec.inputs}
    outputs = ["loss"] if spec.loss == "inside" else ["logits"]
    if spec.loss != "inside":
        dyn["logits"] = {0: "batch"}
    torch.onnx.export(m, example, path, input_names=spec.inputs, output_names=outputs, dynamic_axes=dyn,
                      opset_version=opset, do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
    return m


def onnx_train_ms(tool, spec, d, steps, threads, bf16):
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log.jsonl")
        args = [tool, "train", os.path.join(d, "model.onnx"), "--data", os.path.join(d, "data.npz"), "--batch",
                str(spec.batch), "--steps", str(steps), "--no-shuffle", "--threads", str(threads), "--optimizer", "adam",
                "--lr", "1e-4", "--log-json", log, "--quiet"]
        args += ["--loss-output", "loss"] if spec.loss == "inside" else ["--loss", "cross_entropy", "--logits",
                                                                          "logits", "--labels", "y"]
        if bf16:
            args.append("--amp=bf16")
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "exit %d" % p.returncode)
        ms = [json.loads(line)["step_ms"] for line in open(log) if line.strip()]
        return ms[2:]


def ort_ms(py, spec, model, d, steps, threads, artifacts):
    """ONNX Runtime Training's step times after the first two (bench/ort_train_peer.py), or a RuntimeError whose
    text goes into the table."""
    args = [py, os.path.join(here, "ort_train_peer.py"), model, os.path.join(d, "data.npz"), "--batch",
            str(spec.batch), "--steps", str(steps), "--threads", str(threads), "--lr", "1e-4", "--artifacts", artifacts,
            "--static-batch"]
    args += ["--loss-output", "loss"] if spec.loss == "inside" else ["--logits", "logits", "--labels", "y"]
    p = subprocess.run(args, capture_output=True, text=True)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode != 0 or not lines:
        err = [line for line in p.stderr.strip().splitlines() if line.strip()]
        raise RuntimeError("exit %d: %s" % (p.returncode, err[-1] if err else "no output"))
    out = json.loads(lines[-1])
    if "error" in out:
        raise RuntimeError(out["error"])
    return out["step_ms"][2:]


def torch_ms(spec, m0, data, steps, threads, bf16):
    torch.set_num_threads(threads)
    m = m0
    m.train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    ms = []
    for k in range(steps):
        b = {n: torch.from_numpy(a[:spec.batch]) for n, a in data.items()}
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = m(*[b[n] for n in spec.inputs])
            loss = out if spec.loss == "inside" else F.cross_entropy(out, b["y"])
        loss.backward()
        opt.step()
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms[2:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("out")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--no-ort", action="store_true", help="leave out ONNX Runtime Training")
    ap.add_argument("--ort-python", default=os.path.join(here, "..", ".venv-ort", "bin", "python"),
                    help="the python of scripts/ort-training-venv")
    a = ap.parse_intermixed_args()
    ort = not a.no_ort
    if ort and not os.path.exists(a.ort_python):
        print(f"no ONNX Runtime Training: {a.ort_python} is missing (scripts/ort-training-venv makes it)", flush=True)
        ort = False
    rows = []
    for spec in FULL:
        if a.names and spec.name not in a.names:
            continue
        d = os.path.join(a.out, spec.name)
        os.makedirs(d, exist_ok=True)
        data = spec.data(np.random.default_rng(0), spec.batch)
        np.savez(os.path.join(d, "data.npz"), **data)
        m = export(spec, os.path.join(d, "model.onnx"), data)
        params = sum(p.numel() for p in m.parameters())
        ort_err = ""
        if ort:
            try:
                export(spec, os.path.join(d, "model14.onnx"), data, opset=14)
            except Exception as e:  # noqa: BLE001 -- the exporter raises many kinds
                ort_err = "opset-14 export failed: " + (str(e).strip().splitlines() or [type(e).__name__])[0]
        with tempfile.TemporaryDirectory(prefix="ort-artifacts-") as artifacts:
            for prec in a.precisions.split(","):
                with_ort = ort and prec == "fp32"
                ours, theirs, orts, err, oerr = [], [], [], "", ort_err if with_ort else ""
                for _ in range(a.pairs):
                    try:
                        ours += onnx_train_ms(a.tool, spec, d, a.steps, a.threads, prec == "bf16")
                    except RuntimeError as e:
                        err = "onnx-train: " + str(e)
                        break
                    torch.manual_seed(0)
                    try:
                        theirs += torch_ms(spec, spec.make(False), data, a.steps, a.threads, prec == "bf16")
                    except RuntimeError as e:  # torch 1.13's CPU autocast refuses some models in bf16
                        err = "PyTorch: " + str(e).splitlines()[0]
                        break
                    if with_ort and not oerr:
                        try:
                            orts += ort_ms(a.ort_python, spec, os.path.join(d, "model14.onnx"), d, a.steps, a.threads,
                                           artifacts)
                        except RuntimeError as e:
                            oerr = str(e)
                if err:
                    print(f"{spec.name:18s} {prec}: failed: {err}", flush=True)
                    rows.append((spec.name, params, prec, None, None, err, None, ""))
                    continue
                o, t = float(np.median(ours)), float(np.median(theirs))
                r = float(np.median(orts)) if with_ort and not oerr else None
                line = (f"{spec.name:18s} {prec}: onnx-train {o:9.1f} ms  PyTorch {t:9.1f} ms  "
                        f"PyTorch/onnx-train {t / o:.2f}")
                if r is not None:
                    line += f"  ORT {r:9.1f} ms  ORT/onnx-train {r / o:.2f}"
                elif oerr:
                    line += f"  ORT: {oerr}"
                print(line, flush=True)
                rows.append((spec.name, params, prec, o, t, "", r, oerr))
    batch = {s.name: s.batch for s in FULL}
    if not ort:
        print("\n| model | parameters | batch | precision | onnx-train ms | PyTorch ms | PyTorch / onnx-train |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for name, params, prec, o, t, err, _, _ in rows:
            if o is None:
                print(f"| {name} | {params / 1e6:.1f}M | {batch[name]} | {prec} | {err[:90]} | | |")
            else:
                print(f"| {name} | {params / 1e6:.1f}M | {batch[name]} | {prec} | {o:.0f} | {t:.0f} | {t / o:.2f} |")
        return
    print("\n| model | parameters | batch | precision | onnx-train ms | PyTorch ms | PyTorch / onnx-train "
          "| ORT Training ms | ORT Training / onnx-train |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, params, prec, o, t, err, r, oerr in rows:
        if o is None:
            print(f"| {name} | {params / 1e6:.1f}M | {batch[name]} | {prec} | {err[:90]} | | | | |")
            continue
        ort_cells = f"{r:.0f} | {r / o:.2f}" if r is not None else (f"{oerr[:120]} |" if oerr else "- | -")
        print(f"| {name} | {params / 1e6:.1f}M | {batch[name]} | {prec} | {o:.0f} | {t:.0f} | {t / o:.2f} "
              f"| {ort_cells} |")


if __name__ == "__main__":
    main()
