// Op schemas of the shape family (placeholder until the family lands).
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {
void RegisterShapeOps(OpRegistry& r) {}
}  // namespace ot
