// ai.onnxtrain.OptimizerUpdate on the GPU (cuda_ops/optimizer_kernels.h): one multi-tensor step over every
// parameter -- gradient unscale, finite check and norm, clipping, the update of any kind (sgd, momentum, nesterov,
// adam, adamw, lamb) with its half copies, gradient accumulation, the step and micro-step counters and the dynamic
// loss scale -- with no host synchronisation; the CPU kernel's semantics (executor/kernels/internal_optim.cc).
// The launchers update in place: where the plan gave an output its own memory (no state_in_place), the state is
// first copied into it. The descriptor block (one entry per parameter with its device pointers) is built on the
// first run and again only when the plan's pointers change.
//
// Gradient accumulation (accumulate K > 1): the micro-step counter and the sums stay on the device; the kernels read
// the counter to decide what the call does (add to the sums; or, at the K-th call, update with the mean and zero
// the sums), so the same launches serve every micro-step and a captured step graph replays correctly. As on the
// CPU, micro-steps 1..K-1 report grad_norm NaN and skipped false and leave the step counter and the loss scale as
// they are; the K-th reports the mean's norm, skips on a non-finite mean (a micro-step's inf or NaN is carried in
// the sum) and moves the loss scale.
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <stdexcept>

#include "cuda_ops/optimizer_kernels.h"
#include "executor/cuda/cuda_kernels.h"
#include "graph/graph.h"
#include "graph/ops/optimizer_layout.h"

namespace ot {
namespace {

struct OptimState {
  std::mutex mu;
  std::vector<const void*> key;  // the pointers the block was built for
  void* block = nullptr;
  size_t block_bytes = 0;
  cuda::OptimList list;
  void* own_ws = nullptr;  // the workspace when the kernel runs outside a plan (KernelIO::workspace null)
  ~OptimState() {
    if (block) cudaFree(block);
    if (own_ws) cudaFree(own_ws);
  }
};

void Copy(void* dst, const void* src, size_t n, void* stream) {
  if (dst != src && n)
    CudaCheck(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)), "state copy");
}

