#!/usr/bin/env python3
"""The `traj` part of scripts/gpu-check: every example model trained on CUDA against the same binary's CPU
trajectory on the same machine.

For each example and optimizer (the settings of its trajectory_<optimizer>.json), the CPU run is the reference:
  - CUDA fp32 (TF32 off, the default) must give every step's loss within REL (1e-4) of the CPU's;
  - with Adam also --streams 1, 2, 4 and --no-cuda-graph, each against the CPU the same way;
  - under --deterministic, --streams 1 with graph replay and --streams 4 without must give bit-identical losses
    (the log prints 9 significant digits: equal text is equal float32 bits), and so must a repeated run.
Prints one line per check and a last summary line; exits 1 when any check fails.
Usage: gpu-traj.py ONNX_TRAIN OUT_DIR [FASHION_NPZ]
"""
import concurrent.futures
import json
import os
import subprocess
import sys

REL = 1e-4
here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
tool, out = sys.argv[1], sys.argv[2]
fashion = sys.argv[3] if len(sys.argv) > 3 else None
os.makedirs(out, exist_ok=True)

examples = [("digits_mlp", "examples/digits_mlp/train.npz"), ("tiny_lm", "examples/tiny_lm/data.npz")]
if fashion and os.path.exists(fashion):
    examples.append(("fashion_cnn", fashion))


def settings(name, opt):
    return json.load(open(os.path.join(root, "examples", name, f"trajectory_{opt}.json")))


def command(name, data, opt, device, extra):
    s = settings(name, opt)
    cmd = [tool, "train", os.path.join(root, "examples", name, "model.onnx"), "--data", os.path.join(root, data),
           "--loss", s["loss"], "--logits", s["logits"], "--labels", s["labels"], "--optimizer", opt,
           "--lr", str(s["lr"]), "--batch", str(s["batch"]), "--steps", str(s["steps"]), "--no-shuffle",
           "--device", device, "--quiet"]
    return cmd + extra


def run(key, cmd):
    log = os.path.join(out, key + ".jsonl")
    p = subprocess.run(cmd + ["--log-json", log], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return key, None, (p.stderr or p.stdout).strip().splitlines()[-1:] or ["exit %d" % p.returncode]
    rows = [json.loads(l) for l in open(log) if '"eval"' not in l]
    return key, [r["loss"] for r in rows], [l.split('"loss": ')[1].split(",")[0] for l in open(log) if '"eval"' not in l]


jobs = {}
for name, data in examples:
    for opt in ("sgd", "adam"):
        jobs[f"{name}.{opt}.cpu"] = command(name, data, opt, "cpu", [])
        jobs[f"{name}.{opt}.cuda"] = command(name, data, opt, "cuda", [])
        if opt != "adam":
            continue
        for n in (1, 4):
            jobs[f"{name}.{opt}.cuda_streams{n}"] = command(name, data, opt, "cuda", ["--streams", str(n)])
        jobs[f"{name}.{opt}.cuda_no_graph"] = command(name, data, opt, "cuda", ["--no-cuda-graph"])
        det = ["--deterministic"]
        jobs[f"{name}.{opt}.det_s1_graph"] = command(name, data, opt, "cuda", det + ["--streams", "1"])
        jobs[f"{name}.{opt}.det_s1_graph_again"] = command(name, data, opt, "cuda", det + ["--streams", "1"])
        jobs[f"{name}.{opt}.det_s4_no_graph"] = command(name, data, opt, "cuda", det + ["--streams", "4",
                                                                                        "--no-cuda-graph"])

# The CPU runs first (they take every core), then the CUDA runs four at a time.
results = {}
for key in [k for k in jobs if k.endswith(".cpu")]:
    k, losses, text = run(key, jobs[key])
    results[k] = (losses, text)
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    for k, losses, text in pool.map(lambda k: run(k, jobs[k]), [k for k in jobs if not k.endswith(".cpu")]):
        results[k] = (losses, text)

failed = passed = 0


def report(ok, line):
    global failed, passed
    print(("PASS " if ok else "FAIL ") + line, flush=True)
    if ok:
        passed += 1
    else:
        failed += 1


for name, _ in examples:
    for opt in ("sgd", "adam"):
        cpu, _ = results[f"{name}.{opt}.cpu"]
        if cpu is None:
            report(False, f"{name} {opt} cpu: {results[f'{name}.{opt}.cpu'][1]}")
            continue
        ref = settings(name, opt)["losses"]
        torch_rel = max(abs(a - b) / abs(b) for a, b in zip(cpu, ref))
        for key in [k for k in results if k.startswith(f"{name}.{opt}.") and not k.endswith(".cpu")]:
            got, text = results[key]
            if got is None:
                report(False, f"{key}: {text}")
                continue
            if len(got) != len(cpu):
                report(False, f"{key}: {len(got)} steps, cpu {len(cpu)}")
                continue
            rel = [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(got, cpu)]
            worst = max(range(len(rel)), key=lambda i: rel[i])
            report(rel[worst] <= REL, f"{key}: max relative difference to the CPU {rel[worst]:.2e} at step "
                   f"{worst + 1} ({got[worst]:.9g} vs {cpu[worst]:.9g}); CPU vs PyTorch {torch_rel:.2e}")
        if opt == "adam":
            base = results[f"{name}.{opt}.det_s1_graph"]
            for other in ("det_s1_graph_again", "det_s4_no_graph"):
                o = results[f"{name}.{opt}.{other}"]
                if base[0] is None or o[0] is None:
                    report(False, f"{name}.{opt}.{other}: {base[1] if base[0] is None else o[1]}")
                    continue
                same = base[1] == o[1]
                first = next((i for i, (a, b) in enumerate(zip(base[1], o[1])) if a != b), None)
                report(same, f"{name}.{opt}.{other}: --deterministic losses "
                       + ("bit-identical to --streams 1 with graphs" if same else
                          f"differ from --streams 1 with graphs at step {first + 1}: {o[1][first]} vs {base[1][first]}"))

print(f"trajectories: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
