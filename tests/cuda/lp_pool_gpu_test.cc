// cuda_ops/lp_pool.h against the CPU's pooling loops run in float64 (cpu::Pool with PoolKind::kLp on the inputs as
// rounded to the tested type), p = 1, 2, 3 (and 4), in f32/f16/bf16, 1-D to 3-D with strides, dilations, begin/end
// pads, windows running past the input (ceil mode's last window) and windows large enough for the block-per-output
// kernel (GlobalLpPool over a 56x56 plane, a 16x16 kernel). Outputs start as NaN, so an unwritten element fails.
// Bound per element: tol x |reference| (one rounding of a double result: f32 1e-6, f16 1e-3, bf16 8e-3). Then the
// executor's LpPool / GlobalLpPool nodes (executor/cuda/kernels_conv_pool.cc) against the CPU executor. Label `gpu`
// (tests named *Gpu*), skipped without a device; ValidateLpPool's checks run without one.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_ops/pool.h"
#include "cuda_ops/lp_pool.h"
#include "executor/device.h"
#include "graph/tensor.h"
#include "tests/cuda/cudnn_test_util.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using cuda::FloatType;
using cuda::LpPoolDesc;

struct Case {
  int64_t n, c;
  std::vector<int64_t> in, kernel, strides, dilations, pad_begin, pad_end;
};

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

LpPoolDesc MakeDesc(const Case& c, FloatType t, int64_t p) {
  LpPoolDesc d;
  d.type = t;
  d.p = p;
  d.n = c.n;
  d.c = c.c;
  d.in_spatial = c.in;
  d.kernel = c.kernel;
  d.strides = c.strides;
  d.dilations = c.dilations;
  d.pad_begin = c.pad_begin;
  d.pad_end = c.pad_end;
  for (size_t i = 0; i < c.in.size(); ++i) {
    const int64_t ext = (c.kernel[i] - 1) * c.dilations[i] + 1;
    d.out_spatial.push_back((c.in[i] + c.pad_begin[i] + c.pad_end[i] - ext) / c.strides[i] + 1);
  }
  return d;
}

cpu::PoolSpec SpecOf(const LpPoolDesc& d) {
  cpu::PoolSpec s = test::PoolSpecGeometry(d);
  s.kind = cpu::PoolKind::kLp;
  s.p = d.p;
  return s;
}

std::vector<Case> Cases() {
  return {
      {2, 3, {8, 8}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}},                    // plain 2x2
      {2, 3, {9, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},                   // padded, strided, odd sizes
      {1, 4, {7, 6}, {3, 2}, {1, 1}, {2, 2}, {2, 0}, {1, 1}},                    // dilated, asymmetric pads
      {3, 2, {13}, {3}, {2}, {1}, {1}, {2}},                                     // 1-D; the last window past the end
      {1, 2, {4, 6, 5}, {2, 3, 2}, {2, 1, 2}, {1, 2, 1}, {0, 1, 0}, {1, 1, 1}},  // 3-D, dilated
      {2, 5, {56, 56}, {56, 56}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},                // global: block per output
      {1, 3, {20, 21}, {16, 16}, {2, 3}, {1, 1}, {1, 0}, {1, 2}},                // big windows: block per output
      {1, 1, {5, 5}, {2, 2}, {3, 3}, {1, 1}, {2, 2}, {2, 2}},                    // windows wholly in the padding: 0
  };
}

double Tol(FloatType t) { return t == FloatType::kF32 ? 1e-6 : t == FloatType::kF16 ? 1e-3 : 8e-3; }

TEST(LpPool, ValidateRejectsMalformedDescs) {
  LpPoolDesc d = MakeDesc(Cases()[0], FloatType::kF32, 2);
  EXPECT_NO_THROW(cuda::ValidateLpPool(d));
  LpPoolDesc bad = d;
  bad.p = 0;
  EXPECT_THROW(cuda::ValidateLpPool(bad), std::invalid_argument);
  bad = d;
  bad.strides = {1};
  EXPECT_THROW(cuda::ValidateLpPool(bad), std::invalid_argument);
  bad = d;
  bad.pad_end = {0, -1};
  EXPECT_THROW(cuda::ValidateLpPool(bad), std::invalid_argument);
  bad = d;
  bad.dilations = {0, 1};
  EXPECT_THROW(cuda::ValidateLpPool(bad), std::invalid_argument);
  // Nothing to compute: no launch, no pointers needed (runs without a GPU).
  bad = d;
  bad.n = 0;
  EXPECT_NO_THROW(cuda::LpPoolForward(bad, nullptr, nullptr, nullptr));
}

