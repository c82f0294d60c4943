// CPU kernels of RNN, GRU and LSTM (cpu_ops/rnn.h), forward. The schema (graph/ops/recurrent.cc) has checked the
// operands' dtypes and the activations; the sizes are checked here against the concrete dims.
#include <stdexcept>
#include <string>

#include "cpu_ops/rnn.h"
#include "executor/kernel_registry.h"
#include "graph/graph.h"

namespace ot {

namespace {

KernelInfo MakeRecurrent(const KernelContext& ctx) {
  const Node& n = ctx.node;
  cpu::RnnSpec s;
  s.cell = n.op_type == "LSTM" ? cpu::RnnCell::kLstm : n.op_type == "GRU" ? cpu::RnnCell::kGru : cpu::RnnCell::kRnn;
  const bool lstm = s.cell == cpu::RnnCell::kLstm;
  const std::string dir = n.attr_string("direction", "forward");
  s.directions = dir == "bidirectional" ? 2 : 1;
  s.reverse = dir == "reverse";
  s.batch_major = n.opset >= 14 && n.attr_int("layout", 0) == 1;
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
  auto expect = [&](int i, std::vector<int64_t> want, const char* what) {
    if (ctx.has_input(i) && ctx.in(i).dims != want)
      ctx.Fail(std::string(what) + " has dims " + DimsToString(ctx.in(i).dims) + ", expected " + DimsToString(want));
  };
  const int64_t D = s.directions;
  expect(1, {D, gh, s.input}, "W");
  expect(2, {D, gh, s.hidden}, "R");
  expect(3, {D, 2 * gh}, "B");
  expect(4, {s.batch}, "sequence_lens");
  const std::vector<int64_t> state =
      s.batch_major ? std::vector<int64_t>{s.batch, D, s.hidden} : std::vector<int64_t>{D, s.batch, s.hidden};
  expect(5, state, "initial_h");
  if (lstm) {
    expect(6, state, "initial_c");
    expect(7, {D, 3 * s.hidden}, "P");
  }
  const DataType dt = ctx.in(0).dtype;
  const bool has_b = ctx.has_input(3), has_lens = ctx.has_input(4), has_h0 = ctx.has_input(5);
  const bool has_c0 = lstm && ctx.has_input(6), has_p = lstm && ctx.has_input(7);
  const bool y = ctx.has_output(0), y_h = ctx.has_output(1), y_c = lstm && ctx.has_output(2);
  const std::string where = n.Describe();
  KernelInfo k{[=](const KernelIO& io) {
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
  k.flops = 2.0 * static_cast<double>(D * s.seq * s.batch * gh * (s.input + s.hidden));
  return k;
}

}  // namespace

void RegisterRecurrentKernels(KernelRegistry& r) {
  r.Register("RNN", MakeRecurrent);
  r.Register("GRU", MakeRecurrent);
  r.Register("LSTM", MakeRecurrent);
}

}  // namespace ot
