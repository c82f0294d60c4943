// Gradient rules of RNN, GRU and LSTM, and the schema of the internal op they emit (CPU kernel in
// executor/kernels/recurrent.cc over cpu_ops/rnn.h RnnBackward, which recomputes the forward: nothing is saved
// between the step's forward and backward but the operands themselves):
//   RecurrentGrad(X, W, R, B, sequence_lens, initial_h, initial_c, P, dY, dY_h, dY_c) {cell, the node's attributes,
//     layout} -> dX, dW, dR, dB, dInitial_h (RNN, GRU), and dInitial_c, dP (LSTM)
//   Absent operands (B, sequence_lens, the initial states, P) are zeros / full lengths as in the forward; an absent
//   output gradient is zero. dB, dInitial_h, dInitial_c and dP have their operand's shape whether it is present or
//   not. sequence_lens gets no gradient.
#include <string>
#include <vector>

#include "graph/grad/grad_rules.h"
#include "graph/grad_context.h"
#include "graph/op_registry.h"

namespace ot {

namespace {

void InferRecurrentGrad(InferContext& ctx) {
  const std::string cell = ctx.node.attr_string("cell", "");
  if (cell != "LSTM" && cell != "GRU" && cell != "RNN") ctx.Fail("cell must be LSTM, GRU or RNN, not '" + cell + "'");
  const Shape& x = ctx.Require(0);
  const Shape& w = ctx.Require(1);
  const Shape& r = ctx.Require(2);
  const DataType t = ctx.input_type(0);
  const bool batch_major = ctx.node.attr_int("layout", 0) == 1;
  Dim dirs, gh, hidden, batch;
  if (w.known_rank() && w.rank() == 3) dirs = w[0], gh = w[1];
  if (r.known_rank() && r.rank() == 3) hidden = r[2];
  if (x.known_rank() && x.rank() == 3) batch = batch_major ? x[0] : x[1];
  const Shape state = batch_major ? Shape({batch, dirs, hidden}) : Shape({dirs, batch, hidden});
  ctx.set_output(0, t, x);
  ctx.set_output(1, t, w);
  ctx.set_output(2, t, r);
  if (ctx.has_output(3)) ctx.set_output(3, t, Shape({dirs, gh.is_static() ? Dim(2 * gh.value) : Dim()}));
  if (ctx.has_output(4)) ctx.set_output(4, t, state);
  if (ctx.has_output(5)) ctx.set_output(5, t, state);
  if (ctx.has_output(6)) ctx.set_output(6, t, Shape({dirs, hidden.is_static() ? Dim(3 * hidden.value) : Dim()}));
}

void RecurrentRule(GradContext& c) {
  const Node& n = c.node();
  auto in = [&](int i) -> Value* { return i < static_cast<int>(n.inputs.size()) ? n.inputs[i] : nullptr; };
  const bool lstm = n.op_type == "LSTM";
  std::map<std::string, Attribute> attrs = n.attrs;
  attrs["cell"] = Attribute::String(n.op_type);
  attrs["layout"] = Attribute::Int(n.opset >= 14 ? n.attr_int("layout", 0) : 0);
  const std::vector<Value*> ins{in(0), in(1), in(2), in(3), in(4), in(5), in(6), in(7), c.dY(0), c.dY(1), c.dY(2)};
  const std::vector<Value*> outs = c.OpN("RecurrentGrad", ins, lstm ? 7 : 5, attrs, kInternalDomain);
  // Operand i's gradient is output kOut[i].
  static const int kOut[8] = {0, 1, 2, 3, -1, 4, 5, 6};
  for (int i = 0; i < 8; ++i)
    if (kOut[i] >= 0 && kOut[i] < static_cast<int>(outs.size()) && in(i) && c.needs_grad(i))
      c.SetGrad(i, outs[kOut[i]]);
}

}  // namespace

void RegisterRecurrentGrads(OpRegistry& r) {
  OpSchema s;
  s.op_type = "RecurrentGrad";
  s.domain = kInternalDomain;
  s.infer = InferRecurrentGrad;
  r.Register(s);
  for (const char* op : {"RNN", "GRU", "LSTM"}) r.SetGrad("", op, RecurrentRule, {4});
}

}  // namespace ot
