// Internal optimizer update ops (to be filled).
#include "graph/grad/grad_rules.h"
#include "graph/op_registry.h"

namespace ot {
void RegisterOptimizerOps(OpRegistry& r) {}
}  // namespace ot
