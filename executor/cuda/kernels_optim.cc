// ai.onnxtrain.OptimizerUpdate on the GPU for Adam and AdamW (cuda_ops/optimizer_kernels.h): one multi-tensor step
// over every parameter -- gradient unscale, finite check and norm, clipping, the update with its half copies, the
// step counter and the dynamic loss scale -- with no host synchronisation. The launchers update in place: where the
// plan gave an output its own memory (no state_in_place), the state is first copied into it. The descriptor block
// (one entry per parameter with its device pointers) is built on the first run and again only when the plan's
// pointers change. Not here yet: SGD/momentum/LAMB and gradient accumulation.
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <stdexcept>

#include "cuda_ops/optimizer_kernels.h"
#include "executor/cuda/cuda_kernels.h"
#include "graph/grad_context.h"
#include "graph/ops/optimizer_layout.h"

namespace ot {
namespace {

struct AdamState {
  std::mutex mu;
  std::vector<const void*> key;  // the pointers the block was built for
  void* block = nullptr;
  size_t block_bytes = 0;
  cuda::AdamList list;
  ~AdamState() {
    if (block) cudaFree(block);
  }
};

void Copy(void* dst, const void* src, size_t n, void* stream) {
  if (dst != src && n)
    CudaCheck(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)), "state copy");
}

