// kernel_common/host_alloc.h: alignment, the bytes a block owns, and that giving it back unmaps exactly its pages.
#include "kernel_common/host_alloc.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

namespace ot {
namespace {

bool Mapped(const void* p) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  unsigned char v = 0;
  errno = 0;
  const int rc = mincore(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) / page * page), 1, &v);
  return rc == 0 || errno != ENOMEM;
}

// Every byte of a block written and read back: a pattern from a fresh seed.
void WriteAndCheck(uint8_t* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> want(n);
  for (auto& b : want) b = static_cast<uint8_t>(rng());
  std::memcpy(p, want.data(), n);
  EXPECT_EQ(std::memcmp(p, want.data(), n), 0);
}

TEST(HostAlloc, SmallBlocksAre64ByteAligned) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}, (size_t{2} << 20) - 65}) {
    auto* p = static_cast<uint8_t*>(AllocHost(n));
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << n;
    WriteAndCheck(p, std::max<size_t>((n + 63) / 64 * 64, 64), static_cast<uint32_t>(std::random_device{}()));
    FreeHost(p, n);
  }
}

TEST(HostAlloc, LargeBlocksAreHugePageAlignedMappingsOfTheirRoundedSize) {
  const size_t huge = size_t{2} << 20;
  for (size_t n : {huge, huge + 1, 3 * huge + 5}) {
    auto* p = static_cast<uint8_t*>(AllocHost(n));
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % huge, 0u) << n;
    const size_t rounded = (n + 4095) / 4096 * 4096;  // whole small pages past the huge ones
    WriteAndCheck(p, rounded, static_cast<uint32_t>(std::random_device{}()));
    EXPECT_TRUE(Mapped(p));
    EXPECT_TRUE(Mapped(p + rounded - 1));
    FreeHost(p, n);
    // Its own mapping, wholly given back (nothing else maps there until the next mmap of this thread).
    EXPECT_FALSE(Mapped(p)) << n;
    EXPECT_FALSE(Mapped(p + rounded - 1)) << n;
  }
}

TEST(HostAlloc, SharedBlocksAndVectorsHoldTheirValues) {
  std::shared_ptr<uint8_t> s = AllocHostShared(5 << 20);
  ASSERT_TRUE(s);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s.get()) % (2 << 20), 0u);
  WriteAndCheck(s.get(), 5 << 20, 7);
  HostVector<float> v(3 << 20);  // 12 MiB: a mapping of its own
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (2 << 20), 0u);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 977);
  v.resize(v.size() + 1, -1.0f);  // reallocates: the values move with it
  for (size_t i = 0; i + 1 < v.size(); i += 4099) ASSERT_EQ(v[i], static_cast<float>(i % 977)) << i;
  EXPECT_EQ(v.back(), -1.0f);
}

}  // namespace
}  // namespace ot
