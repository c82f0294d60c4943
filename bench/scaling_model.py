"""Data-parallel scaling model: predicted step time and scaling efficiency of BERT-base and GPT-2 124M training on
1-64 H100 GPUs, from a single-device step and a ring all-reduce cost model. No GPU or network needed:

    python3 bench/scaling_model.py [--json PATH] [--bert-step-ms 19.94] [--gpt2-step-ms MS] [--mfu 0.4] ...

Variants (the semantics of PyTorch DDP and of ZeRO stage 1): {no overlap, overlap} x {plain, ZeRO-1}.
  plain:  gradients all-reduced bucket by bucket, then every rank runs the full Adam update.
  ZeRO-1: gradients reduce-scattered bucket by bucket, each rank updates its 1/p of the parameters, then the updated
          half-precision parameters are all-gathered (after the update, never overlapped).
  no overlap: step = forward + backward + all communication + optimizer.
  overlap:    a bucket's collective starts at max(its last gradient written, previous collective's end); collectives
              run one at a time in bucket order; step = forward + max(backward end, last collective's end) + optimizer.
Scaling efficiency = throughput(p) / (p * throughput(1)) = step(1) / step(p) (the batch per GPU is fixed), against
the plain single-device step (no communication).

Assumptions (every one is printed with the tables and can be changed by a flag):
- BERT-base (12 x 768, seq 128, batch 32/GPU, Adam, fp16 AMP): step 19.94 ms, onnx-train's measurement on an NVIDIA
  H200 (bench/RESULTS.md; fp32 with TF32 off: 60.93 ms, try --bert-step-ms 60.93). Taken as the H100 step: same
  dense tensor throughput; H200's faster HBM is ignored. Parameter counts are the reference BERT-base (with the
  pooler, 512 positions, token types: 109.48M); the measured encoder differs by <1%.
- GPT-2 124M (seq 1024, batch 8/GPU, AdamW, bf16): NOT measured; estimated as forward+backward FLOPs
  6 * params * tokens + 12 * layers * seq^2 * hidden * batch (full attention matrices) at 40% of H100 SXM's
  989 TFLOP/s dense bf16 peak, plus the optimizer update.
- Optimizer update: memory bound, params * 4 B * 7 accesses (read param, grad, m, v; write param, m, v) / 3.35 TB/s
  (H100 SXM HBM3). For BERT it is subtracted from the measured step; the rest is forward 1/3, backward 2/3.
- Backward: the head's gradient (BERT pooler, GPT-2 ln_f) is ready first; for GPT-2 the tied LM-head matmul's
  backward (its FLOP share, ~27% of the backward) runs before any layer gradient; the rest is split evenly over the
  12 layers (within a layer in proportion to tensor size, last tensor of the forward first); the embedding
  gradients (GPT-2's wte includes the LM head's part) are ready at the end of the backward.
- Gradients communicated in fp32 (4 B/param); buckets of 25 MiB filled greedily with whole tensors in backward order.
- Ring all-reduce of n bytes over p ranks: 2(p-1) alpha + 2(p-1)/p n / beta; reduce-scatter and all-gather cost
  half of it. p <= 8: NVLink 4 ring (450 GB/s per direction per GPU, alpha 3 us). p > 8 (8 GPUs per node),
  default --inter-node hier: ring all-reduce in the node over NVLink plus, on each GPU's 1/8 shard, a ring over the
  nodes on InfiniBand NDR (50 GB/s per GPU, one NIC each, alpha 5 us), the phases back to back; --inter-node flat:
  one ring over all p ranks at the slowest link (50 GB/s, 5 us) -- a pessimistic bound.
- ZeRO-1 all-gathers the half-precision (2 B/param) parameter copies, in the same buckets.
- Optimizer state per rank: Adam m, v and fp32 master = 12 B/param (GB = 1e9 B); ZeRO-1 divides it by p.
- Ignored: communication kernels slowing the overlapped backward, AMP's overflow check, stragglers, data loading.
"""
import argparse
import json

GB = 1e9
MIB = 1024 * 1024
MEASURED_BERT_MS = 19.94  # onnx-train --amp (fp16), BERT-base encoder, seq 128, batch 32, H200 (bench/RESULTS.md)


