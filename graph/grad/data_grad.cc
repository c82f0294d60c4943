// Gradient rules of data-movement and selection ops (to be filled).
#include "graph/grad/grad_rules.h"
#include "graph/op_registry.h"

namespace ot {
void RegisterDataGrads(OpRegistry& r) {}
}  // namespace ot
