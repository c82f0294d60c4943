// Norm family through the executor (test::RunOp): softmax axis semantics before/after opset 13, BatchNorm
// inference and training (running statistics), LayerNorm statistics outputs, losses with weights and
// ignore_index, and shape errors naming the node.
#include <cmath>

#include "graph/error.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::ExpectClose;
using test::RandomTensor;
using test::RunOp;

// Softmax of x viewed as [outer, n, inner] along n, in double.
Tensor RefSoftmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  Tensor y(x.dtype(), x.dims());
  for (int64_t i = 0; i < outer; ++i)
    for (int64_t j = 0; j < inner; ++j) {
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, x.GetDouble((i * n + k) * inner + j));
      for (int64_t k = 0; k < n; ++k) s += std::exp(x.GetDouble((i * n + k) * inner + j) - m);
      for (int64_t k = 0; k < n; ++k) {
        const int64_t e = (i * n + k) * inner + j;
        const double v = x.GetDouble(e) - m;
        y.SetDouble(e, log ? v - std::log(s) : std::exp(v) / s);
      }
    }
  return y;
}

TEST(NormOps, SoftmaxOpset13UsesOneAxis) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 4});
  auto y = RunOp("Softmax", {x}, {{"axis", Attribute::Int(1)}}, 1, 13);
  ExpectClose(y[0], RefSoftmax(x, 2, 3, 4, false), 1e-5, 1e-7);
  auto d = RunOp("LogSoftmax", {x}, {}, 1, 13);  // default axis -1
  ExpectClose(d[0], RefSoftmax(x, 6, 4, 1, true), 1e-5, 1e-6);
}

TEST(NormOps, SoftmaxBeforeOpset13FlattensTheTail) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 4});
  auto y = RunOp("Softmax", {x}, {}, 1, 11);  // default axis 1: rows of 12
  ExpectClose(y[0], RefSoftmax(x, 2, 12, 1, false), 1e-5, 1e-7);
  auto h = RunOp("Hardmax", {x}, {{"axis", Attribute::Int(2)}}, 1, 11);
  for (int r = 0; r < 6; ++r) {
    int best = 0;
    for (int k = 1; k < 4; ++k)
      if (x.GetDouble(r * 4 + k) > x.GetDouble(r * 4 + best)) best = k;
    for (int k = 0; k < 4; ++k) EXPECT_EQ(h[0].GetDouble(r * 4 + k), k == best ? 1.0 : 0.0);
  }
}

TEST(NormOps, BatchNormInferenceAndTrainingMode) {
  const int64_t N = 2, C = 3, S = 4;
  Tensor x = RandomTensor(DataType::kFloat32, {N, C, 2, 2});
  Tensor scale = RandomTensor(DataType::kFloat32, {C}), bias = RandomTensor(DataType::kFloat32, {C});
  Tensor mean = RandomTensor(DataType::kFloat32, {C}), var = RandomTensor(DataType::kFloat32, {C}, 0.5, 2);
  auto y = RunOp("BatchNormalization", {x, scale, bias, mean, var}, {{"epsilon", Attribute::Float(1e-3f)}}, 1, 15);
  Tensor e(DataType::kFloat32, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / S) % C;
    e.SetDouble(i, (x.GetDouble(i) - mean.GetDouble(c)) / std::sqrt(var.GetDouble(c) + 1e-3) * scale.GetDouble(c) +
                       bias.GetDouble(c));
  }
  ExpectClose(y[0], e, 1e-5, 1e-6);

  auto t = RunOp("BatchNormalization", {x, scale, bias, mean, var},
                 {{"training_mode", Attribute::Int(1)}, {"momentum", Attribute::Float(0.8f)}}, 3, 15);
  Tensor et(DataType::kFloat32, x.dims()), rm(DataType::kFloat32, {C}), rv(DataType::kFloat32, {C});
  for (int64_t c = 0; c < C; ++c) {
    double s = 0, s2 = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < S; ++j) s += x.GetDouble((n * C + c) * S + j);
    const double m = s / (N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < S; ++j) s2 += std::pow(x.GetDouble((n * C + c) * S + j) - m, 2);
    const double v = s2 / (N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < S; ++j) {
        const int64_t i = (n * C + c) * S + j;
        et.SetDouble(i, (x.GetDouble(i) - m) / std::sqrt(v + 1e-5) * scale.GetDouble(c) + bias.GetDouble(c));
      }
    rm.SetDouble(c, 0.8 * mean.GetDouble(c) + 0.2 * m);
    rv.SetDouble(c, 0.8 * var.GetDouble(c) + 0.2 * v);
  }
  ExpectClose(t[0], et, 1e-5, 1e-5);
  ExpectClose(t[1], rm, 1e-5, 1e-6);
  ExpectClose(t[2], rv, 1e-5, 1e-6);
}

