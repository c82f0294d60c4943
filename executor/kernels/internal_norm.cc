// CPU kernels of the norm/loss backward internal ops (to be filled).
#include "executor/kernel_registry.h"

namespace ot {
void RegisterNormGradKernels(CpuKernelRegistry& r) {}
}  // namespace ot
