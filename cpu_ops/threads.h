// The thread count that kernels running their own OpenMP team (oneDNN) use; set by the executor's --threads.
#pragma once

namespace ot::cpu {
void SetIntraOpThreads(int n);
int IntraOpThreads();  // the cores of the machine until set
}  // namespace ot::cpu
