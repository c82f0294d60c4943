// CPU kernel factories of the reduction family (placeholder until the family lands).
#include "executor/kernel_registry.h"

namespace ot {
void RegisterReductionKernels(CpuKernelRegistry& r) {}
}  // namespace ot
