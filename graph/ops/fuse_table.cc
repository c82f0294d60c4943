// The fusion facts of every op, as a table: which ops may join a cluster (passes/cluster_fusion.cc) and how each
// becomes instructions of the cluster's program (kernel_common/cluster_program.h).
//   elementwise  arithmetic, activations, comparisons, logic, Where, Clip, Cast, and the backward helpers
//                ReluGrad/GeluGrad: one instruction per element (Clip, Sum, Mean: a few, in float, rounded once
//                at the end as the unfused kernels do);
//   reduction    ReduceSum/Mean/Max/Min: a row reduction when their axes are the trailing axes of the cluster's
//                domain (the builder checks; others stay out of clusters).
//   row programs Softmax, LogSoftmax and their gradient SoftmaxGrad over the trailing axes (the last axis from
//                opset 13, the coerced 2-D rows from `axis` on before): max, exp, sum and the normalisation as row
//                reductions and elementwise instructions, so the attention's scale, mask and softmax run as one pass
//                (and backward, the softmax gradient with what follows it where no ReduceToShape is between:
//                ReduceToShape stays opaque, since a fused graph made for the first batch's shapes also runs later
//                ones, where one that copied may reduce). The row sums are double sums rounded to
//                float, every other step is float; the unfused float kernels take the same steps in
//                cpu_ops/row_sum.h's summation order, so the cluster gives their bits.
// Every value an unfused kernel stores is rounded to its dtype in the program too (OutType), and every float
// intermediate it keeps in registers is kF32 here, so a cluster computes what its ops computed one by one.
// Ops not listed stay opaque: data movement, GEMM/convolution, norms, random ops.
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"
#include "kernel_common/cluster_program.h"