TEST(LpPoolGpu, ForwardMatchesTheCpuInFloat64) {
  REQUIRE_CUDA_DEVICE();
  for (FloatType t : {FloatType::kF32, FloatType::kF16, FloatType::kBF16})
    for (int64_t p : {1, 2, 3, 4})
      for (const Case& c : Cases()) {
        const LpPoolDesc d = MakeDesc(c, t, p);
        SCOPED_TRACE(cuda::ToString(d));
        ASSERT_NO_THROW(cuda::ValidateLpPool(d));
        const int64_t nx = d.n * d.c * Prod(d.in_spatial), ny = d.n * d.c * Prod(d.out_spatial);
        const test::HostT x = test::RandomT(t, nx, -2, 2);
        const std::vector<double> xd = x.Doubles();
        std::vector<double> ref(static_cast<size_t>(ny));
        cpu::Pool<double>(SpecOf(d), xd.data(), ref.data(), nullptr);
        auto dx = test::ToDev(x);
        auto dy = test::NanDev(static_cast<size_t>(ny) * cuda::FloatTypeSize(t));
        ASSERT_NO_THROW(cuda::LpPoolForward(d, dx->p, dy->p, nullptr));
        test::ExpectWithin(test::FromDev(*dy, t, ny).Doubles(), ref, test::Abs(ref), Tol(t), "forward");
      }
}

// Deterministic: the same input gives the same bits (both kernels sum in a fixed order).
TEST(LpPoolGpu, RepeatedRunsAreBitwiseEqual) {
  REQUIRE_CUDA_DEVICE();
  for (const Case& c : {Cases()[1], Cases()[5]}) {
    const LpPoolDesc d = MakeDesc(c, FloatType::kF32, 3);
    const int64_t nx = d.n * d.c * Prod(d.in_spatial), ny = d.n * d.c * Prod(d.out_spatial);
    auto dx = test::ToDev(test::RandomT(FloatType::kF32, nx));
    auto a = test::NanDev(static_cast<size_t>(ny) * 4), b = test::NanDev(static_cast<size_t>(ny) * 4);
    ASSERT_NO_THROW(cuda::LpPoolForward(d, dx->p, a->p, nullptr));
    ASSERT_NO_THROW(cuda::LpPoolForward(d, dx->p, b->p, nullptr));
    EXPECT_EQ(test::FromDev(*a, FloatType::kF32, ny).bytes, test::FromDev(*b, FloatType::kF32, ny).bytes);
  }
}

// ---- the executor's nodes -----------------------------------------------------------------------------------------

using Attrs = std::map<std::string, Attribute>;

void Compare(const std::string& op, int opset, const Attrs& attrs, const Tensor& x) {
  SCOPED_TRACE(op + " " + DataTypeName(x.dtype()) + " " + DimsToString(x.dims()));
  const double tol = x.dtype() == DataType::kFloat32 ? 1e-5 : x.dtype() == DataType::kFloat16 ? 2e-3 : 1.6e-2;
  const std::vector<Tensor> cpu = test::RunOp(op, {x}, attrs, 1, opset, {}, nullptr);
  const std::vector<Tensor> gpu = test::RunOp(op, {x}, attrs, 1, opset, {}, test::Gpu());
  ASSERT_EQ(gpu.size(), 1u);
  test::ExpectClose(gpu[0], cpu[0], tol, tol);
}

TEST(ExecutorLpPoolGpu, LpPoolAndGlobalLpPoolMatchTheCpu) {
  REQUIRE_GPU();
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16})
    for (int64_t p : {1, 2, 3}) {
      const Attrs base{{"kernel_shape", Attribute::Ints({3, 3})},
                       {"strides", Attribute::Ints({2, 2})},
                       {"pads", Attribute::Ints({1, 0, 1, 1})},
                       {"p", Attribute::Int(p)}};
      Compare("LpPool", 11, base, test::RandomTensor(t, {2, 3, 9, 10}));
      Attrs dil = base;
      dil["dilations"] = Attribute::Ints({2, 1});
      dil["ceil_mode"] = Attribute::Int(1);
      Compare("LpPool", 18, dil, test::RandomTensor(t, {2, 3, 11, 10}));
      Compare("LpPool", 18,
              {{"kernel_shape", Attribute::Ints({4})},
               {"auto_pad", Attribute::String("SAME_UPPER")},
               {"p", Attribute::Int(p)}},
              test::RandomTensor(t, {3, 2, 15}));
      Compare("GlobalLpPool", 2, {{"p", Attribute::Int(p)}}, test::RandomTensor(t, {2, 5, 7, 6}));
      Compare("GlobalLpPool", 2, {{"p", Attribute::Int(p)}}, test::RandomTensor(t, {2, 4, 30, 30}));  // block kernel
    }
}

}  // namespace
}  // namespace ot