TEST(NormOps, BatchNormChannelMismatchFails) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 4});
  Tensor p = RandomTensor(DataType::kFloat32, {4});
  EXPECT_THROW(RunOp("BatchNormalization", {x, p, p, p, p}, {}, 1, 15), Error);
}

TEST(NormOps, LayerNormOutputsStatistics) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 4});
  Tensor w = RandomTensor(DataType::kFloat32, {3, 4}), b = RandomTensor(DataType::kFloat32, {3, 4});
  auto y = RunOp("LayerNormalization", {x, w, b}, {{"axis", Attribute::Int(1)}}, 3, 17);
  ASSERT_EQ(y[1].dims(), (std::vector<int64_t>{2, 1, 1}));
  ASSERT_EQ(y[2].dtype(), DataType::kFloat32);
  Tensor e(DataType::kFloat32, x.dims()), em(DataType::kFloat32, {2, 1, 1}), ei(DataType::kFloat32, {2, 1, 1});
  for (int r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 12; ++j) m += x.GetDouble(r * 12 + j);
    m /= 12;
    for (int j = 0; j < 12; ++j) v += std::pow(x.GetDouble(r * 12 + j) - m, 2);
    const double is = 1 / std::sqrt(v / 12 + 1e-5);
    for (int j = 0; j < 12; ++j)
      e.SetDouble(r * 12 + j, (x.GetDouble(r * 12 + j) - m) * is * w.GetDouble(j) + b.GetDouble(j));
    em.SetDouble(r, m);
    ei.SetDouble(r, is);
  }
  ExpectClose(y[0], e, 1e-5, 1e-6);
  ExpectClose(y[1], em, 1e-5, 1e-6);
  ExpectClose(y[2], ei, 1e-5, 1e-6);
}

TEST(NormOps, SoftmaxCrossEntropyWithWeightsAndIgnoreIndex) {
  const int64_t N = 4, C = 3;
  Tensor x = RandomTensor(DataType::kFloat32, {N, C});
  Tensor labels = Tensor::FromInt64({0, 2, 1, 2}, {N});
  Tensor w = RandomTensor(DataType::kFloat32, {C}, 0.1, 1);
  auto y = RunOp("SoftmaxCrossEntropyLoss", {x, labels, w}, {{"ignore_index", Attribute::Int(1)}}, 2, 13);
  ASSERT_EQ(y[0].rank(), 0);
  Tensor lp = RefSoftmax(x, N, C, 1, true);
  ExpectClose(y[1], lp, 1e-5, 1e-6);
  double s = 0, ws = 0;
  for (int64_t i = 0; i < N; ++i) {
    const int64_t t = labels.GetInt64(i);
    if (t == 1) continue;
    s -= lp.GetDouble(i * C + t) * w.GetDouble(t);
    ws += w.GetDouble(t);
  }
  EXPECT_NEAR(y[0].GetDouble(0), s / ws, 1e-5 * std::fabs(s / ws));
}

TEST(NormOps, NllLossNoneKeepsTargetShapeAndRejectsMismatch) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 5});
  Tensor t = Tensor::FromInt64({0, 1, 2, 0, 1, 2, 2, 1, 0, 0}, {2, 5});
  auto y = RunOp("NegativeLogLikelihoodLoss", {x, t}, {{"reduction", Attribute::String("none")}}, 1, 13);
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{2, 5}));
  for (int n = 0; n < 2; ++n)
    for (int d = 0; d < 5; ++d)
      EXPECT_FLOAT_EQ(y[0].GetDouble(n * 5 + d), -x.GetDouble((n * 3 + t.GetInt64(n * 5 + d)) * 5 + d));
  Tensor bad = Tensor::FromInt64({0, 1}, {2});
  EXPECT_THROW(RunOp("NegativeLogLikelihoodLoss", {x, bad}, {}, 1, 13), Error);
  Tensor out_of_range = Tensor::FromInt64({0, 1, 7, 0, 1, 2, 2, 1, 0, 0}, {2, 5});
  EXPECT_THROW(RunOp("NegativeLogLikelihoodLoss", {x, out_of_range}, {}, 1, 13), Error);
}

}  // namespace
}  // namespace ot
