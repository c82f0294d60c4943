// BatchNormalization (training and inference forms) and ai.onnxtrain.BatchNormGrad on the GPU
// (cuda_ops/cudnn_batchnorm.h: cuDNN for fp32/fp16 X, our kernels for bf16 X and the inference-form backward).
// The node's reading mirrors the CPU kernels (executor/kernels/norm.cc MakeBatchNorm, internal_norm.cc
// BatchNormGradKernel): training mode from training_mode (opset >= 14), from the presence of the statistics
// outputs (7-13) or is_test (< 7); spatial = 0 (opsets < 9) folds the spatial dims into the channels; the running
// statistics are m * running + (1 - m) * batch with the biased batch variance, as the CPU computes them. X may be
// fp32/fp16/bf16; scale, B, the statistics and their gradients must be fp32 (what the AMP pass leaves them: cuDNN
// takes fp32 ones for half X); anything else is refused with UnsupportedError naming the node.
#include <string>
#include <utility>

#include "cuda_ops/cudnn_batchnorm.h"
#include "executor/cuda/cuda_kernels.h"
#include "graph/graph.h"

namespace ot {
namespace {

void RequireF32(const KernelContext& ctx, bool input, int i, const char* what) {
  const DataType t = input ? ctx.in(i).dtype : ctx.out(i).dtype;
  if (t != DataType::kFloat32)
    ctx.Unsupported(std::string(what) + " of " + DataTypeName(t) +
                    " on the GPU (float32 per-channel parameters and statistics are supported)");
}

// BatchNormalization(X, scale, B, input_mean, input_var) -> Y[, running_mean, running_var]
KernelInfo BatchNormKernel(const KernelContext& ctx) {
  const Node& n = ctx.node;
  if (n.attr_int("channels_last", 0) != 0) ctx.Unsupported("a channels-last BatchNormalization on the GPU");
  const auto& dims = ctx.in(0).dims;
  if (dims.size() < 2) ctx.Fail("X must have rank >= 2 (N, C, ...)");
  bool training;
  if (n.opset >= 14)
    training = n.attr_int("training_mode", 0) != 0;
  else if (n.opset >= 7)
    training = ctx.has_output(1) || ctx.has_output(2) || ctx.has_output(3) || ctx.has_output(4);
  else
    training = n.attr_int("is_test", 0) == 0;
  if (ctx.has_output(3) || ctx.has_output(4))
    ctx.Unsupported("the saved_mean/saved_var outputs of BatchNormalization before opset 14");
  if (n.opset >= 14 && !training && (ctx.has_output(1) || ctx.has_output(2)))
    ctx.Fail("running_mean/running_var outputs require training_mode = 1");
  const bool spatial = n.opset >= 9 || n.attr_int("spatial", 1) != 0;
  cuda::BatchNormDesc d;
  d.xt = DeviceFloatType(ctx, ctx.in(0).dtype, "BatchNormalization X");
  d.n = dims[0];
  d.c = dims[1];
  d.spatial = DimsProduct(dims, 2, dims.size());
  if (!spatial) {  // one statistic per (c, d1, ...): the spatial dims become channels
    d.c *= d.spatial;
    d.spatial = 1;
  }
  d.eps = n.attr_float("epsilon", 1e-5f);
  const double momentum = n.attr_float("momentum", 0.9f);
  static const char* names[] = {"", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    RequireF32(ctx, true, i, names[i]);
    if (ctx.in(i).numel() != d.c)
      ctx.Fail("input " + std::to_string(i) + " has " + std::to_string(ctx.in(i).numel()) + " elements, expected " +
               std::to_string(d.c));
  }
  if (ctx.out(0).dtype != ctx.in(0).dtype) ctx.Fail("Y's dtype differs from X's");
  const bool om = training && ctx.has_output(1), ov = training && ctx.has_output(2);
  if (om) RequireF32(ctx, false, 1, "running_mean");
  if (ov) RequireF32(ctx, false, 2, "running_var");
  if (d.n * d.c * d.spatial == 0) ctx.Unsupported("BatchNormalization of an empty tensor on the GPU");
  if (d.eps <= 0) ctx.Unsupported("epsilon <= 0 on the GPU");
  try {
    cuda::ValidateBatchNorm(d);
  } catch (const std::invalid_argument& e) {
    ctx.Unsupported(e.what());
  }
  const std::string what = n.Describe();
  KernelInfo info;
  if (!training) {
    info.fn = [=](const KernelIO& io) {
      RunLauncher(what, [&] {
        cuda::BatchNormForwardInference(d, io.in[0], io.In<float>(1), io.In<float>(2), io.In<float>(3), io.In<float>(4),
                                        io.out[0], io.stream);
      });
    };
    return info;
  }
  const size_t ws = cuda::BatchNormWorkspaceBytes(d);
  info.fn = [=](const KernelIO& io) {
    RunLauncher(what, [&] {
      cuda::BatchNormForwardTraining(d, io.in[0], io.In<float>(1), io.In<float>(2), io.In<float>(3), io.In<float>(4),
                                     momentum, io.out[0], om ? io.Out<float>(1) : nullptr,
                                     ov ? io.Out<float>(2) : nullptr, io.workspace, ws, io.stream);
    });
  };
  info.workspace_bytes = ws;
  return info;
}

// BatchNormGrad(dY, X, scale[, mean, var]) {epsilon, training} -> dX, dScale, dB
KernelInfo BatchNormGradKernel(const KernelContext& ctx) {
  const Node& n = ctx.node;
  if (n.attr_int("channels_last", 0) != 0) ctx.Unsupported("a channels-last BatchNormGrad on the GPU");
  const bool training = n.attr_int("training", 1) != 0;
  // The folds of passes/fuse_batch_norm.h are CPU kernels (the Trainer leaves them out on a device).
  if (n.attr_int("relu", 0) != 0 || ctx.has_output(3))
    ctx.Unsupported("BatchNormGrad with a folded Relu or dX sum (CPU fusion) on the GPU");
  const auto& dims = ctx.in(1).dims;
  if (dims.size() < 2) ctx.Fail("X must have rank >= 2 (N, C, ...)");
  if (ctx.in(0).dims != dims) ctx.Fail("dY and X shapes differ");
  if (ctx.in(0).dtype != ctx.in(1).dtype) ctx.Fail("dY and X have different dtypes");
  if (ctx.out(0).dtype != ctx.in(1).dtype) ctx.Unsupported("dX of a dtype other than X's");
  cuda::BatchNormDesc d;
  d.xt = DeviceFloatType(ctx, ctx.in(1).dtype, "BatchNormGrad X");
  d.n = dims[0];
  d.c = dims[1];
  d.spatial = DimsProduct(dims, 2, dims.size());
  d.eps = n.attr_float("epsilon", 1e-5f);
  RequireF32(ctx, true, 2, "scale");
  if (!training) {
    RequireF32(ctx, true, 3, "mean");
    RequireF32(ctx, true, 4, "var");
  }
  for (int i = 2; i < (training ? 3 : 5); ++i)
    if (ctx.in(i).numel() != d.c) ctx.Fail("input " + std::to_string(i) + " must have C elements");
  const bool o1 = ctx.has_output(1), o2 = ctx.has_output(2);
  if (o1) RequireF32(ctx, false, 1, "dScale");
  if (o2) RequireF32(ctx, false, 2, "dB");
  if (d.n * d.c * d.spatial == 0) ctx.Unsupported("BatchNormGrad of an empty tensor on the GPU");
  if (d.eps <= 0) ctx.Unsupported("epsilon <= 0 on the GPU");
  try {
    cuda::ValidateBatchNorm(d);
  } catch (const std::invalid_argument& e) {
    ctx.Unsupported(e.what());
  }
  const size_t ws = cuda::BatchNormWorkspaceBytes(d);
  const std::string what = n.Describe();
  KernelInfo info = MakeInfo([=](const KernelIO& io) {
    RunLauncher(what, [&] {
      cuda::BatchNormBackward(d, io.in[0], io.in[1], io.In<float>(2), training ? nullptr : io.In<float>(3),
                              training ? nullptr : io.In<float>(4), io.out[0], o1 ? io.Out<float>(1) : nullptr,
                              o2 ? io.Out<float>(2) : nullptr, io.workspace, ws, io.stream);
    });
  });
  info.workspace_bytes = ws;
  return info;
}

}  // namespace

void RegisterCudaBatchNormKernels(KernelRegistry& r) {
  r.Register("BatchNormalization", BatchNormKernel);
  r.Register("BatchNormGrad", BatchNormGradKernel, kInternalDomain);
}

}  // namespace ot
