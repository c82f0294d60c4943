// CPU kernels of RNN, GRU and LSTM, forward and backward (ai.onnxtrain.RecurrentGrad): float32, and float16/bfloat16
// (mixed precision: operands converted, everything inside in float32), on oneDNN's RNN primitives where a node matches
// them and on oneDNN GEMMs otherwise (cpu_ops/rnn_kernel.h chooses; made with the plan); float64 on the loop kernels
// of cpu_ops/rnn.h.
// The schema (graph/ops/recurrent.cc) has checked the operands' dtypes and the activations; the sizes against the
// concrete dims: recurrent_geometry.h.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_ops/dnnl_util.h"
#include "cpu_ops/rnn.h"
#include "cpu_ops/rnn_kernel.h"
#include "executor/kernel_registry.h"
#include "executor/kernels/recurrent_geometry.h"
#include "graph/graph.h"

namespace ot {

namespace {

// The float32 operands of a call: the buffers themselves for float32; for float16 and bfloat16 (mixed precision)
// float copies of the inputs, and float outputs that Finish() rounds into the call's buffers -- the GEMMs, gates and
// states all in float32. Element counts < 0 mark absent operands (null). The copies are carved from `copies`
// (CopyBytes of them; null: allocated here).
class FloatView {
 public:
  static size_t CopyBytes(DataType dt, const std::vector<int64_t>& ins, const std::vector<int64_t>& outs) {
    if (dt == DataType::kFloat32) return 0;
    size_t n = 0;
    for (const auto* v : {&ins, &outs})
      for (int64_t e : *v)
        if (e > 0) n += static_cast<size_t>(e + 15) / 16 * 16;
    return n * sizeof(float);
  }
  FloatView(const KernelIO& io, DataType dt, const std::vector<int64_t>& ins, const std::vector<int64_t>& outs,
            void* copies)
      : io_(io),
        half_(dt != DataType::kFloat32),
        type_(dt == DataType::kFloat16 ? cpu::DnnType::kF16 : cpu::DnnType::kBF16),
        outs_(outs),
        in_(ins.size()),
        out_(outs.size()) {
    float* next = static_cast<float*>(copies);
    if (half_ && !next) {
      own_.resize(CopyBytes(dt, ins, outs) / sizeof(float));
      next = own_.data();
    }
    auto take = [&](int64_t n) {
      float* p = next;
      next += (n + 15) / 16 * 16;
      return p;
    };
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i] < 0) continue;
      if (!half_) {
        in_[i] = io.In<float>(static_cast<int>(i));
        continue;
      }
      float* c = take(ins[i]);
      cpu::ToFloat(type_, io.in[i], c, ins[i]);
      in_[i] = c;
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i] < 0) continue;
      out_[i] = half_ ? take(outs[i]) : io.Out<float>(static_cast<int>(i));
    }
  }
  const float* in(int i) const { return in_[static_cast<size_t>(i)]; }
  float* out(int i) const { return out_[static_cast<size_t>(i)]; }
  void Finish() const {
    if (!half_) return;
    for (size_t i = 0; i < outs_.size(); ++i)
      if (outs_[i] >= 0) cpu::FromFloat(type_, out_[i], io_.out[i], outs_[i]);
  }

 private:
  const KernelIO& io_;
  bool half_;
  cpu::DnnType type_;
  std::vector<int64_t> outs_;
  std::vector<const float*> in_;
  std::vector<float*> out_;
  std::vector<float> own_;
};

cpu::DnnType IoType(DataType t) {
  return t == DataType::kFloat16    ? cpu::DnnType::kF16
         : t == DataType::kBFloat16 ? cpu::DnnType::kBF16
                                    : cpu::DnnType::kF32;
}

// Element counts of a call's float operands (inputs in `float_inputs` that are present; present outputs), -1
// otherwise.
std::vector<int64_t> InputCounts(const KernelContext& ctx, int count, std::initializer_list<int> non_float) {
  std::vector<int64_t> r(static_cast<size_t>(count), -1);
  for (int i = 0; i < count; ++i)
    if (ctx.has_input(i) && std::find(non_float.begin(), non_float.end(), i) == non_float.end())
      r[static_cast<size_t>(i)] = ctx.in(i).numel();
  return r;
}
std::vector<int64_t> OutputCounts(const KernelContext& ctx, int count) {
  std::vector<int64_t> r(static_cast<size_t>(count), -1);
  for (int i = 0; i < count; ++i)
    if (ctx.has_output(i)) r[static_cast<size_t>(i)] = ctx.out(i).numel();
  return r;
}

// The kernel's workspace, and what oneDNN's primitives need beside it: one OpenMP team (run alone) and the heap of
// their calls (the training forward, the backward and the weights' reorders).
void Declare(KernelInfo& k, const cpu::RnnKernel& kernel, size_t workspace) {
  k.workspace_bytes = workspace;
  k.exclusive = kernel.exclusive();
  if (kernel.exclusive()) k.heap_bytes = 2 * cpu::DnnlCallHeapBytes(24);
}

double Flops(const cpu::RnnSpec& s) {
  return 2.0 * static_cast<double>(s.directions * s.seq * s.batch * s.gates() * s.hidden * (s.input + s.hidden));
}

