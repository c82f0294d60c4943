#include "executor/threads.h"

#include <tbb/global_control.h>
#include <tbb/info.h>

#include <memory>
#include <thread>

#include "cpu_ops/threads.h"

namespace ot {

namespace {
int g_threads = 0;
std::unique_ptr<tbb::global_control> g_control;
}  // namespace

void SetThreadCount(int n) {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (n <= 0) n = cores;
  g_threads = n;
  g_control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, n);
  cpu::SetIntraOpThreads(n);
}

int ThreadCount() {
  if (g_threads == 0)
    return static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  return g_threads;
}

void RunInArena(const std::function<void()>& f) { f(); }

}  // namespace ot
