// CPU kernels of the conv/pool backward internal ops (to be filled).
#include "executor/kernel_registry.h"

namespace ot {
void RegisterConvGradKernels(CpuKernelRegistry& r) {}
}  // namespace ot
