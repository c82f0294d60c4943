"""ONNX Runtime Training (CPU, on-device training API) as a peer of bench/models.py: times its training step on an
exported forward model. Run by the venv of scripts/ort-training-venv (onnxruntime-training-cpu 1.19.2).

    .venv-ort/bin/python bench/ort_train_peer.py MODEL DATA.npz --batch B --steps S --threads T
        [--logits NAME --labels NAME | --loss-output NAME] [--lr 1e-4] [--artifacts DIR] [--static-batch]

The model's output is either the logits (--logits: a CrossEntropyLoss over the classes, the last axis, against the
int64 array --labels of DATA, default "y", fed as the training model's input "labels") or the loss itself
(--loss-output, default when neither is given: the model's only output). The training artifacts (training model,
checkpoint, optimizer model) are built by onnxruntime.training.artifacts.generate_artifacts into DIR (a fresh
temporary directory without --artifacts; with it, kept and reused while the model file is the same). Then S steps on
the first B samples: one step is module(*inputs) (forward and backward) + optimizer.step() + module.lazy_reset_grad(),
with intra-op threads T, inter-op 1.

What is trained: every float initializer, except BatchNormalization's running mean and variance (inputs 3 and 4:
buffers, not parameters, and ORT cannot build their gradient); every other initializer is frozen. The optimizer
is ORT's AdamWOptimizer set to torch.optim.Adam's update: adam_mode 0 (PyTorch's AdamW: bias correction on each
moment, eps added to sqrt(v / (1 - beta2^t))), weight decay 0, betas (0.9, 0.999), eps 1e-8, lr --lr.

A LayerNormalization node (opset 17; PyTorch's opset-14 exports have none) gets its optional Mean and InvStdDev
outputs, which ORT's LayerNormalizationGrad reads: without them generate_artifacts stops in GradientBuilderBase::O
("i < node_->OutputDefs().size()"). The forward values are the same. (A SoftmaxCrossEntropyLoss with one output, the
loss inside the Hugging Face models, needs nothing: ORT 1.19.2 builds its gradient as it is.)
With --static-batch, the inputs' and outputs' dynamic axis 0 is fixed to B (the batch every peer plans for): ORT
1.19.2's first step dies of SIGFPE on an AveragePool (densenet121's transitions; one Conv + AvgPool2d(2) is enough)
while the batch axis is symbolic, and static shapes make its steps a few percent faster besides.

Prints one JSON line on stdout: {"step_ms": [every step, the first ones included], "loss": [...], "trainable": n,
"frozen": [...], "rewrites": {...}}; the caller leaves out the first two steps (the plan, the caches). When ORT cannot
build the training graph (generate_artifacts or the first step raises), the line is {"error": "cannot build the
gradient: REASON"} and the exit status 0. The work runs in a child process (this script with --worker) that names
each stage on stdout as it enters it, so that a crash of ORT itself (the SIGFPE above) is reported the same way, with
its signal and stage, instead of as a dead process.
"""
import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx


def reason(e):
    """The first line of an exception, without the C++ source directory and function signature ORT puts in it."""
    s = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    m = re.search(r"The gradient builder has not been registered: (\S+) for node (\S+)", s)
    if m:
        return f"ORT has no gradient for {m.group(1)} (node {m.group(2)})"
    s = re.sub(r"/onnxruntime_src/(\S+/)?", "", s)
    s = re.sub(r"(\S*onnxruntime::[\w:<>~,*& ]+ )?\S*onnxruntime::[\w:<>~]+\(.*?\)( const)? ", "", s)
    return s[:300]


