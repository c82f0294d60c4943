#include "passes/fuse_pool_relu.h"

#include <vector>

#include "graph/graph.h"
#include "passes/fold_report.h"
#include "passes/fuse_util.h"

namespace ot {

bool PoolReluFoldPass::Run(Graph& g) {
  FoldReport rep(sizes_, report_, "pool relu");
  bool changed = false;
  std::vector<Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  for (Node* rg : nodes) {
    if (!fuse::IsInternalOp(rg, "ReluGrad") || !rep.kernel(rg) || rg->inputs.size() != 2) continue;
    Value *dr = rg->inputs[0], *r = rg->inputs[1];
    Node* pool = dr ? dr->producer : nullptr;
    if (!fuse::IsInternalOp(pool, "MaxPoolGrad") || !rep.kernel(pool) || pool->attr_int("relu", 0) != 0) continue;
    if (pool->inputs.size() < 2 || pool->inputs[1] != r) {
      rep.Refuse(pool, rg, "MaxPoolGrad's X is not the Relu output ReluGrad masks with");
      continue;
    }
    if (!fuse::Private(g, dr)) {
      rep.Refuse(pool, rg, "MaxPoolGrad's dX has other readers than ReluGrad");
      continue;
    }
    const FusionSizes::Facts *fd = rep.facts(dr), *fy = rep.facts(rg->outputs[0]);
    if (!fd || !fy || fd->dims.dims != fy->dims.dims || fd->dims.dtype != fy->dims.dtype) continue;
    Value* dy = rg->outputs[0];
    const std::string pool_label = FoldReport::Label(pool), rg_label = FoldReport::Label(rg);
    g.RemoveNode(rg);
    pool->outputs[0] = dy;
    dy->producer = pool;
    dy->producer_output = 0;
    dr->producer = nullptr;
    pool->attrs["relu"] = Attribute::Int(1);
    rep.Record(pool, {pool_label, rg_label}, 2 * rep.bytes(dr));
    changed = true;
  }
  return changed;
}

}  // namespace ot
