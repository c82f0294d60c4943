// Op schemas of the recurrent layers: RNN, GRU and LSTM (opset 7 on; layout from opset 14). Inputs X, W, R, then
// optional B, sequence_lens, initial_h, (LSTM) initial_c and P; outputs Y, Y_h, (LSTM) Y_c, each optional. Only the
// default activations run (cpu_ops/rnn.h); any other list is refused naming the node.
#include <string>
#include <vector>

#include "graph/infer_util.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {

namespace {

struct Cell {
  const char* op;
  int gates;
  std::vector<std::string> activations;  // the defaults of one direction
};

const Cell kRnn{"RNN", 1, {"Tanh"}};
const Cell kGru{"GRU", 3, {"Sigmoid", "Tanh"}};
const Cell kLstm{"LSTM", 4, {"Sigmoid", "Tanh", "Tanh"}};

// The number of directions of `direction`; fails on anything but forward, reverse and bidirectional.
int Directions(const InferContext& ctx) {
  const std::string d = ctx.node.attr_string("direction", "forward");
  if (d == "forward" || d == "reverse") return 1;
  if (d == "bidirectional") return 2;
  ctx.Fail("direction must be forward, reverse or bidirectional, not '" + d + "'");
}

// Activation names compare without case (exporters write Tanh or tanh).
std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void CheckActivations(const InferContext& ctx, const Cell& cell, int dirs) {
  const Attribute* a = ctx.node.attr("activations");
  if (!a) return;
  std::vector<std::string> want;
  for (int d = 0; d < dirs; ++d) want.insert(want.end(), cell.activations.begin(), cell.activations.end());
  bool same = a->strings.size() == want.size();
  for (size_t i = 0; same && i < want.size(); ++i) same = Lower(a->strings[i]) == Lower(want[i]);
  if (same) return;
  std::string got, def;
  for (const std::string& s : a->strings) got += (got.empty() ? "" : ", ") + s;
  for (const std::string& s : want) def += (def.empty() ? "" : ", ") + s;
  ctx.Unsupported("activations [" + got + "] are not supported (only the defaults [" + def + "])");
}

// Dims of a known-rank input, or fails naming it.
void CheckRank(const InferContext& ctx, int i, int rank, const char* what) {
  const Shape& s = ctx.input_shape(i);
  if (s.known_rank() && s.rank() != rank)
    ctx.Fail(std::string(what) + " must have rank " + std::to_string(rank) + ", got " + s.ToString());
}

void CheckDim(const InferContext& ctx, int i, int axis, const Dim& want, const char* what) {
  const Shape& s = ctx.input_shape(i);
  if (!s.known_rank() || s.rank() <= axis || !want.is_static() || !s[axis].is_static()) return;
  if (s[axis].value != want.value)
    ctx.Fail(std::string(what) + " " + s.ToString() + ": dim " + std::to_string(axis) + " must be " +
             std::to_string(want.value));
}

void InferRecurrent(InferContext& ctx, const Cell& cell) {
  const bool lstm = cell.gates == 4;
  ctx.RequireArity(3, lstm ? 8 : 6, lstm ? 3 : 2);
  const Shape& x = ctx.Require(0);
  ctx.Require(1);
  ctx.Require(2);
  const DataType t = ctx.input_type(0);
  if (!IsFloat(t)) ctx.Fail("X must be a float tensor, got " + DataTypeName(t));
  for (int i : {1, 2, 3, 5, 6, 7})
    if (ctx.has_input(i) && ctx.input_type(i) != t)
      ctx.Fail("input " + std::to_string(i) + " must be " + DataTypeName(t) + " (X's dtype), got " +
               DataTypeName(ctx.input_type(i)));
  if (ctx.has_input(4) && ctx.input_type(4) != DataType::kInt32)
    ctx.Fail("sequence_lens must be int32, got " + DataTypeName(ctx.input_type(4)));
  const int dirs = Directions(ctx);
  CheckActivations(ctx, cell, dirs);
  if (cell.gates != 4 && ctx.node.attr_int("input_forget", 0) != 0) ctx.Fail("input_forget is an LSTM attribute");
  const int64_t layout = ctx.opset() >= 14 ? ctx.node.attr_int("layout", 0) : 0;
  if (layout != 0 && layout != 1) ctx.Fail("layout must be 0 or 1, got " + std::to_string(layout));
  CheckRank(ctx, 0, 3, "X");
  CheckRank(ctx, 1, 3, "W");
  CheckRank(ctx, 2, 3, "R");
  const Shape& r = ctx.input_shape(2);
  Dim hidden = ctx.node.has_attr("hidden_size") ? Dim(ctx.node.attr_int("hidden_size", 0)) : Dim();
  if (!hidden.is_static() && r.known_rank() && r[2].is_static()) hidden = r[2];
  if (hidden.is_static() && hidden.value <= 0) ctx.Fail("hidden_size must be > 0");
  const Dim gh = hidden.is_static() ? Dim(cell.gates * hidden.value) : Dim();
  CheckDim(ctx, 1, 0, dirs, "W");
  CheckDim(ctx, 1, 1, gh, "W");
  CheckDim(ctx, 2, 0, dirs, "R");
  CheckDim(ctx, 2, 1, gh, "R");
  CheckDim(ctx, 2, 2, hidden, "R");
  if (x.known_rank()) CheckDim(ctx, 1, 2, x[2], "W");
  if (ctx.has_input(3)) {
    CheckRank(ctx, 3, 2, "B");
    CheckDim(ctx, 3, 0, dirs, "B");
    CheckDim(ctx, 3, 1, gh.is_static() ? Dim(2 * gh.value) : Dim(), "B");
  }
  if (lstm && ctx.has_input(7)) {
    CheckRank(ctx, 7, 2, "P");
    CheckDim(ctx, 7, 0, dirs, "P");
    CheckDim(ctx, 7, 1, hidden.is_static() ? Dim(3 * hidden.value) : Dim(), "P");
  }
  Dim seq, batch;
  if (x.known_rank()) {
    seq = layout == 0 ? x[0] : x[1];
    batch = layout == 0 ? x[1] : x[0];
  }
  if (ctx.has_input(4)) {
    CheckRank(ctx, 4, 1, "sequence_lens");
    CheckDim(ctx, 4, 0, batch, "sequence_lens");
  }
  const Shape state = layout == 0 ? Shape({Dim(dirs), batch, hidden}) : Shape({batch, Dim(dirs), hidden});
  for (int i : {5, 6})
    if (ctx.has_input(i) && (i == 5 || lstm)) {
      const Shape& s = ctx.input_shape(i);
      CheckRank(ctx, i, 3, i == 5 ? "initial_h" : "initial_c");
      for (int a = 0; a < 3 && s.known_rank(); ++a) CheckDim(ctx, i, a, state[a], i == 5 ? "initial_h" : "initial_c");
    }
  if (ctx.has_output(0))
    ctx.set_output(0, t, layout == 0 ? Shape({seq, Dim(dirs), batch, hidden}) : Shape({batch, seq, Dim(dirs), hidden}));
  if (ctx.has_output(1)) ctx.set_output(1, t, state);
  if (lstm && ctx.has_output(2)) ctx.set_output(2, t, state);
}

void Add(OpRegistry& r, const Cell& cell) {
  OpSchema s;
  s.op_type = cell.op;
  s.min_opset = 7;
  s.infer = [&cell](InferContext& ctx) { InferRecurrent(ctx, cell); };
  r.Register(std::move(s));
}

}  // namespace

void RegisterRecurrentOps(OpRegistry& r) {
  Add(r, kRnn);
  Add(r, kGru);
  Add(r, kLstm);
}

}  // namespace ot
