// What the host can give a plan: the memory available now (Linux's MemAvailable, lowered to the room left under
// the cgroup's limit when the process runs in one), and bytes written for people.
#pragma once
#include <cstdint>
#include <string>

namespace ot {

// Bytes available to this process now; 0 when it cannot be told.
int64_t AvailableHostMemory();
// "512 B", "3.2 KB", "1.5 GB" (powers of 1000).
std::string FormatBytes(int64_t bytes);

}  // namespace ot
