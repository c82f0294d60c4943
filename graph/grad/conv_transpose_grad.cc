// Gradient rules of ConvTranspose and GlobalMaxPool.
//
// ConvTranspose(X, W) is the adjoint (in its input) of the convolution C_W with the same W, strides, dilations,
// group and pads that maps a Y-shaped tensor to an X-shaped one: <dY, C_W^T X> = <C_W dY, X>. So
//   dX = Conv(dY, W)                              {strides, dilations, group, pads}
//   dW = ConvGradWeight(X, dY, shape(W))          (conv_grad.cc's weight gradient with dY and X swapped: the
//                                                  convolution's input is dY and its output gradient is X)
//   dB = ReduceSum(dY) over N and the spatial axes
// The pads are the ones the forward used (explicit, from auto_pad, or from output_shape: graph/ops/
// linalg_util.h ConvTransposeAxis); output_padding rows sit past pad_end, where the convolution reads them but
// its output size (floor division) is X's as long as output_padding < stride, which ONNX requires.
//
// GlobalMaxPool is MaxPool with the window covering the spatial dims: its gradient is MaxPoolGrad {global = 1} (the
// kernel takes that window from X's dims when the plan is made), dY going to the first maximum of each plane (as
// torch's adaptive_max_pool / max_pool backward).
#include <algorithm>

#include "graph/grad/grad_rules.h"
#include "graph/grad/grad_util.h"
#include "graph/op_registry.h"
#include "graph/ops/linalg_util.h"