def layer_tensors(style):
    """The 7,087,872 parameters of one transformer layer as (name, params), in the order the backward writes them."""
    qkv, proj, fc1, fc2, ln = 768 * 2304 + 2304, 768 * 768 + 768, 768 * 3072 + 3072, 3072 * 768 + 768, 2 * 768
    if style == "post-ln":  # BERT: x = LN1(x + Attn(x)); x = LN2(x + MLP(x))
        return [("ln2", ln), ("fc2", fc2), ("fc1", fc1), ("ln1", ln), ("proj", proj), ("qkv", qkv)]
    return [("mlp.c_proj", fc2), ("mlp.c_fc", fc1), ("ln_2", ln), ("attn.c_proj", proj), ("attn.c_attn", qkv),
            ("ln_1", ln)]  # GPT-2, pre-LN


def model_specs(args):
    """The two models: parameter layout, single-device forward/backward/optimizer times (seconds) and where the
    backward's time goes. GPT-2's times come from the FLOP estimate unless --gpt2-step-ms is given."""
    def opt_s(params):
        return params * 4 * args.adam_accesses / (args.hbm_tbs * 1e12)

    specs = []
    bert = dict(name="BERT-base", layers=12, style="post-ln", head=[("pooler", 590592)],
                emb=[("emb_ln", 2 * 768), ("token_type", 2 * 768), ("position", 512 * 768), ("word", 30522 * 768)],
                head_share=0.0, source="measured: onnx-train on H200, fp16 AMP"
                if args.bert_step_ms == MEASURED_BERT_MS else "given by --bert-step-ms")
    bert["params"] = 12 * 7087872 + sum(n for _, n in bert["head"] + bert["emb"])
    bert["opt"] = opt_s(bert["params"])
    fb = args.bert_step_ms / 1e3 - bert["opt"]
    bert["fwd"], bert["bwd"] = fb / 3, 2 * fb / 3
    specs.append(bert)

    wte, tokens = 50257 * 768, args.gpt2_batch * args.gpt2_seq
    gpt = dict(name="GPT-2 124M", layers=12, style="pre-ln", head=[("ln_f", 2 * 768)],
               emb=[("wpe", args.gpt2_seq * 768), ("wte", wte)])
    gpt["params"] = 12 * 7087872 + sum(n for _, n in gpt["head"] + gpt["emb"])
    gpt["opt"] = opt_s(gpt["params"])
    flops = 6 * gpt["params"] * tokens + 12 * 12 * args.gpt2_seq ** 2 * 768 * args.gpt2_batch
    if args.gpt2_step_ms is None:
        fb = flops / (args.mfu * args.peak_tflops * 1e12)
        gpt["source"] = "ESTIMATE: %.3g FLOP/step at %.0f%% of %.0f TFLOP/s" % (flops, 100 * args.mfu,
                                                                            args.peak_tflops)
    else:
        fb = args.gpt2_step_ms / 1e3 - gpt["opt"]
        gpt["source"] = "given by --gpt2-step-ms"
    gpt["fwd"], gpt["bwd"] = fb / 3, 2 * fb / 3
    # LM-head backward (2 matmuls of 2 * vocab * hidden * tokens) as a share of the backward's 2/3 of the FLOPs.
    lm_share = 4 * wte * tokens / (2 / 3 * flops)
    gpt["head_share"] = lm_share if args.gpt2_head_share is None else args.gpt2_head_share
    specs.append(gpt)
    for spec in specs:  # summed as predict() sums a step, so that p=1 gives efficiency 1.0 exactly
        spec["step1"] = spec["fwd"] + spec["bwd"] + spec["opt"]
    return specs


def gradient_schedule(spec):
    """(ready time in seconds from the backward's start, params) per tensor, in backward order."""
    bwd, head_t = spec["bwd"], spec["head_share"] * spec["bwd"]
    out = [(head_t, n) for _, n in spec["head"]]
    per_layer = (bwd - head_t) / spec["layers"]
    tensors = layer_tensors(spec["style"])
    layer_params = sum(n for _, n in tensors)
    for i in range(spec["layers"]):
        done = 0
        for _, n in tensors:
            done += n
            out.append((head_t + per_layer * (i + done / layer_params), n))
    out += [(bwd, n) for _, n in spec["emb"]]
    return out


