// Op schemas of the norm family (placeholder until the family lands).
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {
void RegisterNormOps(OpRegistry& r) {}
}  // namespace ot
