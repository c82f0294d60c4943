// The thread policy: one number (--threads N) bounds TBB's global parallelism and oneDNN's OpenMP team.
// Kernels that run an OpenMP team are run with no other kernel beside them (see Plan::RunStep), so the cores
// are never oversubscribed.
#pragma once
#include <functional>

namespace ot {
void SetThreadCount(int n);  // 0 = all cores
int ThreadCount();
// Runs f with the executor's parallelism limit in force.
void RunInArena(const std::function<void()>& f);
}  // namespace ot
