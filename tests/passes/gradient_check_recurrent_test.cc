// Float64 finite-difference checks of the RNN, GRU and LSTM gradient rules (graph/grad/recurrent_grad.cc) through
// autodiff and the executor, at static dims and at two sizes of symbolic dims: every differentiable operand (X, W,
// R, B, initial_h, initial_c, P) and each output's gradient (Y, Y_h, Y_c), with the options that change the
// backward (directions, lengths, clip, peepholes, input_forget, linear_before_reset). The kernel's own check of every
// option: tests/cpu_ops/rnn_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/passes/grad_check.h"

namespace ot {
namespace {

using test::Attrs;
using test::CheckGradients;
using test::EmitN;

struct Rnn {
  std::string op = "LSTM";
  int64_t seq = 3, batch = 2, input = 3, hidden = 2;
  int dirs = 1;
  int output = 0;  // which output the loss reads: Y, Y_h or Y_c
  bool lens = false, peep = false;
  Attrs attrs;
};

void Check(const Rnn& c) {
  const int64_t G = c.op == "LSTM" ? 4 : c.op == "GRU" ? 3 : 1, D = c.dirs, H = c.hidden;
  const bool lstm = c.op == "LSTM";
  std::vector<std::vector<int64_t>> dims = {
      {c.seq, c.batch, c.input}, {D, G * H, c.input}, {D, G * H, H}, {D, 2 * G * H}, {D, c.batch, H}};
  if (lstm) dims.push_back({D, c.batch, H});
  if (c.peep) dims.push_back({D, 3 * H});
  // The second size of the symbolic check: two more steps and one more sequence.
  std::vector<std::vector<int64_t>> second = dims;
  second[0] = {c.seq + 2, c.batch + 1, c.input};
  second[4] = {D, c.batch + 1, H};
  if (lstm) second[5] = {D, c.batch + 1, H};
  std::vector<int64_t> out =
      c.output == 0 ? std::vector<int64_t>{c.seq, D, c.batch, H} : std::vector<int64_t>{D, c.batch, H};
  auto body = [&](Graph& g, const std::vector<Value*>& p) -> Value* {
    Value* lens = nullptr;
    if (c.lens) {
      // [S, S-1, ..., S-1] from X's shape (valid at both symbolic sizes): the first sequence full, the others short.
      auto ints = [&](const char* name, int64_t v) { return g.AddInitializer(name, Tensor::FromInt64({v}, {1})); };
      Value* shape = test::Emit(g, "Shape", {p[0]});
      Value* seq = test::Emit(g, "Slice", {shape, ints("k_0", 0), ints("k_1", 1)});
      Value* batch = test::Emit(g, "Slice", {shape, ints("k_2", 1), ints("k_3", 2)});
      Value* shorter = test::Emit(g, "Sub", {test::Emit(g, "Expand", {seq, batch}), ints("k_4", 1)});
      Value* rest = test::Emit(g, "Slice", {shorter, ints("k_5", 1), ints("k_6", int64_t{1} << 40)});
      lens = test::Emit(g, "Cast", {test::Emit(g, "Concat", {seq, rest}, {{"axis", Attribute::Int(0)}})},
                        {{"to", Attribute::Int(static_cast<int64_t>(DataType::kInt32))}});
    }
    std::vector<Value*> ins{p[0], p[1], p[2], p[3], lens, p[4]};
    if (lstm) {
      ins.push_back(p[5]);
      ins.push_back(c.peep ? p[6] : nullptr);
    }
    Attrs a = c.attrs;
    a["hidden_size"] = Attribute::Int(H);
    if (D == 2) a["direction"] = Attribute::String("bidirectional");
    return EmitN(g, c.op, ins, lstm ? 3 : 2, a)[c.output];
  };
  CheckGradients(dims, out, body, 14, -1, 1, second);
}

TEST(GradientCheck, LstmEveryOperandAndOutput) {
  Rnn c;
  c.dirs = 2, c.peep = true, c.lens = true;
  for (int o : {0, 1, 2}) {
    c.output = o;
    Check(c);
  }
}

TEST(GradientCheck, LstmClipInputForgetReverse) {
  Rnn c;
  c.attrs = {{"clip", Attribute::Float(0.8f)},
             {"input_forget", Attribute::Int(1)},
             {"direction", Attribute::String("reverse")}};
  c.peep = true;
  Check(c);
}

TEST(GradientCheck, GruBothResetOrders) {
  for (int lbr : {0, 1}) {
    Rnn c;
    c.op = "GRU";
    c.dirs = 2, c.lens = true;
    c.attrs = {{"linear_before_reset", Attribute::Int(lbr)}};
    for (int o : {0, 1}) {
      c.output = o;
      Check(c);
    }
  }
}

TEST(GradientCheck, RnnReverseWithLengths) {
  Rnn c;
  c.op = "RNN";
  c.lens = true;
  c.attrs = {{"direction", Attribute::String("reverse")}};
  Check(c);
  c.output = 1;
  c.attrs["clip"] = Attribute::Float(0.9f);
  Check(c);
}

}  // namespace
}  // namespace ot