namespace ot {

namespace {

using cluster::Op;
constexpr int kF32 = static_cast<int>(cluster::DType::kF32);
int I(Op op) { return static_cast<int>(op); }

ClusterLowerFn Unary(Op op) {
  return [op](const Node&, ClusterBuilder& b) {
    b.Out(0, b.Emit(I(op), b.OutType(0), b.In(0)));
    return std::string();
  };
}

ClusterLowerFn Binary(Op op) {
  return [op](const Node&, ClusterBuilder& b) {
    b.Out(0, b.Emit(I(op), b.OutType(0), b.In(0), b.In(1)));
    return std::string();
  };
}

// Sum/Max/Min/Mean over 1..n inputs, left to right in float, rounded once (the unfused variadic kernels).
ClusterLowerFn Variadic(Op op, bool mean) {
  return [op, mean](const Node& n, ClusterBuilder& b) {
    const int k = static_cast<int>(n.inputs.size());
    if (k == 0) return std::string("no inputs");
    const int last = mean ? -1 : k - 1;
    int acc = b.In(0);
    if (k == 1 && !mean) {
      b.Out(0, b.Emit(I(Op::kIdentity), b.OutType(0), acc));
      return std::string();
    }
    for (int i = 1; i < k; ++i) acc = b.Emit(I(op), i == last ? b.OutType(0) : kF32, acc, b.In(i));
    if (mean) acc = b.Emit(I(Op::kDiv), b.OutType(0), acc, b.Const(static_cast<float>(k)));
    b.Out(0, acc);
    return std::string();
  };
}

std::string GeluForm(const Node& n, float* imm) {
  const std::string a = n.attr_string("approximate", "none");
  if (a != "none" && a != "tanh") return "approximate = '" + a + "'";
  *imm = a == "tanh" ? 1.f : 0.f;
  return "";
}

// Reduce*: axes from the attribute or (newer opsets) input 1, which must be known.
ClusterLowerFn Reduction(Op op, bool axes_input) {
  return [op, axes_input](const Node& n, ClusterBuilder& b) {
    std::vector<int64_t> axes;
    if (axes_input && n.has_input(1)) {
      const Tensor* t = b.ConstInput(1);
      if (!t) return std::string("axes computed at run time");
      for (int64_t i = 0; i < t->numel(); ++i) axes.push_back(static_cast<int64_t>(t->GetDouble(i)));
    } else {
      axes = n.attr_ints("axes");
    }
    if (axes.empty() && n.attr_int("noop_with_empty_axes", 0) != 0) return std::string("noop_with_empty_axes");
    b.Out(0, b.Reduce(I(op), b.In(0), axes));
    return std::string();
  };
}

// The rows of a softmax-family node over input `xi`: the normalised trailing axes its coerced rows span (opset < 13
// and the gradient's `legacy`: axis..rank-1; else the one axis, which the builder accepts only when it is the last).
std::string SoftmaxAxes(const Node& n, int xi, bool legacy, std::vector<int64_t>* axes) {
  if (!n.has_input(xi) || !n.inputs[xi]->shape.known_rank()) return "the rank of its input is not known";
  const int64_t rank = n.inputs[xi]->shape.rank();
  int64_t axis = n.attr_int("axis", legacy ? 1 : -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return "axis " + std::to_string(n.attr_int("axis", 0)) + " is out of range";
  axes->clear();
  for (int64_t a = axis; a < (legacy ? rank : axis + 1); ++a) axes->push_back(a);
  return "";
}

// Softmax: y = e * (1 / sum(e)), e = exp(x - max(x)); LogSoftmax: y = (x - max) - log(sum(e)). A NaN in a row makes the
// max, so the whole row, NaN (the unfused kernel skips NaN in the max but its sum is NaN: the same outputs); a row of
// only -inf gives NaN in both.
ClusterLowerFn SoftmaxRows(bool log) {
  return [log](const Node& n, ClusterBuilder& b) {
    std::vector<int64_t> axes;
    if (std::string why = SoftmaxAxes(n, 0, n.opset < 13, &axes); !why.empty()) return why;
    const int x = b.In(0);
    const int d = b.Emit(I(Op::kSub), kF32, x, b.Reduce(I(Op::kReduceMax), x, axes, kF32));
    const int e = b.Emit(I(Op::kExp), kF32, d);
    const int s = b.Reduce(I(Op::kReduceSum), e, axes, kF32);
    if (log)
      b.Out(0, b.Emit(I(Op::kSub), b.OutType(0), d, b.Emit(I(Op::kLog), kF32, s)));
    else
      b.Out(0, b.Emit(I(Op::kMul), b.OutType(0), e, b.Emit(I(Op::kReciprocal), kF32, s)));
    return std::string();
  };
}

}  // namespace

void RegisterFusionFacts(OpRegistry& r) {
  const auto ew = FusibleKind::kElementwise;
  const std::pair<const char*, Op> unary[] = {{"Neg", Op::kNeg},
                                              {"Abs", Op::kAbs},
                                              {"Sign", Op::kSign},
                                              {"Exp", Op::kExp},
                                              {"Log", Op::kLog},
                                              {"Sqrt", Op::kSqrt},
                                              {"Reciprocal", Op::kReciprocal},
                                              {"Tanh", Op::kTanh},
                                              {"Sigmoid", Op::kSigmoid},
                                              {"Relu", Op::kRelu},
                                              {"Erf", Op::kErf},
                                              {"Floor", Op::kFloor},
                                              {"Ceil", Op::kCeil},
                                              {"Not", Op::kNot},
                                              {"Identity", Op::kIdentity}};
  for (const auto& [op, code] : unary) r.SetFusion("", op, ew, Unary(code));
  const std::pair<const char*, Op> binary[] = {{"Add", Op::kAdd},
                                               {"Sub", Op::kSub},
                                               {"Mul", Op::kMul},
                                               {"Div", Op::kDiv},
                                               {"Pow", Op::kPow},
                                               {"Less", Op::kLess},
                                               {"LessOrEqual", Op::kLessEqual},
                                               {"Greater", Op::kGreater},
                                               {"GreaterOrEqual", Op::kGreaterEqual},
                                               {"Equal", Op::kEqual},
                                               {"And", Op::kAnd},
                                               {"Or", Op::kOr},
                                               {"Xor", Op::kXor}};
  for (const auto& [op, code] : binary) r.SetFusion("", op, ew, Binary(code));
  r.SetFusion("", "Sum", ew, Variadic(Op::kAdd, false));
  r.SetFusion("", "Mean", ew, Variadic(Op::kAdd, true));
  r.SetFusion("", "Max", ew, Variadic(Op::kMax, false));
  r.SetFusion("", "Min", ew, Variadic(Op::kMin, false));
  r.SetFusion("", "Where", ew, [](const Node&, ClusterBuilder& b) {
    b.Out(0, b.Emit(I(Op::kWhere), b.OutType(0), b.In(0), b.In(1), b.In(2)));
    return std::string();
  });
  r.SetFusion("", "LeakyRelu", ew, [](const Node& n, ClusterBuilder& b) {
    b.Out(0, b.Emit(I(Op::kLeakyRelu), b.OutType(0), b.In(0), -1, -1, n.attr_float("alpha", 0.01f)));
    return std::string();
  });
  auto gelu = [](const Node& n, ClusterBuilder& b) {
    float imm = 0;
    if (std::string why = GeluForm(n, &imm); !why.empty()) return why;
    b.Out(0, b.Emit(I(Op::kGelu), b.OutType(0), b.In(0), -1, -1, imm));
    return std::string();
  };
  r.SetFusion("", "Gelu", ew, gelu);
  r.SetFusion(kInternalDomain, "Gelu", ew, gelu);
  r.SetFusion(kInternalDomain, "GeluGrad", ew, [](const Node& n, ClusterBuilder& b) {
    float imm = 0;
    if (std::string why = GeluForm(n, &imm); !why.empty()) return why;
    b.Out(0, b.Emit(I(Op::kGeluGrad), b.OutType(0), b.In(0), b.In(1), -1, imm));
    return std::string();
  });
  r.SetFusion(kInternalDomain, "ReluGrad", ew, Binary(Op::kReluGrad));
  r.SetFusion("", "Cast", ew, [](const Node&, ClusterBuilder& b) {
    b.Out(0, b.Emit(I(Op::kCast), b.OutType(0), b.In(0)));
    return std::string();
  });
  // Clip: max with the lower bound, then min with the upper, in float; rounded once. Bounds are inputs 1 and 2
  // from opset 11, attributes before.
  r.SetFusion("", "Clip", ew, [](const Node& n, ClusterBuilder& b) {
    int x = b.In(0);
    const bool inputs = n.opset >= 11;
    int lo = -1, hi = -1;
    if (inputs) {
      if (n.has_input(1)) lo = b.In(1);
      if (n.has_input(2)) hi = b.In(2);
    } else {
      if (n.has_attr("min")) lo = b.Const(n.attr_float("min", 0));
      if (n.has_attr("max")) hi = b.Const(n.attr_float("max", 0));
    }
    if (lo >= 0) x = b.Emit(I(Op::kMax), hi >= 0 ? kF32 : b.OutType(0), x, lo);
    if (hi >= 0) x = b.Emit(I(Op::kMin), b.OutType(0), x, hi);
    if (lo < 0 && hi < 0) x = b.Emit(I(Op::kIdentity), b.OutType(0), x);
    b.Out(0, x);
    return std::string();
  });
  const auto red = FusibleKind::kReduction;
  r.SetFusion("", "ReduceSum", red, Reduction(Op::kReduceSum, true));    // axes input from opset 13
  r.SetFusion("", "ReduceMean", red, Reduction(Op::kReduceMean, true));  // from opset 18
  r.SetFusion("", "ReduceMax", red, Reduction(Op::kReduceMax, true));
  r.SetFusion("", "ReduceMin", red, Reduction(Op::kReduceMin, true));
  r.SetFusion("", "Softmax", red, SoftmaxRows(false));
  r.SetFusion("", "LogSoftmax", red, SoftmaxRows(true));
  // SoftmaxGrad(dY, Y): dX = Y (dY - sum(dY Y)); of a LogSoftmax (log = 1): dX = dY - exp(Y) sum(dY).
  r.SetFusion(kInternalDomain, "SoftmaxGrad", red, [](const Node& n, ClusterBuilder& b) {
    std::vector<int64_t> axes;
    if (std::string why = SoftmaxAxes(n, 1, n.attr_int("legacy", 0) != 0, &axes); !why.empty()) return why;
    const int dy = b.In(0), y = b.In(1);
    if (n.attr_int("log", 0) != 0) {
      const int s = b.Reduce(I(Op::kReduceSum), dy, axes, kF32);
      const int t = b.Emit(I(Op::kMul), kF32, b.Emit(I(Op::kExp), kF32, y), s);
      b.Out(0, b.Emit(I(Op::kSub), b.OutType(0), dy, t));
    } else {
      const int s = b.Reduce(I(Op::kReduceSum), b.Emit(I(Op::kMul), kF32, dy, y), axes, kF32);
      b.Out(0, b.Emit(I(Op::kMul), b.OutType(0), y, b.Emit(I(Op::kSub), kF32, dy, s)));
    }
    return std::string();
  });
  // Opaque but cheap to run twice (one pass over their inputs; every fusible op above is too).
  for (const char* op : {"Softmax", "LogSoftmax", "Transpose"}) r.SetRecomputeCheap("", op);
  // LayerNormalization's saved Mean and InvStdDev are optional outputs: its Y alone can be recomputed.
  r.SetRecomputeCheap("", "LayerNormalization", true);
  r.SetRecomputeCheap(kInternalDomain, "LayerNormalization", true);
}

}  // namespace ot
