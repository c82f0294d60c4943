// CPU kernel factories of the linalg family (placeholder until the family lands).
#include "executor/kernel_registry.h"

namespace ot {
void RegisterLinalgKernels(CpuKernelRegistry& r) {}
}  // namespace ot
