// cuda_ops/cudnn_conv_transpose.h against a float64 loop over ConvTranspose's definition
//   Y[n, co, o] = bias[co] + sum over ci of co's group, i, j with o = i * stride - pad_begin + j * dilation
//                 of X[n, ci, i] * W[ci, co mod (C_out/group), j]
// on the inputs as rounded to the tested type, f32/f16/bf16, 1-D to 3-D, strides, dilations, groups, pads and
// output_padding (pad_end below 0: rows no input reaches), both lowerings (direct backward-data, and the cropped
// one through the workspace). Outputs start as NaN, so an unwritten element fails. Bound per element: tol x the same
// sum over absolute values (fp32 1e-4: FFT / Winograd algorithms round more than a direct sum; fp16 3e-3; bf16
// 2e-2, the convolution tests' bounds). Then the executor's ConvTranspose node (executor/cuda/kernels_conv.cc)
// against the CPU executor, with auto_pad, output_shape and output_padding, and the nodes its gradient rule emits
// (graph/grad/conv_transpose_grad.cc: Conv(dY, W) and ConvGradWeight(X, dY, shape(W)) with the rule's pads).
// The lowering's host logic runs without a GPU; the rest is label `gpu` (tests named *Gpu*).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_ops/cudnn_conv_transpose.h"
#include "executor/device.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/tensor.h"
#include "tests/cuda/cudnn_test_util.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using cuda::ConvTransposeDesc;
using cuda::FloatType;

struct Case {
  int64_t n, c_in, c_out, group;
  std::vector<int64_t> in, kernel, strides, dilations, pad_begin, pad_end_onnx, output_padding;
  bool cropped;  // the lowering expected
};

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

ConvTransposeDesc MakeDesc(const Case& c, FloatType t) {
  ConvTransposeDesc d;
  d.type = t;
  d.n = c.n;
  d.c_in = c.c_in;
  d.c_out = c.c_out;
  d.group = c.group;
  d.in_spatial = c.in;
  d.kernel = c.kernel;
  d.strides = c.strides;
  d.dilations = c.dilations;
  d.pad_begin = c.pad_begin;
  for (size_t i = 0; i < c.in.size(); ++i) {
    d.pad_end.push_back(c.pad_end_onnx[i] - c.output_padding[i]);  // linalg::ConvTransposeAxis's pad_end
    d.out_spatial.push_back((c.in[i] - 1) * c.strides[i] + (c.kernel[i] - 1) * c.dilations[i] + 1 - c.pad_begin[i] -
                            d.pad_end.back());
  }
  return d;
}

