// Op schemas of the linalg family (placeholder until the family lands).
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {
void RegisterLinalgOps(OpRegistry& r) {}
}  // namespace ot
