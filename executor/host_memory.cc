#include "executor/host_memory.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace ot {

namespace {
// The first number of a file ("max" or a missing file: -1).
int64_t ReadNumber(const char* path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s == "max") return -1;
  try {
    return std::stoll(s);
  } catch (...) {
    return -1;
  }
}
}  // namespace

int64_t AvailableHostMemory() {
  int64_t avail = -1;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream in(line.substr(13));
      int64_t kb = 0;
      if (in >> kb) avail = kb * 1024;
      break;
    }
  // cgroup v2, then v1: the room left under the limit.
  int64_t limit = ReadNumber("/sys/fs/cgroup/memory.max"), used = ReadNumber("/sys/fs/cgroup/memory.current");
  if (limit < 0) {
    limit = ReadNumber("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    used = ReadNumber("/sys/fs/cgroup/memory/memory.usage_in_bytes");
    if (limit >= (int64_t{1} << 60)) limit = -1;  // v1's "no limit" is a huge number
  }
  if (limit > 0 && used >= 0) avail = avail < 0 ? limit - used : std::min(avail, limit - used);
  return std::max<int64_t>(avail, 0);
}

std::string FormatBytes(int64_t bytes) {
  static const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000 && u < 6) {
    v /= 1000;
    ++u;
  }
  char b[32];
  std::snprintf(b, sizeof b, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return b;
}

}  // namespace ot