KernelInfo OptimizerUpdateKernel(const KernelContext& ctx) {
  const Node& node = ctx.node;
  OptimizerHyperparams a;
  if (const std::string why = OptimizerHyperparams::Decode(node, &a); !why.empty()) ctx.Fail(why);
  const cuda::OptimKind okind = a.kind;
  const OptimizerLayout l = OptimizerLayout::Of(node);
  const int k = cuda::OptimStateCount(okind);
  if (l.sharded()) ctx.Unsupported("a sharded optimizer update (--shard-optimizer) on CUDA");
  if (node.attr_int("world", 1) > 1)
    ctx.Unsupported("gradient accumulation (--grad-accum) with more than one rank on CUDA");
  if (l.k != k || static_cast<int>(ctx.inputs.size()) != l.num_inputs() ||
      static_cast<int>(ctx.outputs.size()) != l.num_outputs())
    ctx.Fail("operand counts do not match the attributes");
  const bool lr64 = ctx.in(0).dtype == DataType::kFloat64;
  if (ctx.in(0).dtype != DataType::kFloat32 && !lr64)
    ctx.Unsupported("a learning rate of " + DataTypeName(ctx.in(0).dtype));
  cuda::OptimHyper h;
  h.kind = okind;
  h.beta1 = a.beta1;
  h.beta2 = a.beta2;
  h.eps = a.eps;
  h.weight_decay = a.weight_decay;
  h.momentum = a.momentum;
  h.max_grad_norm = a.max_grad_norm;
  h.lr_schedule = a.lr_schedule;
  h.warmup = a.warmup;
  h.total_steps = a.total_steps;
  const int n = l.n;
  const bool accumulating = l.accumulating();
  const int64_t accumulate = l.accumulate;
  std::vector<int64_t> numel(n);
  std::vector<cuda::FloatType> gtype(n);
  for (int i = 0; i < n; ++i) {
    if (ctx.in(l.param_in(i)).dtype != DataType::kFloat32)
      ctx.Unsupported("parameters of " + DataTypeName(ctx.in(l.param_in(i)).dtype));
    numel[i] = ctx.in(l.param_in(i)).numel();
    gtype[i] = DeviceFloatType(ctx, ctx.in(l.grad_in(i)).dtype, "gradients");
    if (ctx.in(l.grad_in(i)).numel() != numel[i])
      ctx.Fail("the gradient of parameter " + std::to_string(i) + " has another size than the parameter");
    for (int j = 0; j < k; ++j)
      if (ctx.in(l.state_in(j, i)).numel() != numel[i] || ctx.in(l.state_in(j, i)).dtype != DataType::kFloat32)
        ctx.Fail("a state of parameter " + std::to_string(i) + " is not float32 of the parameter's size");
    if (accumulating && (ctx.in(l.acc_in(i)).numel() != numel[i] || ctx.in(l.acc_in(i)).dtype != DataType::kFloat32))
      ctx.Fail("the gradient sum of parameter " + std::to_string(i) + " is not float32 of the parameter's size");
  }
  if (accumulating && (ctx.in(l.micro_in()).numel() != 1 || ctx.in(l.micro_in()).dtype != DataType::kInt64))
    ctx.Fail("the micro-step counter must be an int64 scalar");
  std::vector<int> half_slot(n, -1);
  for (int j = 0; j < l.m(); ++j) {
    const int64_t i = l.half_params[j];
    if (i < 0 || i >= n) ctx.Fail("half_params[" + std::to_string(j) + "] = " + std::to_string(i) + " is out of range");
    half_slot[static_cast<size_t>(i)] = l.half_out(j);
  }
  const cuda::FloatType half_type =
      l.half_dtype == static_cast<int64_t>(DataType::kBFloat16) ? cuda::FloatType::kBF16 : cuda::FloatType::kF16;
  const bool scaling = l.scaling();
  const int scale_in = l.scale_in(), scale_out = l.scale_out(), base = l.step_out();
  const int micro_in = l.micro_in(), micro_out = l.micro_out();
  cuda::LossScaleState ls0;
  ls0.dynamic = l.loss_scaling == "dynamic";
  ls0.growth = a.growth_factor;
  ls0.backoff = a.backoff_factor;
  ls0.min_scale = a.min_scale;
  ls0.growth_interval = a.growth_interval;
  ls0.overflows = a.overflows_to_backoff;
  int64_t chunks = 0, total_elements = 0;
  for (int64_t c : numel) {
    chunks += (c + cuda::kOptimChunk - 1) / cuda::kOptimChunk;
    total_elements += c;
  }
  // Workspace: the step's (OptimWorkspaceBytes), the found_inf flag (256 bytes), the statistics'.
  const size_t ws_step = (cuda::OptimWorkspaceBytes(chunks, n) + 255) / 256 * 256;
  const size_t ws_stats = l.stats ? cuda::MultiTensorStatsWorkspaceBytes(chunks) : 0;
  const size_t ws_total = ws_step + 256 + ws_stats;
  const bool stats = l.stats;
  const int norm_out = l.param_norm_out(), zero_out = l.zero_fraction_out();
  auto st = std::make_shared<OptimState>();
  const std::string what = node.Describe();
  KernelInfo info;
  // Everything is updated in place in the outputs (each element read before it is written, LAMB's parameters
  // included: its direction is recomputed, never stored), so every state may share its input's storage.
  for (int i = 0; i < n; ++i) {
    AllowInPlace(info, ctx, l.param_out(i), l.param_in(i));
    for (int j = 0; j < k; ++j) AllowInPlace(info, ctx, l.state_out(j, i), l.state_in(j, i));
    if (accumulating) AllowInPlace(info, ctx, l.acc_out(i), l.acc_in(i));
  }
  AllowInPlace(info, ctx, base, 1);
  if (accumulating) AllowInPlace(info, ctx, micro_out, micro_in);
  if (scaling)
    for (int j = 0; j < 3; ++j) AllowInPlace(info, ctx, scale_out + j, scale_in + j);
  info.workspace_bytes = ws_total;
  info.fn = [=](const KernelIO& io) {
    // The next state is written in the outputs: bring the state there first where it is elsewhere.
    std::vector<const void*> key;
    for (int i = 0; i < n; ++i) {
      const size_t bytes = static_cast<size_t>(numel[i]) * 4;
      Copy(io.out[l.param_out(i)], io.in[l.param_in(i)], bytes, io.stream);
      for (int j = 0; j < k; ++j) Copy(io.out[l.state_out(j, i)], io.in[l.state_in(j, i)], bytes, io.stream);
      if (accumulating) Copy(io.out[l.acc_out(i)], io.in[l.acc_in(i)], bytes, io.stream);
      key.insert(key.end(),
                 {io.out[l.param_out(i)], io.in[l.grad_in(i)], k >= 1 ? io.out[l.state_out(0, i)] : nullptr,
                  k >= 2 ? io.out[l.state_out(1, i)] : nullptr, accumulating ? io.out[l.acc_out(i)] : nullptr,
                  half_slot[i] >= 0 ? io.out[half_slot[i]] : nullptr});
    }
    if (!io.out[base] || (accumulating && !io.out[micro_out]))
      throw Error(what + ": the step and micro-step counters' outputs are needed on the GPU");
    Copy(io.out[base], io.in[1], 8, io.stream);
    cuda::AccumState accum;
    if (accumulating) {
      Copy(io.out[micro_out], io.in[micro_in], 8, io.stream);
      accum.micro = static_cast<int64_t*>(io.out[micro_out]);
      accum.k = accumulate;
    }
    cuda::LossScaleState ls = ls0;
    if (scaling) {
      Copy(io.out[scale_out], io.in[scale_in], 4, io.stream);
      Copy(io.out[scale_out + 1], io.in[scale_in + 1], 8, io.stream);
      Copy(io.out[scale_out + 2], io.in[scale_in + 2], 8, io.stream);
      ls.scale = static_cast<float*>(io.out[scale_out]);
      ls.good = static_cast<int64_t*>(io.out[scale_out + 1]);
      ls.bad = static_cast<int64_t*>(io.out[scale_out + 2]);
    }
    std::lock_guard<std::mutex> lock(st->mu);
    if (key != st->key) {
      std::vector<cuda::OptimTensor> ts(n);
      for (int i = 0; i < n; ++i) {
        cuda::OptimTensor& t = ts[i];
        t.param = static_cast<float*>(io.out[l.param_out(i)]);
        t.grad = io.in[l.grad_in(i)];
        if (k >= 1) t.s0 = static_cast<float*>(io.out[l.state_out(0, i)]);
        if (k >= 2) t.s1 = static_cast<float*>(io.out[l.state_out(1, i)]);
        if (accumulating) t.acc = static_cast<float*>(io.out[l.acc_out(i)]);
        t.half_copy = half_slot[i] >= 0 ? io.out[half_slot[i]] : nullptr;
        t.n = numel[i];
        t.grad_type = gtype[i];
        t.half_type = half_type;
      }
      cuda::OptimPack pack;
      RunLauncher(what, [&] { pack = cuda::PackOptimTensors(ts, okind, accumulating); });
      if (pack.bytes.size() > st->block_bytes) {
        if (st->block) cudaFree(st->block);
        st->block = nullptr;
        CudaCheck(cudaMalloc(&st->block, pack.bytes.size()), "optimizer descriptor block");
        st->block_bytes = pack.bytes.size();
      }
      // Synchronous: the host bytes die here.
      CudaCheck(cudaMemcpy(st->block, pack.bytes.data(), pack.bytes.size(), cudaMemcpyHostToDevice), "descriptor copy");
      st->list = {st->block, pack.num_tensors, pack.num_chunks, pack.states, pack.accumulate};
      st->key = key;
    }
    void* ws = io.workspace;
    if (!ws) {  // outside a plan: a workspace of our own, allocated once
      if (!st->own_ws) CudaCheck(cudaMalloc(&st->own_ws, ws_total), "optimizer workspace");
      ws = st->own_ws;
    }
    cuda::OptimHyper hh = h;
    if (lr64)
      hh.lr_device_f64 = static_cast<const double*>(io.in[0]);
    else
      hh.lr_device = static_cast<const float*>(io.in[0]);
    int* found_inf = reinterpret_cast<int*>(static_cast<uint8_t*>(ws) + ws_step);
    RunLauncher(what, [&] {
      cuda::MultiTensorStep(st->list, hh, ls, accum, static_cast<int64_t*>(io.out[base]), found_inf,
                            static_cast<float*>(io.out[base + 1]), ws, ws_step, io.stream);
    });
    if (stats)
      RunLauncher(what, [&] {
        cuda::MultiTensorStats(st->list, total_elements, static_cast<float*>(io.out[norm_out]),
                               static_cast<float*>(io.out[zero_out]), static_cast<uint8_t*>(ws) + ws_step + 256,
                               ws_stats, io.stream);
      });
    // skipped (bool) = found_inf (0/1, 0 on a micro-step that only accumulated): its low byte.
    if (io.out[base + 2])
      CudaCheck(cudaMemcpyAsync(io.out[base + 2], found_inf, 1, cudaMemcpyDeviceToDevice,
                                static_cast<cudaStream_t>(io.stream)),
                "skipped flag");
  };
  return info;
}

}  // namespace

void RegisterCudaOptimizerKernels(KernelRegistry& r) {
  r.Register("OptimizerUpdate", OptimizerUpdateKernel, kInternalDomain);
}

}  // namespace ot