KernelInfo MakeRecurrent(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const cpu::RnnSpec s = RecurrentGeometry(ctx, n.op_type, n.opset >= 14 && n.attr_int("layout", 0) == 1);
  const bool lstm = s.cell == cpu::RnnCell::kLstm;
  const DataType dt = ctx.in(0).dtype;
  const bool has_b = ctx.has_input(3), has_lens = ctx.has_input(4), has_h0 = ctx.has_input(5);
  const bool has_c0 = lstm && ctx.has_input(6), has_p = lstm && ctx.has_input(7);
  const bool y = ctx.has_output(0), y_h = ctx.has_output(1), y_c = lstm && ctx.has_output(2);
  const std::string where = n.Describe();
  std::shared_ptr<const cpu::RnnKernel> gemm;
  if (dt != DataType::kFloat64) gemm = cpu::MakeRnnKernel(s, IoType(dt), has_lens, has_p);
  // X and Y go to the kernel in their own type (it converts them a chunk at a time); the small operands as float.
  std::vector<int64_t> ins = InputCounts(ctx, 8, {0, 4}), outs = OutputCounts(ctx, 3);
  outs[0] = -1;
  if (!lstm) ins[6] = ins[7] = outs[2] = -1;
  // Workspace: the GEMM path's scratch, then the float copies of half operands.
  const size_t scratch = gemm ? (gemm->forward_workspace_bytes() + 63) / 64 * 64 : 0;
  KernelInfo k{[=](const KernelIO& io) {
    try {
      if (gemm) {
        uint8_t* ws = static_cast<uint8_t*>(io.workspace);
        const FloatView f(io, dt, ins, outs, ws ? ws + scratch : nullptr);
        gemm->Forward(io.in[0], f.in(1), f.in(2), f.in(3), has_lens ? io.In<int32_t>(4) : nullptr, f.in(5), f.in(6),
                      f.in(7), y ? io.out[0] : nullptr, f.out(1), f.out(2), ws);
        f.Finish();
        return;
      }
      cpu::RnnForward<double>(s, io.In<double>(0), io.In<double>(1), io.In<double>(2),
                              has_b ? io.In<double>(3) : nullptr, has_lens ? io.In<int32_t>(4) : nullptr,
                              has_h0 ? io.In<double>(5) : nullptr, has_c0 ? io.In<double>(6) : nullptr,
                              has_p ? io.In<double>(7) : nullptr, y ? io.Out<double>(0) : nullptr,
                              y_h ? io.Out<double>(1) : nullptr, y_c ? io.Out<double>(2) : nullptr);
    } catch (const std::invalid_argument& e) {
      throw Error(where + ": " + e.what());
    }
  }};
  k.flops = Flops(s);
  if (gemm) Declare(k, *gemm, scratch + FloatView::CopyBytes(dt, ins, outs));
  return k;
}

// ai.onnxtrain.RecurrentGrad (graph/grad/recurrent_grad.cc): inputs 0-7 the forward's, 8-10 dY, dY_h, dY_c.
KernelInfo MakeRecurrentGrad(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const cpu::RnnSpec s = RecurrentGradGeometry(ctx);
  const bool lstm = s.cell == cpu::RnnCell::kLstm;
  const DataType dt = ctx.in(0).dtype;
  std::vector<bool> in(11), out(7);
  for (int i = 0; i < 11; ++i) in[i] = ctx.has_input(i) && (lstm || (i != 6 && i != 7 && i != 10));
  for (int i = 0; i < 7; ++i) out[i] = ctx.has_output(i);
  const std::string where = n.Describe();
  std::shared_ptr<const cpu::RnnKernel> gemm;
  if (dt != DataType::kFloat64) gemm = cpu::MakeRnnKernel(s, IoType(dt), in[4], in[7]);
  // X, dY and dX in their own type (converted a chunk at a time by the kernel); the small operands as float.
  std::vector<int64_t> ins = InputCounts(ctx, 11, {0, 4, 8}), outs = OutputCounts(ctx, 7);
  outs[0] = -1;
  for (int i = 0; i < 11; ++i)
    if (!in[i]) ins[static_cast<size_t>(i)] = -1;
  const size_t scratch = gemm ? (gemm->backward_workspace_bytes() + 63) / 64 * 64 : 0;
  KernelInfo k{[=](const KernelIO& io) {
    try {
      if (gemm) {
        uint8_t* ws = static_cast<uint8_t*>(io.workspace);
        const FloatView f(io, dt, ins, outs, ws ? ws + scratch : nullptr);
        gemm->Backward(io.in[0], f.in(1), f.in(2), f.in(3), in[4] ? io.In<int32_t>(4) : nullptr, f.in(5), f.in(6),
                       f.in(7), in[8] ? io.in[8] : nullptr, f.in(9), f.in(10), out[0] ? io.out[0] : nullptr, f.out(1),
                       f.out(2), f.out(3), f.out(4), f.out(5), f.out(6), ws);
        f.Finish();
        return;
      }
      auto i_ = [&](int i) { return in[i] ? io.In<double>(i) : nullptr; };
      auto o_ = [&](int i) { return out[i] ? io.Out<double>(i) : nullptr; };
      cpu::RnnBackward<double>(s, io.In<double>(0), io.In<double>(1), io.In<double>(2), i_(3),
                               in[4] ? io.In<int32_t>(4) : nullptr, i_(5), i_(6), i_(7), i_(8), i_(9), i_(10), o_(0),
                               o_(1), o_(2), o_(3), o_(4), o_(5), o_(6));
    } catch (const std::invalid_argument& e) {
      throw Error(where + ": " + e.what());
    }
  }};
  k.flops = 2 * Flops(s);  // the recomputed forward and the backward's GEMM-like work
  if (gemm) Declare(k, *gemm, scratch + FloatView::CopyBytes(dt, ins, outs));
  return k;
}

}  // namespace

void RegisterRecurrentKernels(KernelRegistry& r) {
  r.Register("RNN", MakeRecurrent);
  r.Register("GRU", MakeRecurrent);
  r.Register("LSTM", MakeRecurrent);
  r.Register("RecurrentGrad", MakeRecurrentGrad, kInternalDomain);
}

}  // namespace ot