def make_buckets(schedule, bucket_bytes, grad_bytes):
    """DDP-style buckets: whole tensors appended in backward order until a bucket holds >= bucket_bytes. Returns
    [(ready time, params)]: a bucket is ready when its last tensor is written."""
    buckets, ready, params = [], 0.0, 0
    for t, n in schedule:
        ready, params = max(ready, t), params + n
        if params * grad_bytes >= bucket_bytes:
            buckets.append((ready, params))
            ready, params = 0.0, 0
    if params:
        buckets.append((ready, params))
    return buckets


def ring_allreduce_s(nbytes, p, alpha_us, beta_gbs):
    """Ring all-reduce: 2(p-1) latency hops plus 2(p-1)/p of the buffer through each rank's link."""
    return 2 * (p - 1) * alpha_us * 1e-6 + 2 * (p - 1) / p * nbytes / (beta_gbs * GB)


def allreduce_s(nbytes, p, args):
    """All-reduce time on the cluster: NVLink ring within a node; across nodes hierarchical or one flat ring."""
    g = args.gpus_per_node
    if p <= g:
        return ring_allreduce_s(nbytes, p, args.nvlink_alpha_us, args.nvlink_gbs)
    if args.inter_node == "flat":
        return ring_allreduce_s(nbytes, p, args.ib_alpha_us, args.ib_gbs)
    # intra-node reduce-scatter + all-gather (= one intra all-reduce) around an inter-node all-reduce of a 1/g shard
    return (ring_allreduce_s(nbytes, g, args.nvlink_alpha_us, args.nvlink_gbs)
            + ring_allreduce_s(nbytes / g, p // g, args.ib_alpha_us, args.ib_gbs))


def exposed_comm_s(buckets, costs, bwd, overlap):
    """Communication time that lengthens the step: all of it without overlap; with overlap, what runs past the
    backward's end when each bucket starts at max(ready, previous bucket's end)."""
    if not overlap:
        return sum(costs)
    t = 0.0
    for (ready, _), c in zip(buckets, costs):
        t = max(ready, t) + c
    return max(0.0, t - bwd)


def predict(spec, buckets, p, args):
    """Step ms, efficiency, communication ms and hidden fraction of the four variants at p ranks."""
    grad_b = [n * args.grad_bytes for _, n in buckets]
    ar = [allreduce_s(b, p, args) for b in grad_b]
    rs = [c / 2 for c in ar]  # reduce-scatter = half an all-reduce
    ag = sum(allreduce_s(n * args.gather_bytes, p, args) / 2 for _, n in buckets)
    row = {"p": p, "fabric": "-" if p == 1 else "NVLink" if p <= args.gpus_per_node else "IB-" + args.inter_node}
    for overlap in (False, True):
        for zero in (False, True):
            costs = rs if zero else ar
            exposed = exposed_comm_s(buckets, costs, spec["bwd"], overlap)
            total = sum(costs) + (ag if zero else 0.0)
            opt = spec["opt"] / p if zero else spec["opt"]
            step = spec["fwd"] + spec["bwd"] + exposed + opt + (ag if zero else 0.0)
            key = ("overlap" if overlap else "no_overlap") + ("_zero1" if zero else "")
            row[key] = {"step_ms": step * 1e3, "efficiency": spec["step1"] / step,
                        "comm_ms": total * 1e3,
                        "hidden": max(0.0, total - exposed - (ag if zero else 0.0)) / total if total > 0 else None}
    row["opt_state_gb"] = spec["params"] * 12 / GB
    row["opt_state_gb_zero1"] = spec["params"] * 12 / GB / p
    return row


def assumptions(args):
    """The assumptions behind the numbers, one line each, with the values in use."""
    g = args.gpus_per_node
    if args.inter_node == "hier":
        inter = ("p>%d: hierarchical: NVLink all-reduce in the node + ring over the nodes of each GPU's 1/%d shard on "
                 "IB NDR %g GB/s per GPU, alpha %g us" % (g, g, args.ib_gbs, args.ib_alpha_us))
    else:
        inter = ("p>%d: one flat ring over all ranks at the slowest link, IB NDR %g GB/s per GPU, alpha %g us "
                 "(pessimistic: a node's NICs carrying rings in parallel ignored)" % (g, args.ib_gbs, args.ib_alpha_us))
    return [
        ("BERT-base: %.2f ms/step single GPU (onnx-train on H200, fp16 AMP, seq 128, batch 32/GPU; taken as H100: "
         "same dense tensor FLOP/s, HBM difference ignored)" if args.bert_step_ms == MEASURED_BERT_MS else
         "BERT-base: %.2f ms/step given (seq 128, batch 32/GPU)") % args.bert_step_ms,
        ("GPT-2 124M: ESTIMATE (not measured), (6*params*tokens + 12*layers*seq^2*hidden*batch) FLOPs at %.0f%% "
         "of %.0f TFLOP/s, seq %d, batch %d/GPU" % (100 * args.mfu, args.peak_tflops, args.gpt2_seq, args.gpt2_batch))
        if args.gpt2_step_ms is None else "GPT-2 124M: %.2f ms/step given" % args.gpt2_step_ms,
        "Adam update memory bound: params*4 B*%d accesses / %.2f TB/s (H100 SXM HBM3); forward = 1/3, backward = "
        "2/3 of the rest of the step" % (args.adam_accesses, args.hbm_tbs),
        "backward: head grads first; GPT-2's tied LM-head backward (%s of it) before any layer; the rest split evenly "
        "over 12 layers; embedding grads ready at the backward's end" % (
            "FLOP share" if args.gpt2_head_share is None else "%.2f" % args.gpt2_head_share),
        "grads in fp32 (%d B/param), DDP-style buckets of %g MiB, one collective at a time in bucket order"
        % (args.grad_bytes, args.bucket_mb),
        "ring all-reduce 2(p-1)alpha + 2(p-1)/p n/beta; reduce-scatter, all-gather = half; p<=%d: NVLink 4 %g GB/s, "
        "alpha %g us" % (args.gpus_per_node, args.nvlink_gbs, args.nvlink_alpha_us),
        inter,
        "ZeRO-1: grads reduce-scattered (overlappable), update on 1/p of params, %d B/param copies all-gathered after "
        "the update (never overlapped)" % args.gather_bytes,
        "optimizer state 12 B/param (Adam m, v, fp32 master), GB = 1e9 B; hidden = overlapped share of all the "
        "step's communication (the ZeRO-1 all-gather included)",
        "ignored: communication slowing the overlapped backward, AMP overflow checks, stragglers, input pipeline",
    ]


def markdown(spec, buckets, rows):
    """One model's Markdown table, headed by its single-device breakdown."""
    def cell(v):
        return "%.2f | %.3f" % (v["step_ms"], v["efficiency"])

    def hid(v):
        return "n/a" if v["hidden"] is None else "%.0f%%" % (100 * v["hidden"])

    out = ["### %s: %.2fM params, %d buckets; single GPU %.2f ms = fwd %.2f + bwd %.2f + Adam %.2f (%s)" % (
        spec["name"], spec["params"] / 1e6, len(buckets), spec["step1"] * 1e3, spec["fwd"] * 1e3, spec["bwd"] * 1e3,
        spec["opt"] * 1e3, spec["source"]), "",
        "| GPUs | fabric | DDP ms | eff | DDP+overlap ms | eff | hidden | ZeRO-1 ms | eff | ZeRO-1+overlap ms | eff "
        "| hidden | opt state GB/rank (DDP / ZeRO-1) |",
        "| " + " | ".join(["---"] * 13) + " |"]
    for r in rows:
        out.append("| %d | %s | %s | %s | %s | %s | %s | %s | %.3f / %.3f |" % (
            r["p"], r["fabric"], cell(r["no_overlap"]), cell(r["overlap"]), hid(r["overlap"]),
            cell(r["no_overlap_zero1"]), cell(r["overlap_zero1"]), hid(r["overlap_zero1"]),
            r["opt_state_gb"], r["opt_state_gb_zero1"]))
    return "\n".join(out)


def check(rows):
    """Sanity checks: efficiency exactly 1 at p=1; overlap never slower; plain DDP efficiency non-increasing in p.
    Returns notes for ZeRO-1 rising above the previous p (the sharded update saving more than the added traffic)."""
    notes = []
    for r in rows:
        for z in ("", "_zero1"):
            assert r["overlap" + z]["step_ms"] <= r["no_overlap" + z]["step_ms"] + 1e-12
    assert all(rows[0][k]["efficiency"] == 1.0 for k in ("no_overlap", "overlap", "no_overlap_zero1", "overlap_zero1"))
    for a, b in zip(rows, rows[1:]):
        for k in ("no_overlap", "overlap", "no_overlap_zero1", "overlap_zero1"):
            if b[k]["efficiency"] > a[k]["efficiency"] + 1e-12:
                assert k.endswith("zero1"), (k, a["p"], b["p"])
                notes.append("%s: efficiency rises from p=%d to p=%d" % (k, a["p"], b["p"]))
    return notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bert-step-ms", type=float, default=MEASURED_BERT_MS, help="measured single-GPU BERT-base step")
    ap.add_argument("--gpt2-step-ms", type=float, default=None, help="GPT-2 step; default: the FLOP estimate")
    ap.add_argument("--mfu", type=float, default=0.40, help="GPT-2 estimate: fraction of peak")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="H100 SXM dense bf16 peak")
    ap.add_argument("--gpt2-seq", type=int, default=1024)
    ap.add_argument("--gpt2-batch", type=int, default=8)
    ap.add_argument("--gpt2-head-share", type=float, default=None,
                    help="share of GPT-2's backward before the first layer gradient (default: LM-head FLOP share)")
    ap.add_argument("--hbm-tbs", type=float, default=3.35, help="HBM bandwidth for the Adam update, TB/s")
    ap.add_argument("--adam-accesses", type=int, default=7, help="4-byte accesses per parameter in the update")
    ap.add_argument("--grad-bytes", type=int, default=4)
    ap.add_argument("--gather-bytes", type=int, default=2, help="ZeRO-1 all-gathered parameter bytes")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="bucket size, MiB")
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--nvlink-gbs", type=float, default=450.0)
    ap.add_argument("--nvlink-alpha-us", type=float, default=3.0)
    ap.add_argument("--ib-gbs", type=float, default=50.0)
    ap.add_argument("--ib-alpha-us", type=float, default=5.0)
    ap.add_argument("--inter-node", choices=("hier", "flat"), default="hier")
    ap.add_argument("--gpus", default="1,2,4,8,16,32,64")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    args = ap.parse_args()
    ps = [int(x) for x in args.gpus.split(",")]
    if ps[0] != 1 or any(p > args.gpus_per_node and p % args.gpus_per_node for p in ps):
        ap.error("--gpus must start at 1, and counts above one node must be whole nodes")

    lines = assumptions(args)
    print("## Data-parallel scaling model (H100, weak scaling)\n\nAssumptions:\n")
    print("\n".join("- " + a for a in lines))
    result = {"assumptions": lines, "models": []}
    for spec in model_specs(args):
        buckets = make_buckets(gradient_schedule(spec), args.bucket_mb * MIB, args.grad_bytes)
        assert sum(n for _, n in buckets) == spec["params"]
        rows = [predict(spec, buckets, p, args) for p in ps]
        notes = check(rows)
        print("\n" + markdown(spec, buckets, rows))
        for n in notes:
            print("\nNote: " + n + " (the 1/p optimizer update saves more than the extra ZeRO-1 traffic costs).")
        result["models"].append({k: spec[k] for k in ("name", "params", "source", "head_share")} | {
            "fwd_ms": spec["fwd"] * 1e3, "bwd_ms": spec["bwd"] * 1e3, "opt_ms": spec["opt"] * 1e3,
            "step1_ms": spec["step1"] * 1e3, "buckets": [{"ready_ms": t * 1e3, "params": n} for t, n in buckets],
            "rows": rows, "notes": notes})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
