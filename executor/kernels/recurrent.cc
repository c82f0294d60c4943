// CPU kernels of RNN, GRU and LSTM, forward and backward (ai.onnxtrain.RecurrentGrad): float32 on oneDNN GEMMs
// (cpu_ops/rnn_gemm.h, its primitives made with the plan), other float types on the loop kernels of cpu_ops/rnn.h.
// The schema
// (graph/ops/recurrent.cc) has checked the operands' dtypes and the activations; the sizes are checked here against the
// concrete dims.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_ops/rnn.h"
#include "cpu_ops/rnn_gemm.h"
#include "executor/kernel_registry.h"
#include "graph/graph.h"

namespace ot {

namespace {

std::vector<int64_t> StateDims(const cpu::RnnSpec& s) {
  const int64_t D = s.directions;
  return s.batch_major ? std::vector<int64_t>{s.batch, D, s.hidden} : std::vector<int64_t>{D, s.batch, s.hidden};
}

// Input i, when present, has the dims `want` (else fails naming it as `what`).
void Expect(const KernelContext& ctx, int i, const std::vector<int64_t>& want, const char* what) {
  if (ctx.has_input(i) && ctx.in(i).dims != want)
    ctx.Fail(std::string(what) + " has dims " + DimsToString(ctx.in(i).dims) + ", expected " + DimsToString(want));
}

double Flops(const cpu::RnnSpec& s) {
  return 2.0 * static_cast<double>(s.directions * s.seq * s.batch * s.gates() * s.hidden * (s.input + s.hidden));
}

// The spec of a node: `cell` is LSTM, GRU or RNN; `batch_major`: layout 1. Checks every operand's dims (inputs 0-7
// as the forward op numbers them).
cpu::RnnSpec SpecOf(const KernelContext& ctx, const std::string& cell, bool batch_major) {
  const Node& n = ctx.node;
  cpu::RnnSpec s;
  s.cell = cell == "LSTM" ? cpu::RnnCell::kLstm : cell == "GRU" ? cpu::RnnCell::kGru : cpu::RnnCell::kRnn;
  const bool lstm = s.cell == cpu::RnnCell::kLstm;
  const std::string dir = n.attr_string("direction", "forward");
  s.directions = dir == "bidirectional" ? 2 : 1;
  s.reverse = dir == "reverse";
  s.batch_major = batch_major;
  s.clip = n.has_attr("clip") ? n.attr_float("clip", 0.f) : 0.f;
  if (n.has_attr("clip") && !(s.clip > 0)) ctx.Fail("clip must be > 0");
  s.input_forget = lstm && n.attr_int("input_forget", 0) != 0;
  s.linear_before_reset = s.cell == cpu::RnnCell::kGru && n.attr_int("linear_before_reset", 0) != 0;
  const auto& x = ctx.in(0).dims;
  const auto& w = ctx.in(1).dims;
  const auto& r = ctx.in(2).dims;
  if (x.size() != 3 || w.size() != 3 || r.size() != 3) ctx.Fail("X, W and R must have rank 3");
  s.seq = s.batch_major ? x[1] : x[0];
  s.batch = s.batch_major ? x[0] : x[1];
  s.input = x[2];
  s.hidden = r[2];
  const int64_t gh = s.gates() * s.hidden;
  if (n.has_attr("hidden_size") && n.attr_int("hidden_size", 0) != s.hidden)
    ctx.Fail("hidden_size " + std::to_string(n.attr_int("hidden_size", 0)) + " is not R's last dim " +
             std::to_string(s.hidden));
  const int64_t D = s.directions;
  Expect(ctx, 1, {D, gh, s.input}, "W");
  Expect(ctx, 2, {D, gh, s.hidden}, "R");
  Expect(ctx, 3, {D, 2 * gh}, "B");
  Expect(ctx, 4, {s.batch}, "sequence_lens");
  Expect(ctx, 5, StateDims(s), "initial_h");
  if (lstm) {
    Expect(ctx, 6, StateDims(s), "initial_c");
    Expect(ctx, 7, {D, 3 * s.hidden}, "P");
  }
  return s;
}

KernelInfo MakeRecurrent(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const cpu::RnnSpec s = SpecOf(ctx, n.op_type, n.opset >= 14 && n.attr_int("layout", 0) == 1);
  const bool lstm = s.cell == cpu::RnnCell::kLstm;
  const DataType dt = ctx.in(0).dtype;
  const bool has_b = ctx.has_input(3), has_lens = ctx.has_input(4), has_h0 = ctx.has_input(5);
  const bool has_c0 = lstm && ctx.has_input(6), has_p = lstm && ctx.has_input(7);
  const bool y = ctx.has_output(0), y_h = ctx.has_output(1), y_c = lstm && ctx.has_output(2);
  const std::string where = n.Describe();
  std::shared_ptr<const cpu::RnnGemm> gemm;
  if (dt == DataType::kFloat32) gemm = std::make_shared<const cpu::RnnGemm>(s);
  KernelInfo k{[=](const KernelIO& io) {
    if (gemm) {
      auto f = [&](bool has, int i) { return has ? io.In<float>(i) : nullptr; };
      try {
        gemm->Forward(io.In<float>(0), io.In<float>(1), io.In<float>(2), f(has_b, 3),
                      has_lens ? io.In<int32_t>(4) : nullptr, f(has_h0, 5), f(has_c0, 6), f(has_p, 7),
                      y ? io.Out<float>(0) : nullptr, y_h ? io.Out<float>(1) : nullptr,
                      y_c ? io.Out<float>(2) : nullptr);
      } catch (const std::invalid_argument& e) {
        throw Error(where + ": " + e.what());
      }
      return;
    }
    DispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      try {
        cpu::RnnForward<T>(s, io.In<T>(0), io.In<T>(1), io.In<T>(2), has_b ? io.In<T>(3) : nullptr,
                           has_lens ? io.In<int32_t>(4) : nullptr, has_h0 ? io.In<T>(5) : nullptr,
                           has_c0 ? io.In<T>(6) : nullptr, has_p ? io.In<T>(7) : nullptr, y ? io.Out<T>(0) : nullptr,
                           y_h ? io.Out<T>(1) : nullptr, y_c ? io.Out<T>(2) : nullptr);
      } catch (const std::invalid_argument& e) {
        throw Error(where + ": " + e.what());
      }
    });
  }};
  k.flops = Flops(s);
  return k;
}

