#include "executor/kernels/recurrent_geometry.h"

#include "graph/graph.h"

namespace ot {

namespace {

// Input i, when present, has the dims `want` (else fails naming it as `what`).
void Expect(const KernelContext& ctx, int i, const std::vector<int64_t>& want, const char* what) {
  if (ctx.has_input(i) && ctx.in(i).dims != want)
    ctx.Fail(std::string(what) + " has dims " + DimsToString(ctx.in(i).dims) + ", expected " + DimsToString(want));
}

}  // namespace

std::vector<int64_t> RecurrentStateDims(const cpu::RnnSpec& s) {
  const int64_t D = s.directions;
  return s.batch_major ? std::vector<int64_t>{s.batch, D, s.hidden} : std::vector<int64_t>{D, s.batch, s.hidden};
}

cpu::RnnSpec RecurrentGeometry(const KernelContext& ctx, const std::string& cell, bool batch_major) {
  const Node& n = ctx.node;
  if (cell != "LSTM" && cell != "GRU" && cell != "RNN") ctx.Fail("cell must be LSTM, GRU or RNN, not '" + cell + "'");
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
  Expect(ctx, 5, RecurrentStateDims(s), "initial_h");
  if (lstm) {
    Expect(ctx, 6, RecurrentStateDims(s), "initial_c");
    Expect(ctx, 7, {D, 3 * s.hidden}, "P");
  }
  return s;
}

cpu::RnnSpec RecurrentGradGeometry(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const cpu::RnnSpec s = RecurrentGeometry(ctx, n.attr_string("cell", ""), n.attr_int("layout", 0) == 1);
  const int64_t D = s.directions;
  Expect(ctx, 8,
         s.batch_major ? std::vector<int64_t>{s.batch, s.seq, D, s.hidden}
                       : std::vector<int64_t>{s.seq, D, s.batch, s.hidden},
         "dY");
  Expect(ctx, 9, RecurrentStateDims(s), "dY_h");
  Expect(ctx, 10, RecurrentStateDims(s), "dY_c");
  return s;
}

}  // namespace ot
