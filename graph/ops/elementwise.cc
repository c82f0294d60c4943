// Op schemas of the elementwise family (placeholder until the family lands).
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {
void RegisterElementwiseOps(OpRegistry& r) {}
}  // namespace ot