namespace ot {

namespace {

// The spatial dims of X or W (-1 where not static), checking the rank.
std::vector<int64_t> SpatialDims(GradContext& c, const Value* v, const std::string& what) {
  const int rank = grad::Rank(c, v, what);
  if (rank < 3) c.Fail(what + " must have rank >= 3");
  std::vector<int64_t> d;
  for (int i = 2; i < rank; ++i) d.push_back(v->shape[i].is_static() ? v->shape[i].value : -1);
  return d;
}

void ConvTransposeGrad(GradContext& c) {
  const Node& n = c.node();
  const std::vector<int64_t> xs = SpatialDims(c, c.X(0), "X"), ws = SpatialDims(c, c.X(1), "W");
  const int r = static_cast<int>(xs.size());
  if (static_cast<int>(ws.size()) != r) c.Fail("W's rank differs from X's");
  const auto ones = std::vector<int64_t>(r, 1);
  const std::vector<int64_t> strides = n.attr_ints("strides", ones);
  const std::vector<int64_t> dilations = n.attr_ints("dilations", ones);
  const std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * r, 0));
  const std::vector<int64_t> out_pad = n.attr_ints("output_padding", std::vector<int64_t>(r, 0));
  std::vector<int64_t> out_shape = n.attr_ints("output_shape");
  if (static_cast<int>(out_shape.size()) == r + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (static_cast<int>(strides.size()) != r || static_cast<int>(dilations.size()) != r ||
      static_cast<int>(pads.size()) != 2 * r || static_cast<int>(out_pad.size()) != r ||
      (!out_shape.empty() && static_cast<int>(out_shape.size()) != r))
    c.Fail("strides, dilations, pads, output_padding or output_shape do not match the spatial rank");

  // The convolution's pads depend on X's size only where output_shape or SAME padding sets the output's. Where that
  // size is known only when the step runs, dY is padded (or cropped) by pads computed in the step graph instead, and
  // the convolutions take no pads of their own.
  const bool out_sized = !out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  bool dynamic = false;
  for (int i = 0; i < r; ++i) dynamic |= out_sized && (xs[i] < 0 || ws[i] < 0);
  std::vector<int64_t> conv_pads(2 * r, 0);
  Value* dy = c.dY(0);
  if (dynamic) {
    if (n.opset < 11) c.Fail("X's and W's spatial dims must be static before opset 11 (Pad takes no pads input)");
    const grad::SizeElem zero{0, nullptr}, one{1, nullptr};
    std::vector<grad::SizeElem> begin{zero, zero}, end{zero, zero};
    for (int i = 0; i < r; ++i) {
      const grad::SizeElem in = grad::DimOf(c, c.X(0), 2 + i), k = grad::DimOf(c, c.X(1), 2 + i),
                           s{strides[i], nullptr};
      // ext = (k - 1) d + 1; the output's size: output_shape, else in * s (SAME).
      const grad::SizeElem ext =
          grad::Arith(c, "Add", grad::Arith(c, "Mul", grad::Arith(c, "Sub", k, one), {dilations[i], nullptr}), one);
      const grad::SizeElem out =
          out_shape.empty() ? grad::Arith(c, "Mul", in, s) : grad::SizeElem{out_shape[i], nullptr};
      const grad::SizeElem reach = grad::Arith(c, "Add", grad::Arith(c, "Mul", grad::Arith(c, "Sub", in, one), s), ext);
      const grad::SizeElem total =
          grad::Arith(c, "Max", zero, grad::Arith(c, "Sub", grad::Arith(c, "Add", reach, {out_pad[i], nullptr}), out));
      const grad::SizeElem small = grad::Arith(c, "Div", total, {2, nullptr});
      const grad::SizeElem pb = auto_pad == "SAME_UPPER" ? small : grad::Arith(c, "Sub", total, small);
      begin.push_back(pb);
      end.push_back(grad::Arith(c, "Max", zero, grad::Arith(c, "Sub", grad::Arith(c, "Sub", reach, pb), out)));
    }
    begin.insert(begin.end(), end.begin(), end.end());
    dy = c.Op("Pad", {dy, grad::SizesValue(c, begin)});
  } else {
    for (int i = 0; i < r; ++i) {
      const auto g =
          linalg::ConvTransposeAxis(xs[i] < 0 ? 1 : xs[i], ws[i] < 0 ? 1 : ws[i], strides[i], dilations[i], pads[i],
                                    pads[r + i], out_pad[i], out_shape.empty() ? -1 : out_shape[i], auto_pad);
      // g.pad_end < 0 where output rows lie past the last input's reach (output_padding): the convolution then
      // reads them with no padding, and its output keeps X's size while that excess is below the stride.
      const int64_t pe = std::max<int64_t>(0, g.pad_end);
      if (g.pad_begin < 0 || pe - g.pad_end >= strides[i])
        c.Fail("output size exceeds what the input reaches by a stride or more; no gradient rule for that geometry");
      conv_pads[i] = g.pad_begin;
      conv_pads[r + i] = pe;
    }
  }
  std::map<std::string, Attribute> attrs = {{"strides", Attribute::Ints(strides)},
                                            {"dilations", Attribute::Ints(dilations)},
                                            {"pads", Attribute::Ints(conv_pads)},
                                            {"group", Attribute::Int(n.attr_int("group", 1))}};
  if (c.needs_grad(0)) c.SetGrad(0, c.Op("Conv", {dy, c.X(1)}, attrs));
  if (c.needs_grad(1))
    c.SetGrad(1, c.Op("ConvGradWeight", {c.X(0), dy, c.Op("Shape", {c.X(1)})}, attrs, kInternalDomain));
  if (n.has_input(2) && c.needs_grad(2)) {
    std::vector<int64_t> axes{0};
    for (int i = 0; i < r; ++i) axes.push_back(2 + i);
    c.SetGrad(2, grad::ReduceSumAxes(c, c.dY(0), axes, /*keepdims=*/false));
  }
}

void GlobalMaxPoolGrad(GradContext& c) {
  SpatialDims(c, c.X(0), "X");
  c.SetGrad(0, c.Op("MaxPoolGrad", {c.dY(0), c.X(0)}, {{"global", Attribute::Int(1)}}, kInternalDomain));
}

}  // namespace

void RegisterConvTransposeGrads(OpRegistry& r) {
  r.SetGrad("", "ConvTranspose", ConvTransposeGrad);
  r.SetGrad("", "GlobalMaxPool", GlobalMaxPoolGrad);
}

}  // namespace ot
