#include "cpu_ops/threads.h"

#include <atomic>
#include <thread>

namespace ot::cpu {
namespace {
std::atomic<int> g_n{0};
}
void SetIntraOpThreads(int n) { g_n = n; }
int IntraOpThreads() {
  int n = g_n.load();
  return n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}
}  // namespace ot::cpu
