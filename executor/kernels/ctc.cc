// CPU kernels of ai.onnxtrain.CTCLoss and CTCLossGrad (cpu_ops/ctc.h). The schema (graph/ops/ctc.cc) has checked
// the dtypes and ranks; the sizes are checked here against the concrete dims, the lengths and labels by the kernel
// (errors name the node and the sample's row in the batch).
#include "cpu_ops/ctc.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor/kernel_registry.h"
#include "executor/kernels/ctc_geometry.h"
#include "graph/graph.h"

namespace ot {

cpu::CtcSpec CtcGeometry(const KernelContext& ctx, int first, bool* mean) {
  const Node& n = ctx.node;
  cpu::CtcSpec s;
  s.batch_major = n.attr_string("layout", "tbc") == "btc";
  s.blank = n.attr_int("blank", 0);
  s.zero_infinity = n.attr_int("zero_infinity", 0) != 0;
  const std::string reduction = n.attr_string("reduction", "mean");
  if (reduction != "mean" && reduction != "sum") ctx.Fail("reduction must be mean or sum, not '" + reduction + "'");
  *mean = reduction == "mean";
  const auto& lg = ctx.in(first).dims;
  const auto& lb = ctx.in(first + 1).dims;
  if (lg.size() != 3 || lb.size() != 2) ctx.Fail("logits must have rank 3 and labels rank 2");
  s.frames = s.batch_major ? lg[1] : lg[0];
  s.batch = s.batch_major ? lg[0] : lg[1];
  s.classes = lg[2];
  s.max_labels = lb[1];
  if (s.blank >= s.classes)
    ctx.Fail("blank " + std::to_string(s.blank) + " is not below the " + std::to_string(s.classes) + " classes");
  const char* names[3] = {"labels", "logit_lengths", "label_lengths"};
  for (int i = 0; i < 3; ++i) {
    const TensorDesc& t = ctx.in(first + 1 + i);
    if (t.dtype != DataType::kInt64) ctx.Fail(std::string(names[i]) + " must be int64");
    if (t.dims.empty() || t.dims[0] != s.batch)
      ctx.Fail(std::string(names[i]) + " " + DimsToString(t.dims) + " has not the logits' batch " +
               std::to_string(s.batch));
  }
  return s;
}

namespace {

// d loss / d nll_b of the node's reduction.
std::vector<double> Weights(const cpu::CtcSpec& s, bool mean, const int64_t* label_lens) {
  std::vector<double> w(static_cast<size_t>(s.batch), 1.0);
  if (mean)
    for (int64_t b = 0; b < s.batch; ++b)
      w[static_cast<size_t>(b)] = 1.0 / static_cast<double>(std::max<int64_t>(1, label_lens[b])) /
                                  static_cast<double>(std::max<int64_t>(1, s.batch));
  return w;
}

double Work(const cpu::CtcSpec& s) {
  return static_cast<double>(s.frames * s.batch) * static_cast<double>(8 * s.classes + 6 * (2 * s.max_labels + 1));
}

KernelInfo MakeCtcLoss(const KernelContext& ctx) {
  bool mean = true;
  const cpu::CtcSpec s = CtcGeometry(ctx, 0, &mean);
  const DataType dt = ctx.in(0).dtype;
  if (dt != DataType::kFloat32 && dt != DataType::kFloat64) ctx.Unsupported("logits must be float32 or float64");
  const std::string where = ctx.node.Describe();
  KernelInfo k{[=](const KernelIO& io) {
    const int64_t* labels = io.In<int64_t>(1);
    const int64_t* logit_lens = io.In<int64_t>(2);
    const int64_t* label_lens = io.In<int64_t>(3);
    std::vector<double> nll(static_cast<size_t>(s.batch));
    try {
      if (dt == DataType::kFloat32)
        cpu::CtcLoss<float>(s, io.In<float>(0), labels, logit_lens, label_lens, nll.data());
      else
        cpu::CtcLoss<double>(s, io.In<double>(0), labels, logit_lens, label_lens, nll.data());
    } catch (const std::invalid_argument& e) {
      throw Error(where + ": " + e.what());
    }
    const std::vector<double> w = Weights(s, mean, label_lens);
    double loss = 0;
    for (int64_t b = 0; b < s.batch; ++b) loss += w[static_cast<size_t>(b)] * nll[static_cast<size_t>(b)];
    if (dt == DataType::kFloat32)
      *io.Out<float>(0) = static_cast<float>(loss);
    else
      *io.Out<double>(0) = loss;
  }};
  k.flops = Work(s);
  return k;
}

KernelInfo MakeCtcLossGrad(const KernelContext& ctx) {
  bool mean = true;
  const cpu::CtcSpec s = CtcGeometry(ctx, 1, &mean);
  const DataType dt = ctx.in(1).dtype;
  if (dt != DataType::kFloat32 && dt != DataType::kFloat64) ctx.Unsupported("logits must be float32 or float64");
  if (ctx.in(0).dtype != dt || ctx.in(0).numel() != 1) ctx.Fail("dLoss must be a scalar of the logits' dtype");
  const std::string where = ctx.node.Describe();
  KernelInfo k{[=](const KernelIO& io) {
    const int64_t* labels = io.In<int64_t>(2);
    const int64_t* logit_lens = io.In<int64_t>(3);
    const int64_t* label_lens = io.In<int64_t>(4);
    std::vector<double> w = Weights(s, mean, label_lens);
    const double g = dt == DataType::kFloat32 ? static_cast<double>(*io.In<float>(0)) : *io.In<double>(0);
    for (double& x : w) x *= g;
    try {
      if (dt == DataType::kFloat32)
        cpu::CtcLossGrad<float>(s, io.In<float>(1), labels, logit_lens, label_lens, w.data(), io.Out<float>(0));
      else
        cpu::CtcLossGrad<double>(s, io.In<double>(1), labels, logit_lens, label_lens, w.data(), io.Out<double>(0));
    } catch (const std::invalid_argument& e) {
      throw Error(where + ": " + e.what());
    }
  }};
  k.flops = 2 * Work(s);
  return k;
}

}  // namespace

void RegisterCtcKernels(KernelRegistry& r) {
  r.Register("CTCLoss", MakeCtcLoss, kInternalDomain);
  r.Register("CTCLossGrad", MakeCtcLossGrad, kInternalDomain);
}

}  // namespace ot
