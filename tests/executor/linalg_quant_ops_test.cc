// Integer and quantized linear ops through the executor against exact references: MatMulInteger with per-row
// and per-column zero points, QLinearMatMul requantization (round half to even, saturation), ConvInteger with
// per-channel weight zero points, QLinearConv with bias.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/test_util.h"

namespace ot {
namespace {

using test::ExpectClose;
using test::RandomTensor;
using test::RunOp;

TEST(LinalgQuantOps, MatMulIntegerPerRowAndPerColumnZeroPoints) {
  const int64_t m = 3, k = 5, n = 4;
  Tensor a = RandomTensor(DataType::kUint8, {m, k}, 0, 256), b = RandomTensor(DataType::kInt8, {k, n}, -128, 128);
  Tensor az = RandomTensor(DataType::kUint8, {m}, 0, 256), bz = RandomTensor(DataType::kInt8, {n}, -128, 128);
  Tensor ref(DataType::kInt32, {m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += (a.GetInt64(i * k + p) - az.GetInt64(i)) * (b.GetInt64(p * n + j) - bz.GetInt64(j));
      ref.SetDouble(i * n + j, static_cast<double>(s));
    }
  ExpectClose(RunOp("MatMulInteger", {a, b, az, bz}, {}, 1, 10)[0], ref, 0, 0);
  // Without zero points, batched.
  Tensor a3 = RandomTensor(DataType::kInt8, {2, m, k}, -128, 128);
  Tensor out = RunOp("MatMulInteger", {a3, b}, {}, 1, 10)[0];
  ASSERT_EQ(out.dims(), (std::vector<int64_t>{2, m, n}));
  for (int64_t bt = 0; bt < 2; ++bt)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int64_t s = 0;
        for (int64_t p = 0; p < k; ++p) s += a3.GetInt64((bt * m + i) * k + p) * b.GetInt64(p * n + j);
        ASSERT_EQ(out.GetInt64((bt * m + i) * n + j), s);
      }
}

TEST(LinalgQuantOps, QLinearMatMulRoundsHalfToEvenAndSaturates) {
  // a = [[2, 3]] (zp 0), b = [[1], [1]] (zp 0): acc 5; scale 0.5 -> 2.5 rounds to 2, + zp 10 = 12.
  Tensor a = Tensor(DataType::kUint8, {1, 2}), b = Tensor(DataType::kUint8, {2, 1});
  a.SetDouble(0, 2), a.SetDouble(1, 3), b.SetDouble(0, 1), b.SetDouble(1, 1);
  Tensor zp0(DataType::kUint8, {}), yzp(DataType::kUint8, {});
  yzp.SetDouble(0, 10);
  auto scalar = [](float v) { return Tensor::FromFloat({v}, {}); };
  Tensor y = RunOp("QLinearMatMul", {a, scalar(1.f), zp0, b, scalar(0.5f), zp0, scalar(1.f), yzp}, {}, 1, 10)[0];
  EXPECT_EQ(y.GetInt64(0), 12);
  // Large product saturates at 255.
  Tensor y2 = RunOp("QLinearMatMul", {a, scalar(100.f), zp0, b, scalar(1.f), zp0, scalar(1.f), yzp}, {}, 1, 10)[0];
  EXPECT_EQ(y2.GetInt64(0), 255);
}

TEST(LinalgQuantOps, ConvIntegerPerChannelWeightZeroPoint) {
  Tensor x = RandomTensor(DataType::kUint8, {1, 2, 4, 4}, 0, 256),
         w = RandomTensor(DataType::kUint8, {3, 2, 2, 2}, 0, 256);
  Tensor xz(DataType::kUint8, {}), wz = RandomTensor(DataType::kUint8, {3}, 0, 256);
  xz.SetDouble(0, 7);
  Tensor y = RunOp("ConvInteger", {x, w, xz, wz}, {{"pads", Attribute::Ints({1, 0, 0, 1})}}, 1, 10)[0];
  // out: H (4+1-2)+1 = 4, W (4+1-2)+1 = 4.
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{1, 3, 4, 4}));
  for (int64_t oc = 0; oc < 3; ++oc)
    for (int64_t oh = 0; oh < 4; ++oh)
      for (int64_t ow = 0; ow < 4; ++ow) {
        int64_t s = 0;
        for (int64_t ic = 0; ic < 2; ++ic)
          for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < 2; ++j) {
              const int64_t ih = oh - 1 + i, iw = ow + j;
              // Padding holds the zero point, so it contributes (x_zp - x_zp) = 0.
              if (ih < 0 || ih >= 4 || iw >= 4) continue;
              s += (x.GetInt64((ic * 4 + ih) * 4 + iw) - 7) *
                   (w.GetInt64(((oc * 2 + ic) * 2 + i) * 2 + j) - wz.GetInt64(oc));
            }
        ASSERT_EQ(y.GetInt64((oc * 4 + oh) * 4 + ow), s) << oc << " " << oh << " " << ow;
      }
}

TEST(LinalgQuantOps, QLinearConvAddsBiasBeforeRequantizing) {
  Tensor x(DataType::kInt8, {1, 1, 1, 1}), w(DataType::kInt8, {1, 1, 1, 1}), zp(DataType::kInt8, {});
  x.SetDouble(0, 3), w.SetDouble(0, 4);
  Tensor bias(DataType::kInt32, {1});
  bias.SetDouble(0, -20);
  auto scalar = [](float v) { return Tensor::FromFloat({v}, {}); };
  // (3*4 - 20) * 0.25 = -2, + zp 0.
  Tensor y = RunOp("QLinearConv", {x, scalar(0.5f), zp, w, scalar(0.5f), zp, scalar(1.f), zp, bias}, {}, 1, 10)[0];
  EXPECT_EQ(y.dtype(), DataType::kInt8);
  EXPECT_EQ(y.GetInt64(0), -2);
}

}  // namespace
}  // namespace ot
