// CPU kernel factories of the shape family (placeholder until the family lands).
#include "executor/kernel_registry.h"

namespace ot {
void RegisterShapeKernels(CpuKernelRegistry& r) {}
}  // namespace ot
