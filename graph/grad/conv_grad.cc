// Gradient rules of Conv, ConvTranspose and pooling (to be filled).
#include "graph/grad/grad_rules.h"
#include "graph/op_registry.h"

namespace ot {
void RegisterConvGrads(OpRegistry& r) {}
}  // namespace ot
