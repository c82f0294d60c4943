// Op schemas of the reduction family (placeholder until the family lands).
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {
void RegisterReductionOps(OpRegistry& r) {}
}  // namespace ot
