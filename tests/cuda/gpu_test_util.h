// Helpers of the GPU tests (tests/cuda/*_gpu_test.cc): a checked CUDA call, an owned device buffer, copies between
// host vectors and device buffers that fail the test on error, and the executor's GPU shared by a test binary.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "executor/device.h"

namespace ot::test {

#define CUDA_OK(expr)                                                      \
  do {                                                                     \
    const cudaError_t e_ = (expr);                                         \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_); \
  } while (0)

// A device buffer (freed on scope exit); p is null when the allocation failed (Upload then fails the test).
struct Dev {
  void* p = nullptr;
  size_t bytes = 0;
  explicit Dev(size_t b) : bytes(b) {
    if (cudaMalloc(&p, b ? b : 1) != cudaSuccess) p = nullptr;
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

template <typename T>
void Upload(const Dev& d, const std::vector<T>& v) {
  ASSERT_NE(d.p, nullptr);
  ASSERT_EQ(cudaMemcpy(d.p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
}

template <typename T>
std::vector<T> Download(const Dev& d, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), d.p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// One scalar to / from a device buffer.
template <typename T>
void UpScalar(const Dev& d, T v) {
  ASSERT_EQ(cudaMemcpy(d.p, &v, sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
}
template <typename T>
T DownScalar(const Dev& d) {
  T v{};
  EXPECT_EQ(cudaMemcpy(&v, d.p, sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// The executor's backend of GPU 0, opened once per test binary; null without a GPU (REQUIRE_GPU skips).
inline std::shared_ptr<DeviceBackend> Gpu() {
  static std::shared_ptr<DeviceBackend> d = CudaDeviceCount() > 0 ? OpenDevice("cuda:0") : nullptr;
  return d;
}

#define REQUIRE_GPU() \
  if (!::ot::test::Gpu()) GTEST_SKIP() << "no CUDA device"

}  // namespace ot::test