std::vector<Case> Cases() {
  return {
      {2, 4, 6, 1, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, false},  // stride 1, pads 1
      {2, 4, 3, 1, {5, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false},  // PyTorch's 2x upsampling
      {1, 4, 6, 2, {4, 5}, {3, 2}, {1, 2}, {2, 1}, {0, 1}, {0, 1}, {0, 0}, false},  // groups, dilations
      {2, 3, 2, 1, {4, 4}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, false},  // DCGAN's k4 s2 p1
      {2, 3, 4, 1, {7}, {3}, {3}, {1}, {0}, {0}, {2}, false},                       // 1-D, 2 rows no input reaches
      {1, 2, 4, 2, {3, 4, 3}, {2, 3, 2}, {2, 1, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 0}, {1, 0, 1}, true},  // 3-D
      {2, 3, 5, 1, {6, 5}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, {0, 0}, true},      // SAME_UPPER's (0, 1) pads
      {1, 2, 3, 1, {4}, {3}, {2}, {1}, {0}, {0}, {4}, true},                           // 4 rows past the input
      {2, 6, 6, 3, {6, 7}, {3, 3}, {1, 2}, {1, 1}, {2, 0}, {0, 0}, {0, 1}, true},      // begin pad > end pad + stride
      {4, 16, 8, 1, {14, 14}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, false},  // larger
  };
}

// The definition, in float64, padded to 3 spatial dims. mag: the same sum over absolute values.
void Reference(const ConvTransposeDesc& d, const std::vector<double>& x, const std::vector<double>& w,
               const std::vector<double>* bias, std::vector<double>& y, std::vector<double>& mag) {
  const size_t r = d.in_spatial.size(), lead = 3 - r;
  int64_t in[3], out[3], k[3], s[3], dl[3], pb[3];
  for (size_t i = 0; i < 3; ++i) {
    const bool pad = i < lead;
    const size_t j = i - lead;
    in[i] = pad ? 1 : d.in_spatial[j];
    out[i] = pad ? 1 : d.out_spatial[j];
    k[i] = pad ? 1 : d.kernel[j];
    s[i] = pad ? 1 : d.strides[j];
    dl[i] = pad ? 1 : d.dilations[j];
    pb[i] = pad ? 0 : d.pad_begin[j];
  }
  const int64_t cig = d.c_in / d.group, cog = d.c_out / d.group, insz = in[0] * in[1] * in[2],
                outsz = out[0] * out[1] * out[2], ksz = k[0] * k[1] * k[2];
  y.assign(static_cast<size_t>(d.n * d.c_out * outsz), 0.0);
  mag.assign(y.size(), 0.0);
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t ci = 0; ci < d.c_in; ++ci) {
      const int64_t g = ci / cig;
      for (int64_t co_g = 0; co_g < cog; ++co_g) {
        const int64_t co = g * cog + co_g;
        for (int64_t i0 = 0; i0 < in[0]; ++i0)
          for (int64_t i1 = 0; i1 < in[1]; ++i1)
            for (int64_t i2 = 0; i2 < in[2]; ++i2) {
              const double xv = x[static_cast<size_t>((n * d.c_in + ci) * insz + (i0 * in[1] + i1) * in[2] + i2)];
              for (int64_t j0 = 0; j0 < k[0]; ++j0)
                for (int64_t j1 = 0; j1 < k[1]; ++j1)
                  for (int64_t j2 = 0; j2 < k[2]; ++j2) {
                    const int64_t o0 = i0 * s[0] - pb[0] + j0 * dl[0], o1 = i1 * s[1] - pb[1] + j1 * dl[1],
                                  o2 = i2 * s[2] - pb[2] + j2 * dl[2];
                    if (o0 < 0 || o0 >= out[0] || o1 < 0 || o1 >= out[1] || o2 < 0 || o2 >= out[2]) continue;
                    const double wv = w[static_cast<size_t>((ci * cog + co_g) * ksz + (j0 * k[1] + j1) * k[2] + j2)];
                    const size_t o = static_cast<size_t>((n * d.c_out + co) * outsz + (o0 * out[1] + o1) * out[2] + o2);
                    y[o] += xv * wv;
                    mag[o] += std::fabs(xv * wv);
                  }
            }
      }
    }
  if (bias)
    for (size_t o = 0; o < y.size(); ++o) {
      const double b = (*bias)[static_cast<size_t>((static_cast<int64_t>(o) / outsz) % d.c_out)];
      y[o] += b;
      mag[o] += std::fabs(b);
    }
}

double Tol(FloatType t) { return t == FloatType::kF32 ? 1e-4 : t == FloatType::kF16 ? 3e-3 : 2e-2; }

// ---- host logic (no GPU) ----------------------------------------------------------------------------------------

TEST(ConvTranspose, LoweringPicksDirectOrCroppedAndIsAValidConvolution) {
  for (const Case& c : Cases()) {
    const ConvTransposeDesc d = MakeDesc(c, FloatType::kF32);
    SCOPED_TRACE(cuda::ToString(d));
    ASSERT_NO_THROW(cuda::ValidateConvTranspose(d));
    EXPECT_EQ(cuda::ConvTransposeUnsupportedReason(d), "");
    const cuda::ConvTransposeLowering l = cuda::LowerConvTranspose(d);
    EXPECT_EQ(l.cropped, c.cropped);
    EXPECT_NO_THROW(cuda::ValidateConv(l.conv));
    EXPECT_EQ(cuda::ConvUnsupportedReason(l.conv), "");
    EXPECT_EQ(l.conv.out_spatial, d.in_spatial);
    EXPECT_EQ(l.conv.c_in, d.c_out);
    EXPECT_EQ(l.conv.c_out, d.c_in);
    if (!l.cropped) {
      EXPECT_EQ(l.conv.in_spatial, d.out_spatial);
    }
  }
}

TEST(ConvTranspose, ValidateRejectsMalformedDescs) {
  const ConvTransposeDesc d = MakeDesc(Cases()[1], FloatType::kF32);
  ConvTransposeDesc bad = d;
  bad.out_spatial[0] += 1;
  EXPECT_THROW(cuda::ValidateConvTranspose(bad), std::invalid_argument);
  bad = d;
  bad.c_out = 5;
  bad.group = 2;
  EXPECT_THROW(cuda::ValidateConvTranspose(bad), std::invalid_argument);
  bad = d;
  bad.pad_begin[0] = -1;
  EXPECT_THROW(cuda::ValidateConvTranspose(bad), std::invalid_argument);
  // 4-D (the 2-D case with two more spatial dims of 1): named, not run.
  ConvTransposeDesc four = d;
  for (auto* v : {&four.in_spatial, &four.out_spatial, &four.kernel, &four.strides, &four.dilations, &four.pad_begin,
                  &four.pad_end})
    v->insert(v->end(), 2, v == &four.pad_begin || v == &four.pad_end ? 0 : 1);
  ASSERT_NO_THROW(cuda::ValidateConvTranspose(four));
  EXPECT_NE(cuda::ConvTransposeUnsupportedReason(four).find("4-D"), std::string::npos);
}

