// Host memory for the long-lived blocks a step streams over: its arena, its state (training/state_memory.h) and the
// kernels' own buffers. Blocks of 2 MiB or more are mapped on their own, aligned to 2 MiB and offered to the kernel's
// transparent huge pages (madvise MADV_HUGEPAGE; a no-op where THP is off): a training step streams over hundreds of
// MB, and with 4 KiB pages every kernel pays a TLB miss per page -- in a virtual machine a two-dimensional page walk
// (bench/RESULTS.md, session 38). Smaller blocks come from malloc, aligned to 64 bytes. Not for short-lived values: a
// fresh mapping's first touch faults in (and may compact for) every huge page again, where malloc reuses what it has.
// Host code only.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace ot {

namespace host_alloc_detail {
constexpr size_t kHugePage = size_t{2} << 20;
inline size_t Rounded(size_t bytes) {
  const size_t n = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  return n < kHugePage ? n : (n + 4095) / 4096 * 4096;  // a mapping: whole small pages
}
}  // namespace host_alloc_detail

// At least `bytes` (64 for 0), aligned to 64 bytes (to 2 MiB from 2 MiB on); null when the host has no memory
// left. Give it back with FreeHost(p, bytes), the same `bytes`.
inline void* AllocHost(size_t bytes) {
  using namespace host_alloc_detail;
  const size_t n = Rounded(bytes);
  if (n < kHugePage) return std::aligned_alloc(64, n);
  // A mapping of its own: fresh pages, so the first touch faults in huge ones (malloc's heap may hand back pages
  // already faulted in small). Over-mapped by one huge page to align the start, the ends unmapped.
  const size_t mapped = n + kHugePage;
  void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (start > base) munmap(m, start - base);
  if (base + mapped > start + n) munmap(reinterpret_cast<void*>(start + n), base + mapped - (start + n));
  madvise(reinterpret_cast<void*>(start), n, MADV_HUGEPAGE);  // advice only: failing leaves small pages
  return reinterpret_cast<void*>(start);
}

inline void FreeHost(void* p, size_t bytes) {
  using namespace host_alloc_detail;
  if (!p) return;
  const size_t n = Rounded(bytes);
  if (n < kHugePage)
    std::free(p);
  else
    munmap(p, n);
}

// AllocHost's block owned by a shared_ptr (null when the host has no memory left).
inline std::shared_ptr<uint8_t> AllocHostShared(size_t bytes) {
  void* p = AllocHost(bytes);
  if (!p) return nullptr;
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [bytes](uint8_t* q) { FreeHost(q, bytes); });
}

// std::vector's allocator over AllocHost: kernels' own buffers (layout copies, scratchpads).
template <typename T>
struct HostAllocator {
  using value_type = T;
  HostAllocator() = default;
  template <typename U>
  HostAllocator(const HostAllocator<U>&) {}
  T* allocate(size_t n) {
    void* p = AllocHost(n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { FreeHost(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const HostAllocator<U>&) const {
    return true;
  }
};
template <typename T>
using HostVector = std::vector<T, HostAllocator<T>>;

}  // namespace ot
