// CPU kernel factories of the elementwise family (placeholder until the family lands).
#include "executor/kernel_registry.h"

namespace ot {
void RegisterElementwiseKernels(CpuKernelRegistry& r) {}
}  // namespace ot
