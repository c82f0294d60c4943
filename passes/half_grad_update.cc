#include "passes/half_grad_update.h"

#include "graph/op_registry.h"
#include "graph/ops/optimizer_layout.h"
#include "passes/fuse_util.h"
#include "passes/optimizer_node.h"

namespace ot {

bool HalfGradUpdatePass::Run(Graph& g) {
  folded_ = 0;
  Node* opt = FindOptimizerNode(g);
  if (!opt) return false;
  const OptimizerLayout l = OptimizerLayout::Of(*opt);
  if (l.k < 0 || l.sharded()) return false;
  for (int i = 0; i < l.n; ++i) {
    const int gi = l.grad_in(i);
    if (!opt->has_input(gi) || !opt->has_input(l.param_in(i))) continue;
    Value* g32 = opt->inputs[gi];
    Node* cast = g32->producer;
    if (!fuse::IsOp(cast, "Cast") || !fuse::Private(g, g32) || !cast->has_input(0)) continue;
    Value* half = cast->inputs[0];
    if (g32->dtype != DataType::kFloat32 || opt->inputs[l.param_in(i)]->dtype != DataType::kFloat32) continue;
    if (half->dtype != DataType::kFloat16 && half->dtype != DataType::kBFloat16) continue;
    g.SetInput(opt, gi, half);
    g.RemoveNode(cast);
    ++folded_;
  }
  if (folded_ > 0) InferNode(*opt);
  return folded_ > 0;
}

}  // namespace ot