// ---- the launcher on the GPU --------------------------------------------------------------------------------------

TEST(ConvTransposeGpu, ForwardMatchesTheDefinitionInFloat64) {
  REQUIRE_CUDA_DEVICE();
  for (FloatType t : {FloatType::kF32, FloatType::kF16, FloatType::kBF16})
    for (const Case& c : Cases())
      for (bool with_bias : {false, true}) {
        const ConvTransposeDesc d = MakeDesc(c, t);
        SCOPED_TRACE(cuda::ToString(d) + (with_bias ? " bias" : ""));
        const int64_t nx = d.n * d.c_in * Prod(d.in_spatial), nw = d.c_in * (d.c_out / d.group) * Prod(d.kernel),
                      ny = d.n * d.c_out * Prod(d.out_spatial);
        const test::HostT x = test::RandomT(t, nx), w = test::RandomT(t, nw), b = test::RandomT(t, d.c_out);
        const std::vector<double> xd = x.Doubles(), wd = w.Doubles(), bd = b.Doubles();
        std::vector<double> ref, mag;
        Reference(d, xd, wd, with_bias ? &bd : nullptr, ref, mag);
        auto dx = test::ToDev(x), dw = test::ToDev(w), db = test::ToDev(b);
        auto dy = test::NanDev(static_cast<size_t>(ny) * cuda::FloatTypeSize(t));
        size_t ws = 0;
        ASSERT_NO_THROW(ws = cuda::ConvTransposeWorkspaceBytes(d));
        auto dws = test::NanDev(ws);
        ASSERT_NO_THROW(cuda::ConvTransposeForward(d, dx->p, dw->p, with_bias ? db->p : nullptr, dy->p,
                                                   ws ? dws->p : nullptr, ws, nullptr));
        test::ExpectWithin(test::FromDev(*dy, t, ny).Doubles(), ref, mag, Tol(t), "forward");
      }
}

TEST(ConvTransposeGpu, DeterministicRunsAreBitwiseEqual) {
  REQUIRE_CUDA_DEVICE();
  for (const Case& c : {Cases()[1], Cases()[6]}) {
    ConvTransposeDesc d = MakeDesc(c, FloatType::kF32);
    d.deterministic = true;
    const int64_t nx = d.n * d.c_in * Prod(d.in_spatial), nw = d.c_in * (d.c_out / d.group) * Prod(d.kernel),
                  ny = d.n * d.c_out * Prod(d.out_spatial);
    auto dx = test::ToDev(test::RandomT(FloatType::kF32, nx)), dw = test::ToDev(test::RandomT(FloatType::kF32, nw));
    size_t ws = 0;
    ASSERT_NO_THROW(ws = cuda::ConvTransposeWorkspaceBytes(d));
    auto dws = test::NanDev(ws);
    auto a = test::NanDev(static_cast<size_t>(ny) * 4), b = test::NanDev(static_cast<size_t>(ny) * 4);
    ASSERT_NO_THROW(cuda::ConvTransposeForward(d, dx->p, dw->p, nullptr, a->p, dws->p, ws, nullptr));
    ASSERT_NO_THROW(cuda::ConvTransposeForward(d, dx->p, dw->p, nullptr, b->p, dws->p, ws, nullptr));
    EXPECT_EQ(test::FromDev(*a, FloatType::kF32, ny).bytes, test::FromDev(*b, FloatType::kF32, ny).bytes);
  }
}

// ---- the executor's nodes -----------------------------------------------------------------------------------------

using Attrs = std::map<std::string, Attribute>;

double NodeTol(DataType t) { return t == DataType::kFloat32 ? 1e-4 : t == DataType::kFloat16 ? 4e-3 : 3e-2; }

void Compare(const std::string& op, const std::string& domain, const Attrs& attrs, const std::vector<Tensor>& in,
             const std::vector<int>& constants = {}) {
  SCOPED_TRACE(op + " " + DataTypeName(in[0].dtype()) + " " + DimsToString(in[0].dims()));
  const double tol = NodeTol(in[0].dtype());
  const std::vector<Tensor> cpu = test::RunOp(op, in, attrs, 1, 17, constants, nullptr, domain);
  const std::vector<Tensor> gpu = test::RunOp(op, in, attrs, 1, 17, constants, test::Gpu(), domain);
  ASSERT_EQ(gpu.size(), 1u);
  test::ExpectClose(gpu[0], cpu[0], tol, tol);
}

