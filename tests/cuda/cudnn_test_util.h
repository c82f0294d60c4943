// Helpers of the cuDNN launcher tests (cudnn_{conv,pool,batchnorm}_gpu_test.cc): host tensors of fp32/fp16/bf16
// filled from test::Rng() (seeded from std::random_device, so every run draws fresh inputs), device copies whose
// outputs start as NaN (so an element a launcher never writes fails the comparison), and an element-wise check
// against a float64 reference with a per-element bound.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu_ops/pool.h"
#include "cuda_ops/device_info.h"
#include "cuda_ops/row_kernels.h"
#include "kernel_common/half.h"
#include "tests/cuda/gpu_test_util.h"
#include "tests/test_util.h"

namespace ot::test {

// The sliding-window geometry that a GPU desc (conv or pool) and the CPU's spec (ConvSpec, PoolSpec) share: spatial
// sizes, kernel, strides, dilations and pads, copied from d into s.
template <typename Desc, typename Spec>
void CopyWindowGeometry(const Desc& d, Spec& s) {
  s.in_spatial = d.in_spatial;
  s.out_spatial = d.out_spatial;
  s.kernel = d.kernel;
  s.strides = d.strides;
  s.dilations = d.dilations;
  s.pad_begin = d.pad_begin;
  s.pad_end = d.pad_end;
}

// A pooling desc's geometry (cuda::PoolDesc or cuda::LpPoolDesc: the same fields) as the CPU's PoolSpec, for the
// reference; the caller sets the kind (and p).
template <typename Desc>
cpu::PoolSpec PoolSpecGeometry(const Desc& d) {
  cpu::PoolSpec s;
  s.n = d.n;
  s.c = d.c;
  CopyWindowGeometry(d, s);
  return s;
}

#define REQUIRE_CUDA_DEVICE() \
  if (::ot::cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

inline const char* Name(cuda::FloatType t) {
  return t == cuda::FloatType::kF32 ? "f32" : t == cuda::FloatType::kF16 ? "f16" : "bf16";
}

// A host tensor of type t; values are stored rounded to t, read back exactly as doubles.
struct HostT {
  cuda::FloatType t = cuda::FloatType::kF32;
  std::vector<uint8_t> bytes;
  HostT() = default;
  HostT(cuda::FloatType type, int64_t n) : t(type), bytes(static_cast<size_t>(n) * cuda::FloatTypeSize(type)) {}
  int64_t size() const { return static_cast<int64_t>(bytes.size() / cuda::FloatTypeSize(t)); }
  void Set(int64_t i, double v) {
    const float f = static_cast<float>(v);
    if (t == cuda::FloatType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &f, 4);
      return;
    }
    const uint16_t b = t == cuda::FloatType::kF16 ? float16(f).bits : bfloat16(f).bits;
    std::memcpy(bytes.data() + 2 * i, &b, 2);
  }
  double Get(int64_t i) const {
    if (t == cuda::FloatType::kF32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      return f;
    }
    uint16_t b;
    std::memcpy(&b, bytes.data() + 2 * i, 2);
    return t == cuda::FloatType::kF16 ? static_cast<float>(float16::FromBits(b))
                                      : static_cast<float>(bfloat16::FromBits(b));
  }
  std::vector<double> Doubles() const {
    std::vector<double> d(static_cast<size_t>(size()));
    for (int64_t i = 0; i < size(); ++i) d[static_cast<size_t>(i)] = Get(i);
    return d;
  }
};

inline HostT RandomT(cuda::FloatType t, int64_t n, double lo = -1, double hi = 1) {
  HostT h(t, n);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < n; ++i) h.Set(i, u(Rng()));
  return h;
}

inline std::vector<float> RandomF(int64_t n, double lo, double hi) {
  std::vector<float> v(static_cast<size_t>(n));
  std::uniform_real_distribution<double> u(lo, hi);
  for (float& f : v) f = static_cast<float>(u(Rng()));
  return v;
}

// Device buffers: ToDev holds a copy of host data; NanDev is an output, every byte 0xFF (NaN in fp32, fp16 and bf16).
inline std::unique_ptr<Dev> ToDev(const void* p, size_t bytes) {
  auto d = std::make_unique<Dev>(bytes);
  EXPECT_NE(d->p, nullptr);
  if (d->p) {
    EXPECT_EQ(cudaMemcpy(d->p, p, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  return d;
}
inline std::unique_ptr<Dev> ToDev(const HostT& h) { return ToDev(h.bytes.data(), h.bytes.size()); }
inline std::unique_ptr<Dev> ToDev(const std::vector<float>& v) { return ToDev(v.data(), v.size() * sizeof(float)); }
inline std::unique_ptr<Dev> NanDev(size_t bytes) {
  auto d = std::make_unique<Dev>(bytes);
  EXPECT_NE(d->p, nullptr);
  if (d->p) {
    EXPECT_EQ(cudaMemset(d->p, 0xFF, bytes ? bytes : 1), cudaSuccess);
  }
  return d;
}
inline HostT FromDev(const Dev& d, cuda::FloatType t, int64_t n) {
  HostT h(t, n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(h.bytes.data(), d.p, h.bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}
inline std::vector<double> FloatsFromDev(const Dev& d, int64_t n) {
  std::vector<float> f(static_cast<size_t>(n));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(f.data(), d.p, f.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return std::vector<double>(f.begin(), f.end());
}

// Every element: |got - ref| <= tol * scale[i] (scale: the magnitude of the terms the reference sums, e.g. the
// same computation on absolute values; a NaN -- an element never written -- fails).
inline void ExpectWithin(const std::vector<double>& got, const std::vector<double>& ref,
                         const std::vector<double>& scale, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  ASSERT_EQ(scale.size(), ref.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double bound = tol * scale[i] + 1e-30;
    const double err = std::fabs(got[i] - ref[i]);
    if (!(err <= bound) && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << ref[i] << " (bound " << bound
                    << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << ref.size() << " elements out of tolerance " << tol;
}

inline std::vector<double> Abs(const std::vector<double>& v) {
  std::vector<double> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(v[i]);
  return a;
}

}  // namespace ot::test
