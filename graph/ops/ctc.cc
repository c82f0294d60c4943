// Op schema of ai.onnxtrain.CTCLoss, the loss `--loss ctc` appends (passes/loss.cc; kernel cpu_ops/ctc.h):
//   CTCLoss(logits, labels, logit_lengths, label_lengths) {blank = 0, reduction = "mean" | "sum", zero_infinity = 0,
//     layout = "tbc" | "btc"} -> loss (a scalar of the logits' dtype)
// logits [frames, batch, classes] ("btc": [batch, frames, classes]), unnormalized (a log-softmax runs inside);
// labels [batch, max_labels] int64; the lengths [batch] int64. mean: each sample's loss divided by its label length
// (at least 1), then averaged over the batch (PyTorch's F.ctc_loss); sum: summed.
#include <string>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {

namespace {

void InferCtcLoss(InferContext& ctx) {
  ctx.RequireArity(4, 4, 1);
  const Shape& logits = ctx.Require(0);
  const DataType t = ctx.input_type(0);
  if (t != DataType::kFloat32 && t != DataType::kFloat64)
    ctx.Fail("logits must be float32 or float64, got " + DataTypeName(t));
  const std::string layout = ctx.node.attr_string("layout", "tbc");
  if (layout != "tbc" && layout != "btc") ctx.Fail("layout must be tbc or btc, not '" + layout + "'");
  const std::string red = ctx.node.attr_string("reduction", "mean");
  if (red != "mean" && red != "sum") ctx.Fail("reduction must be mean or sum, not '" + red + "'");
  if (ctx.node.attr_int("blank", 0) < 0) ctx.Fail("blank must be >= 0");
  const char* names[4] = {"logits", "labels", "logit_lengths", "label_lengths"};
  const int ranks[4] = {3, 2, 1, 1};
  for (int i = 0; i < 4; ++i) {
    ctx.Require(i);
    if (i > 0 && ctx.input_type(i) != DataType::kInt64)
      ctx.Fail(std::string(names[i]) + " must be int64, got " + DataTypeName(ctx.input_type(i)));
    const Shape& s = ctx.input_shape(i);
    if (s.known_rank() && s.rank() != ranks[i])
      ctx.Fail(std::string(names[i]) + " must have rank " + std::to_string(ranks[i]) + ", got " + s.ToString());
  }
  if (logits.known_rank()) {
    const Dim batch = logits[layout == "tbc" ? 1 : 0];
    const Dim& classes = logits[2];
    if (classes.is_static() && ctx.node.attr_int("blank", 0) >= classes.value)
      ctx.Fail("blank " + std::to_string(ctx.node.attr_int("blank", 0)) + " is not below the " +
               std::to_string(classes.value) + " classes of the logits");
    for (int i = 1; i < 4; ++i) {
      const Shape& s = ctx.input_shape(i);
      if (batch.is_static() && s.known_rank() && s[0].is_static() && s[0].value != batch.value)
        ctx.Fail(std::string(names[i]) + " " + s.ToString() + " has not the logits' batch " +
                 std::to_string(batch.value));
    }
  }
  ctx.set_output(0, t, Shape::Scalar());
}

}  // namespace

void RegisterCtcOps(OpRegistry& r) {
  OpSchema s;
  s.op_type = "CTCLoss";
  s.domain = kInternalDomain;
  s.infer = InferCtcLoss;
  r.Register(std::move(s));
}

}  // namespace ot