KernelInfo OptimizerUpdateKernel(const KernelContext& ctx) {
  const Node& node = ctx.node;
  const std::string kind = node.attr_string("kind", "");
  if (kind != "adam" && kind != "adamw") ctx.Unsupported("the " + kind + " optimizer on the GPU (adam and adamw are)");
  const OptimizerLayout l = OptimizerLayout::Of(node);
  if (l.accumulating()) ctx.Unsupported("gradient accumulation (--grad-accum) on the GPU");
  if (static_cast<int>(ctx.inputs.size()) != l.num_inputs() || static_cast<int>(ctx.outputs.size()) != l.num_outputs())
    ctx.Fail("operand counts do not match the attributes");
  const bool lr64 = ctx.in(0).dtype == DataType::kFloat64;
  if (ctx.in(0).dtype != DataType::kFloat32 && !lr64)
    ctx.Unsupported("a learning rate of " + DataTypeName(ctx.in(0).dtype));
  const Attribute* hp = node.attr("hyperparameters");
  if (!hp || hp->kind != Attribute::Kind::kTensor || hp->t.numel() != 6)
    ctx.Fail("attribute hyperparameters must be a tensor of 6 values");
  cuda::AdamHyper h;
  h.beta1 = hp->t.GetDouble(0);
  h.beta2 = hp->t.GetDouble(1);
  h.eps = hp->t.GetDouble(2);
  h.weight_decay = hp->t.GetDouble(3);
  h.max_grad_norm = hp->t.GetDouble(5);
  h.adamw = kind == "adamw";
  h.lr_schedule = static_cast<int>(node.attr_int("lr_schedule", 0));
  h.warmup = node.attr_int("warmup", 0);
  h.total_steps = node.attr_int("total_steps", 0);
  const int n = l.n;
  std::vector<int64_t> numel(n);
  std::vector<cuda::FloatType> gtype(n);
  for (int i = 0; i < n; ++i) {
    if (ctx.in(2 + i).dtype != DataType::kFloat32) ctx.Unsupported("parameters of " + DataTypeName(ctx.in(2 + i).dtype));
    numel[i] = ctx.in(2 + i).numel();
    gtype[i] = DeviceFloatType(ctx, ctx.in(2 + n + i).dtype, "gradients");
    for (int j = 2; j < 4; ++j)
      if (ctx.in(2 + j * n + i).numel() != numel[i] || ctx.in(2 + j * n + i).dtype != DataType::kFloat32)
        ctx.Fail("a moment of parameter " + std::to_string(i) + " is not float32 of the parameter's size");
  }
  std::vector<int> half_slot(n, -1);
  for (int j = 0; j < l.m(); ++j) half_slot[static_cast<size_t>(l.half_params[j])] = l.half_out(j);
  const cuda::FloatType half_type =
      l.half_dtype == static_cast<int64_t>(DataType::kBFloat16) ? cuda::FloatType::kBF16 : cuda::FloatType::kF16;
  const bool scaling = l.scaling();
  const int scale_in = l.scale_in(), scale_out = l.scale_out(), base = l.step_out();
  cuda::LossScaleState ls0;
  ls0.dynamic = l.loss_scaling == "dynamic";
  ls0.growth = node.attr_float("growth_factor", 2.f);
  ls0.backoff = node.attr_float("backoff_factor", .5f);
  ls0.min_scale = node.attr_float("min_scale", 1.f);
  ls0.growth_interval = node.attr_int("growth_interval", 2000);
  ls0.overflows = node.attr_int("overflows_to_backoff", 1);
  int64_t chunks = 0;
  for (int64_t c : numel) chunks += (c + cuda::kAdamChunk - 1) / cuda::kAdamChunk;
  const size_t ws_adam = (cuda::AdamWorkspaceBytes(chunks) + 255) / 256 * 256;
  const size_t ws_stats = l.stats ? cuda::MultiTensorStatsWorkspaceBytes(chunks) : 0;
  int64_t total_elements = 0;
  for (int64_t c : numel) total_elements += c;
  const bool stats = l.stats;
  const int norm_out = l.param_norm_out(), zero_out = l.zero_fraction_out();
  auto st = std::make_shared<AdamState>();
  const std::string what = node.Describe();
  KernelInfo info;
  for (int i = 0; i < n; ++i) {
    AllowInPlace(info, ctx, i, 2 + i);
    AllowInPlace(info, ctx, n + i, 2 + 2 * n + i);
    AllowInPlace(info, ctx, 2 * n + i, 2 + 3 * n + i);
  }
  AllowInPlace(info, ctx, base, 1);
  if (scaling)
    for (int j = 0; j < 3; ++j) AllowInPlace(info, ctx, scale_out + j, scale_in + j);
  info.workspace_bytes = ws_adam + 256 + ws_stats;
  info.fn = [=](const KernelIO& io) {
    // Everything is updated in place in the outputs: bring the state there first where it is elsewhere.
    std::vector<const void*> key;
    for (int i = 0; i < n; ++i) {
      Copy(io.out[i], io.in[2 + i], static_cast<size_t>(numel[i]) * 4, io.stream);
      Copy(io.out[n + i], io.in[2 + 2 * n + i], static_cast<size_t>(numel[i]) * 4, io.stream);
      Copy(io.out[2 * n + i], io.in[2 + 3 * n + i], static_cast<size_t>(numel[i]) * 4, io.stream);
      key.insert(key.end(), {io.out[i], io.in[2 + n + i], io.out[n + i], io.out[2 * n + i],
                             half_slot[i] >= 0 ? io.out[half_slot[i]] : nullptr});
    }
    Copy(io.out[base], io.in[1], 8, io.stream);
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
      std::vector<cuda::AdamTensor> ts(n);
      for (int i = 0; i < n; ++i) {
        cuda::AdamTensor& t = ts[i];
        t.param = static_cast<float*>(io.out[i]);
        t.grad = io.in[2 + n + i];
        t.m = static_cast<float*>(io.out[n + i]);
        t.v = static_cast<float*>(io.out[2 * n + i]);
        t.half_copy = half_slot[i] >= 0 ? io.out[half_slot[i]] : nullptr;
        t.n = numel[i];
        t.grad_type = gtype[i];
        t.half_type = half_type;
      }
      cuda::AdamPack pack;
      try {
        pack = cuda::PackAdamTensors(ts);
      } catch (const std::exception& e) {
        throw Error(what + ": " + e.what());
      }
      if (pack.bytes.size() > st->block_bytes) {
        if (st->block) cudaFree(st->block);
        st->block = nullptr;
        CudaCheck(cudaMalloc(&st->block, pack.bytes.size()), "optimizer descriptor block");
        st->block_bytes = pack.bytes.size();
      }
      // Synchronous: the host bytes die here.
      CudaCheck(cudaMemcpy(st->block, pack.bytes.data(), pack.bytes.size(), cudaMemcpyHostToDevice), "descriptor copy");
      st->list = {st->block, pack.num_tensors, pack.num_chunks};
      st->key = key;
    }
    cuda::AdamHyper hh = h;
    if (lr64) hh.lr_device_f64 = static_cast<const double*>(io.in[0]);
    else hh.lr_device = static_cast<const float*>(io.in[0]);
    int* found_inf = reinterpret_cast<int*>(static_cast<uint8_t*>(io.workspace) + ws_adam);
    try {
      cuda::MultiTensorAdamStep(st->list, hh, ls, static_cast<int64_t*>(io.out[base]), found_inf,
                                static_cast<float*>(io.out[base + 1]), io.workspace, ws_adam, io.stream);
    } catch (const std::exception& e) {
      throw Error(what + ": " + e.what());
    }
    if (stats) {
      try {
        cuda::MultiTensorStats(st->list, total_elements, static_cast<float*>(io.out[norm_out]),
                               static_cast<float*>(io.out[zero_out]), static_cast<uint8_t*>(io.workspace) + ws_adam + 256,
                               ws_stats, io.stream);
      } catch (const std::exception& e) {
        throw Error(what + ": " + e.what());
      }
    }
    // skipped (bool) = found_inf (0/1): its low byte.
    if (io.out[base + 2])
      CudaCheck(cudaMemcpyAsync(io.out[base + 2], found_inf, 1, cudaMemcpyDeviceToDevice,
                                static_cast<cudaStream_t>(io.stream)),
                "skipped flag");
  };
  return info;
}

}  // namespace

void RegisterCudaOptimizerKernels(CpuKernelRegistry& r) {
  r.Register("OptimizerUpdate", OptimizerUpdateKernel, kInternalDomain);
}

}  // namespace ot