@contextlib.contextmanager
def quiet_stderr(path):
    """fd 2 into PATH (ORT's gradient builder logs every graph transformer at info level there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def complete_outputs(model):
    """Adds the optional outputs that ORT's gradient builders read (Mean and InvStdDev of LayerNormalization). Returns
    how many nodes of each kind got them."""
    want = {"LayerNormalization": 3}
    done = dict.fromkeys(want, 0)
    for k, n in enumerate(model.graph.node):
        if n.op_type in want and n.domain in ("", "ai.onnx") and len(n.output) < want[n.op_type]:
            while len(n.output) < want[n.op_type]:
                n.output.append(f"ort_peer_{n.op_type}_{k}_out{len(n.output)}")
            done[n.op_type] += 1
    return {k: v for k, v in done.items() if v}


def build(model_path, out, logits, loss_output, static_batch=0):
    """generate_artifacts into OUT; returns (trainable count, frozen names, rewrites)."""
    from onnxruntime.training import artifacts, onnxblock

    model = onnx.load(model_path)
    rewrites = complete_outputs(model)
    if static_batch:  # axis 0 of every input and output fixed to the batch
        for v in list(model.graph.input) + list(model.graph.output):
            dims = v.type.tensor_type.shape.dim
            if dims and dims[0].dim_param:
                dims[0].dim_value = static_batch
    bn_stats = {n.input[k] for n in model.graph.node if n.op_type == "BatchNormalization" for k in (3, 4)
                if len(n.input) > k}
    trainable = [i.name for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT
                 and i.name not in bn_stats]
    frozen = [i.name for i in model.graph.initializer if i.name not in set(trainable)]
    if not trainable:
        raise RuntimeError("no float initializer to train")
    outputs = [o.name for o in model.graph.output]
    target = logits or loss_output or (outputs[0] if len(outputs) == 1 else None)
    if target not in outputs:
        raise RuntimeError(f"the model's outputs are {outputs}: name the logits (--logits) or the loss (--loss-output)")
    loss = artifacts.LossType.CrossEntropyLoss if logits else None
    # AdamW with weight decay 0 and PyTorch's eps; adam_mode is set to 0 (PyTorch) below.
    optimizer = onnxblock.optim.AdamW(bias_correction=True, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    os.makedirs(out, exist_ok=True)
    artifacts.generate_artifacts(model, requires_grad=trainable, frozen_params=frozen, loss=loss, optimizer=optimizer,
                                 artifact_directory=out, loss_input_names=[target])
    opt_path = os.path.join(out, "optimizer_model.onnx")
    opt = onnx.load(opt_path)
    for n in opt.graph.node:
        if n.op_type == "AdamWOptimizer":
            for a in n.attribute:
                if a.name == "adam_mode":
                    a.i = 0
    onnx.save(opt, opt_path)
    return len(trainable), [f for f in frozen if f in bn_stats], rewrites


def stage(name):
    print(json.dumps({"stage": name}), flush=True)


def supervise():
    """Runs the worker; passes its result line on, or turns its death into an error line."""
    args = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--worker"]
    with tempfile.TemporaryDirectory(prefix="ort-train-") as tmp:  # here, so that a crashed worker leaves nothing
        if not any(x == "--artifacts" or x.startswith("--artifacts=") for x in sys.argv[1:]):
            args += ["--artifacts", tmp]
        p = subprocess.run(args, stdout=subprocess.PIPE, text=True)
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    results = [d for d in lines if "stage" not in d]
    if results:
        print(json.dumps(results[-1]), flush=True)
        return 0
    stages = [d["stage"] for d in lines if "stage" in d]
    where = stages[-1] if stages else "start-up"
    how = f"exit {p.returncode}"
    if p.returncode < 0:
        how = signal.Signals(-p.returncode).name
    head = "cannot build the gradient: " if where in ("building the artifacts", "loading", "step 1") else ""
    print(json.dumps({"error": f"{head}ORT died ({how}) in {where}"}), flush=True)
    return 0


def main():
    if "--worker" not in sys.argv[1:]:
        return supervise()
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--logits")
    ap.add_argument("--labels", default="y")
    ap.add_argument("--loss-output")
    ap.add_argument("--artifacts")
    ap.add_argument("--static-batch", action="store_true", help="fix the inputs' and outputs' axis 0 to --batch")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()

    import onnxruntime as ort
    import onnxruntime.training.api as api
    ort.set_default_logger_severity(3)

    with contextlib.ExitStack() as stack:
        out = a.artifacts or stack.enter_context(tempfile.TemporaryDirectory(prefix="ort-train-"))  # no supervisor
        st = os.stat(a.model)
        stamp = {"model": os.path.abspath(a.model), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                 "logits": a.logits, "loss_output": a.loss_output, "static_batch": a.static_batch, "version": 1}
        stamp_path = os.path.join(out, "stamp.json")
        info = None
        if os.path.exists(stamp_path):
            saved = json.load(open(stamp_path))
            if saved.get("stamp") == stamp:
                info = saved["info"]
        if info is None:
            if os.path.exists(stamp_path):
                os.remove(stamp_path)
            stage("building the artifacts")
            try:
                os.makedirs(out, exist_ok=True)
                with quiet_stderr(os.path.join(out, "build.log")):
                    n, frozen, rewrites = build(a.model, out, a.logits, a.loss_output, a.batch if a.static_batch else 0)
            except Exception as e:  # noqa: BLE001 -- ORT raises RuntimeError, onnx ValueError, ...
                print(json.dumps({"error": "cannot build the gradient: " + reason(e)}), flush=True)
                return 0
            info = {"trainable": n, "frozen": frozen, "rewrites": rewrites}
            json.dump({"stamp": stamp, "info": info}, open(stamp_path, "w"))

        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        arrays = np.load(a.data)
        stage("loading")
        try:
            state = api.CheckpointState.load_checkpoint(os.path.join(out, "checkpoint"))
            # No eval model: PyTorch's training-mode export keeps BatchNormalization's 3 outputs, which the eval
            # model (training_mode 0) refuses to load.
            module = api.Module(os.path.join(out, "training_model.onnx"), state, None, "cpu", so)
            optimizer = api.Optimizer(os.path.join(out, "optimizer_model.onnx"), module)
            optimizer.set_learning_rate(a.lr)
            module.train()
            feeds = []
            for name in module.input_names():
                key = a.labels if name == "labels" and a.logits else name
                feeds.append(np.ascontiguousarray(arrays[key][:a.batch]))
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"error": "cannot build the gradient: " + reason(e)}), flush=True)
            return 0
        ms, losses = [], []
        for k in range(a.steps):
            stage(f"step {k + 1}")
            t0 = time.perf_counter()
            try:
                loss = module(*feeds)
                optimizer.step()
                module.lazy_reset_grad()
            except Exception as e:  # noqa: BLE001
                if k == 0:
                    print(json.dumps({"error": "cannot build the gradient: " + reason(e)}), flush=True)
                    return 0
                raise
            ms.append((time.perf_counter() - t0) * 1e3)
            losses.append(float(np.asarray(loss[0] if isinstance(loss, (list, tuple)) else loss).reshape(-1)[0]))
        print(json.dumps({"step_ms": ms, "loss": losses, **info}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