Tensor Ints(const std::vector<int64_t>& v) {
  Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.SetDouble(static_cast<int64_t>(i), static_cast<double>(v[i]));
  return t;
}

TEST(ExecutorConvTransposeGpu, ConvTransposeMatchesTheCpu) {
  REQUIRE_GPU();
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    const Tensor x = test::RandomTensor(t, {2, 4, 5, 5}), w = test::RandomTensor(t, {4, 3, 3, 3}),
                 b = test::RandomTensor(t, {3});
    // PyTorch's ConvTranspose2d(k=3, s=2, p=1, output_padding=1), with and without bias.
    const Attrs up{{"strides", Attribute::Ints({2, 2})},
                   {"pads", Attribute::Ints({1, 1, 1, 1})},
                   {"output_padding", Attribute::Ints({1, 1})}};
    Compare("ConvTranspose", "", up, {x, w, b});
    Compare("ConvTranspose", "", up, {x, w});
    // Groups and dilations.
    Compare("ConvTranspose", "", {{"group", Attribute::Int(2)}, {"dilations", Attribute::Ints({2, 1})}},
            {x, test::RandomTensor(t, {4, 2, 3, 2}), test::RandomTensor(t, {4})});
    // auto_pad SAME_UPPER: out = in * stride, pads (0, 1): the cropped lowering.
    Compare("ConvTranspose", "", {{"strides", Attribute::Ints({2, 2})}, {"auto_pad", Attribute::String("SAME_UPPER")}},
            {x, w, b});
    // output_shape beyond the natural size: rows past every input's reach hold the bias only.
    Compare("ConvTranspose", "", {{"strides", Attribute::Ints({2, 2})}, {"output_shape", Attribute::Ints({12, 13})}},
            {x, w, b});
    // 1-D and 3-D.
    Compare("ConvTranspose", "", {{"strides", Attribute::Ints({3})}, {"output_padding", Attribute::Ints({2})}},
            {test::RandomTensor(t, {2, 3, 7}), test::RandomTensor(t, {3, 4, 3}), test::RandomTensor(t, {4})});
    Compare("ConvTranspose", "",
            {{"strides", Attribute::Ints({2, 1, 2})}, {"pads", Attribute::Ints({0, 1, 1, 0, 1, 0})}},
            {test::RandomTensor(t, {1, 2, 3, 4, 3}), test::RandomTensor(t, {2, 4, 2, 3, 2})});
  }
}

// What ConvTranspose's gradient rule emits for PyTorch's upsampling layer (k 3, s 2, pads 1, output_padding 1:
// conv pads (1, 0) per axis), on the GPU: dX = Conv(dY, W), dW = ConvGradWeight(X, dY, shape(W)), dB = ReduceSum.
TEST(ExecutorConvTransposeGpu, GradientNodesMatchTheCpu) {
  REQUIRE_GPU();
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    for (int64_t group : {1, 2}) {
      const Tensor x = test::RandomTensor(t, {2, 4, 5, 5}), w = test::RandomTensor(t, {4, 6 / group, 3, 3}),
                   dy = test::RandomTensor(t, {2, 6, 10, 10});
      const Attrs conv{{"strides", Attribute::Ints({2, 2})},
                       {"pads", Attribute::Ints({1, 1, 0, 0})},
                       {"dilations", Attribute::Ints({1, 1})},
                       {"group", Attribute::Int(group)}};
      Compare("Conv", "", conv, {dy, w});
      Compare("ConvGradWeight", kInternalDomain, conv, {x, dy, Ints({4, 6 / group, 3, 3})}, {2});
    }
    Compare("ReduceSum", "", {{"keepdims", Attribute::Int(0)}},
            {test::RandomTensor(t, {2, 6, 10, 10}), Ints({0, 2, 3})}, {1});
  }
}

// Refusals name the node and the reason.
TEST(ExecutorConvTransposeGpu, UnsupportedConfigurationsAreNamed) {
  REQUIRE_GPU();
  try {
    test::RunOp(
        "ConvTranspose",
        {test::RandomTensor(DataType::kFloat64, {1, 2, 4, 4}), test::RandomTensor(DataType::kFloat64, {2, 3, 3, 3})},
        {}, 1, 17, {}, test::Gpu());
    FAIL() << "float64 ConvTranspose ran on the GPU";
  } catch (const UnsupportedError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("ConvTranspose"), std::string::npos) << m;
    EXPECT_NE(m.find("float64"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace ot