// ai.onnxtrain.RecurrentGrad (graph/grad/recurrent_grad.cc): inputs 0-7 the forward's, 8-10 dY, dY_h, dY_c.
KernelInfo MakeRecurrentGrad(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const cpu::RnnSpec s = SpecOf(ctx, n.attr_string("cell", ""), n.attr_int("layout", 0) == 1);
  const bool lstm = s.cell == cpu::RnnCell::kLstm;
  const int64_t D = s.directions;
  Expect(ctx, 8,
         s.batch_major ? std::vector<int64_t>{s.batch, s.seq, D, s.hidden}
                       : std::vector<int64_t>{s.seq, D, s.batch, s.hidden},
         "dY");
  Expect(ctx, 9, StateDims(s), "dY_h");
  Expect(ctx, 10, StateDims(s), "dY_c");
  const DataType dt = ctx.in(0).dtype;
  std::vector<bool> in(11), out(7);
  for (int i = 0; i < 11; ++i) in[i] = ctx.has_input(i) && (lstm || (i != 6 && i != 7 && i != 10));
  for (int i = 0; i < 7; ++i) out[i] = ctx.has_output(i);
  const std::string where = n.Describe();
  std::shared_ptr<const cpu::RnnGemm> gemm;
  if (dt == DataType::kFloat32) gemm = std::make_shared<const cpu::RnnGemm>(s);
  KernelInfo k{[=](const KernelIO& io) {
    if (gemm) {
      auto i_ = [&](int i) { return in[i] ? io.In<float>(i) : nullptr; };
      auto o_ = [&](int i) { return out[i] ? io.Out<float>(i) : nullptr; };
      try {
        gemm->Backward(io.In<float>(0), io.In<float>(1), io.In<float>(2), i_(3), in[4] ? io.In<int32_t>(4) : nullptr,
                       i_(5), i_(6), i_(7), i_(8), i_(9), i_(10), o_(0), o_(1), o_(2), o_(3), o_(4), o_(5), o_(6));
      } catch (const std::invalid_argument& e) {
        throw Error(where + ": " + e.what());
      }
      return;
    }
    DispatchFloat(dt, [&](auto tag) {
      using T = decltype(tag);
      auto i_ = [&](int i) { return in[i] ? io.In<T>(i) : nullptr; };
      auto o_ = [&](int i) { return out[i] ? io.Out<T>(i) : nullptr; };
      try {
        cpu::RnnBackward<T>(s, io.In<T>(0), io.In<T>(1), io.In<T>(2), i_(3), in[4] ? io.In<int32_t>(4) : nullptr, i_(5),
                            i_(6), i_(7), i_(8), i_(9), i_(10), o_(0), o_(1), o_(2), o_(3), o_(4), o_(5), o_(6));
      } catch (const std::invalid_argument& e) {
        throw Error(where + ": " + e.what());
      }
    });
  }};
  k.flops = 2 * Flops(s);  // the recomputed forward and the backward's GEMM-like work
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
