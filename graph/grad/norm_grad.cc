// Gradient rules of Softmax, LogSoftmax, the losses, LayerNormalization and BatchNormalization (to be filled).
#include "graph/grad/grad_rules.h"
#include "graph/op_registry.h"

namespace ot {
void RegisterNormGrads(OpRegistry& r) {}
}  // namespace ot
