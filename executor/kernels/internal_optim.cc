// CPU kernels of the optimizer update ops (to be filled).
#include "executor/kernel_registry.h"

namespace ot {
void RegisterOptimizerKernels(CpuKernelRegistry& r) {}
}  // namespace ot
