// Internal ops of onnx-train (domain ai.onnxtrain) that gradient rules emit.
//   ReduceToShape(grad, shape) -> grad summed over the dims along which a tensor of `shape` was broadcast to
//     grad's shape, with `shape`'s dims (undoes numpy broadcasting).
//   ReluGrad(dY, Y) -> dY where Y > 0, else 0.
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/infer_util.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {

void RegisterInternalOps(OpRegistry& r) {
  OpSchema rts;
  rts.op_type = "ReduceToShape";
  rts.domain = kInternalDomain;
  rts.value_inputs = {1};
  rts.fusible = FusibleKind::kReduction;
  rts.infer = [](InferContext& ctx) {
    const Shape& g = ctx.input_shape(0);
    // The target's elements: known sizes, or named ones followed through the Shape that read them.
    std::optional<DimsValue> target = ctx.input_dims_value(1);
    if (!target) {
      const Shape& s = ctx.input_shape(1);
      ctx.set_output(
          0, ctx.input_type(0),
          s.known_rank() && s.rank() == 1 && s[0].is_static() ? UnknownDims(static_cast<int>(s[0].value)) : Shape());
      return;
    }
    const std::vector<Dim> out = SizesOf(ctx, *target, "target shape");
    if (g.known_rank()) {
      if (static_cast<int>(out.size()) > g.rank()) ctx.Fail("target shape has a higher rank than the gradient");
      const int off = g.rank() - static_cast<int>(out.size());
      for (size_t i = 0; i < out.size(); ++i) {
        const Dim& d = g[off + static_cast<int>(i)];
        if (out[i].is_static() && out[i].value != 1 && d.is_static() && d.value != out[i].value)
          ctx.Fail("gradient dim " + d.ToString() + " does not reduce to " + std::to_string(out[i].value));
      }
    }
    ctx.set_output(0, ctx.input_type(0), Shape(out));
  };
  r.Register(rts);

  OpSchema relu_grad;
  relu_grad.op_type = "ReluGrad";
  relu_grad.domain = kInternalDomain;
  relu_grad.fusible = FusibleKind::kElementwise;
  relu_grad.infer = [](InferContext& ctx) {
    ctx.set_output(0, ctx.input_type(0), BroadcastShapes(ctx, {ctx.input_shape(0), ctx.input_shape(1)}));
  };
  r.Register(relu_grad);
}

}  // namespace ot
