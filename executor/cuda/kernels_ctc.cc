// The CTC loss on the GPU (cuda_ops/ctc.h): ai.onnxtrain.CTCLoss(logits, labels, logit_lengths, label_lengths) ->
// loss and ai.onnxtrain.CTCLossGrad(dLoss, logits, labels, logit_lengths, label_lengths) -> dLogits, with the
// attributes of the CPU kernels (executor/kernels/ctc_geometry.h: blank, reduction mean | sum, zero_infinity, layout
// tbc | btc) read the same way and the same size checks against the concrete dims. float32 and float64 logits (the
// schema's types). A length or label the CPU throws for raises a device flag here: the run's outputs for that sample
// are NaN and the run ends with an Error naming the node (after_run, once the device has finished).
#include <memory>
#include <stdexcept>
#include <string>

#include "cuda_ops/ctc.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/device_flag.h"
#include "executor/kernels/ctc_geometry.h"
#include "graph/graph.h"

namespace ot {
namespace {

// The desc of a CTCLoss / CTCLossGrad node whose logits are input `first` (labels and lengths follow).
cuda::CtcDesc DescOf(const KernelContext& ctx, int first) {
  bool mean = true;
  const cpu::CtcSpec s = CtcGeometry(ctx, first, &mean);
  cuda::CtcDesc d;
  d.frames = s.frames;
  d.batch = s.batch;
  d.classes = s.classes;
  d.max_labels = s.max_labels;
  d.batch_major = s.batch_major;
  d.blank = s.blank;
  d.zero_infinity = s.zero_infinity;
  d.reduction = mean ? cuda::CtcReduction::kMean : cuda::CtcReduction::kSum;
  const DataType dt = ctx.in(first).dtype;
  if (dt != DataType::kFloat32 && dt != DataType::kFloat64) ctx.Unsupported("logits must be float32 or float64");
  d.f64 = dt == DataType::kFloat64;
  try {
    cuda::ValidateCtc(d);
  } catch (const std::invalid_argument& e) {
    ctx.Unsupported(std::string("a CTC loss the GPU kernel cannot run: ") + e.what());
  }
  return d;
}

double Work(const cuda::CtcDesc& d) {
  return static_cast<double>(d.frames * d.batch) * static_cast<double>(8 * d.classes + 6 * (2 * d.max_labels + 1));
}

const char* kBadInput =
    ": a length outside [0, frames] / [0, max_labels] or a label outside [0, classes) or equal to blank";

KernelInfo CtcLossKernel(const KernelContext& ctx) {
  const cuda::CtcDesc d = DescOf(ctx, 0);
  if (ctx.out(0).dtype != ctx.in(0).dtype || ctx.out(0).numel() != 1)
    ctx.Fail("loss must be a scalar of the logits' dtype");
  const size_t ws = cuda::CtcWorkspaceBytes(d, false);
  auto flag = std::make_shared<DeviceFlag>();
  const std::string what = ctx.node.Describe();
  KernelInfo info = MakeInfo([=](const KernelIO& io) {
    RunLauncher(what, [&] {
      cuda::CtcLossForward(d, io.in[0], static_cast<const int64_t*>(io.in[1]), static_cast<const int64_t*>(io.in[2]),
                           static_cast<const int64_t*>(io.in[3]), io.out[0], nullptr, flag->dev, io.workspace, ws,
                           io.stream);
    });
    flag->CopyBack(io.stream);
  });
  info.workspace_bytes = ws;
  info.flops = Work(d);
  info.after_run = FlagCheck(flag, what + kBadInput);
  return info;
}

KernelInfo CtcLossGradKernel(const KernelContext& ctx) {
  const cuda::CtcDesc d = DescOf(ctx, 1);
  if (ctx.in(0).dtype != ctx.in(1).dtype || ctx.in(0).numel() != 1)
    ctx.Fail("dLoss must be a scalar of the logits' dtype");
  if (ctx.out(0).dtype != ctx.in(1).dtype || ctx.out(0).dims != ctx.in(1).dims)
    ctx.Fail("dLogits must have the logits' dtype and dims");
  const size_t ws = cuda::CtcWorkspaceBytes(d, true);
  auto flag = std::make_shared<DeviceFlag>();
  const std::string what = ctx.node.Describe();
  KernelInfo info = MakeInfo([=](const KernelIO& io) {
    RunLauncher(what, [&] {
      cuda::CtcLossBackward(d, io.in[0], io.in[1], static_cast<const int64_t*>(io.in[2]),
                            static_cast<const int64_t*>(io.in[3]), static_cast<const int64_t*>(io.in[4]), io.out[0],
                            flag->dev, io.workspace, ws, io.stream);
    });
    flag->CopyBack(io.stream);
  });
  info.workspace_bytes = ws;
  info.flops = 2 * Work(d);
  info.after_run = FlagCheck(flag, what + kBadInput);
  return info;
}

}  // namespace

void RegisterCudaCtcKernels(KernelRegistry& r) {
  r.Register("CTCLoss", CtcLossKernel, kInternalDomain);
  r.Register("CTCLossGrad", CtcLossGradKernel, kInternalDomain);
}

}  // namespace ot
