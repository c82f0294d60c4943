// The CNN ops of the CUDA backend (executor/cuda/kernels_conv*.cc) through the executor: each IR op on the GPU
// against the CPU executor on fresh random inputs (Conv with bias and groups, ConvGradData, ConvGradWeight, the
// pooling ops and their gradients, BatchNormalization in both forms, BatchNormGrad in both forms, ReduceSum over
// N and space), in fp32, fp16 and bf16 (BatchNorm parameters fp32, as AMP leaves them), and the configurations the
// GPU refuses, named. Label `gpu` (tests named *Gpu*), skipped without a device.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/device.h"
#include "executor/executor.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "tests/cuda/gpu_test_util.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using Attrs = std::map<std::string, Attribute>;

using test::Gpu;

struct Op {
  std::string type, domain;
  int opset = 15;
  Attrs attrs;
  int outputs = 1;
  std::vector<int> constants;  // inputs given as initializers (values known when the plan is made)
  Op(std::string t, std::string d, int o, Attrs a = {}, int outs = 1, std::vector<int> consts = {})
      : type(std::move(t)),
        domain(std::move(d)),
        opset(o),
        attrs(std::move(a)),
        outputs(outs),
        constants(std::move(consts)) {}
};

// Runs one node on `dev` (null: the CPU); returns its outputs.
std::vector<Tensor> RunNode(const Op& op, const std::vector<Tensor>& in, std::shared_ptr<DeviceBackend> dev) {
  return test::RunOp(op.type, in, op.attrs, op.outputs, op.opset, op.constants, std::move(dev), op.domain);
}

void Compare(const Op& op, const std::vector<Tensor>& in, double tol) {
  SCOPED_TRACE(op.type + " " + DataTypeName(in[0].dtype()));
  const std::vector<Tensor> cpu = RunNode(op, in, nullptr), gpu = RunNode(op, in, Gpu());
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    test::ExpectClose(gpu[i], cpu[i], tol, tol);
  }
}

Tensor Ints(const std::vector<int64_t>& v) {
  Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.SetDouble(static_cast<int64_t>(i), static_cast<double>(v[i]));
  return t;
}

// Values distinct inside any window spanning less than 251 flat positions (MaxPoolGrad routes a tie's gradient to
// an element of cuDNN's choosing), exact in every float type.
Tensor NoTies(DataType t, const std::vector<int64_t>& dims) {
  Tensor r(t, dims);
  const int64_t a = 1 + static_cast<int64_t>(test::Rng()() % 250), b = static_cast<int64_t>(test::Rng()() % 251);
  for (int64_t i = 0; i < r.numel(); ++i) r.SetDouble(i, static_cast<double>((i * a + b) % 251 - 125) / 64.0);
  return r;
}

double Tol(DataType t) { return t == DataType::kFloat32 ? 1e-4 : t == DataType::kFloat16 ? 4e-3 : 3e-2; }

const DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

TEST(ExecutorCnnGpu, ConvAndItsGradientsMatchTheCpu) {
  REQUIRE_GPU();
  for (DataType t : kTypes) {
    const double tol = Tol(t);
    const Attrs attrs{{"group", Attribute::Int(2)},
                      {"strides", Attribute::Ints({2, 1})},
                      {"pads", Attribute::Ints({1, 1, 1, 1})},
                      {"kernel_shape", Attribute::Ints({3, 3})}};
    const Tensor x = test::RandomTensor(t, {3, 4, 11, 9}), w = test::RandomTensor(t, {6, 2, 3, 3}),
                 b = test::RandomTensor(t, {6});
    Compare({"Conv", "", 15, attrs}, {x, w, b}, tol);
    Compare({"Conv", "", 15, {{"dilations", Attribute::Ints({2, 2})}}}, {x, test::RandomTensor(t, {5, 4, 3, 3})}, tol);
    const Tensor dy = test::RandomTensor(t, {3, 6, 6, 9});
    Compare({"ConvGradData", kInternalDomain, 1, attrs, 1, {2}}, {dy, w, Ints({3, 4, 11, 9})}, tol);
    Compare({"ConvGradWeight", kInternalDomain, 1, attrs, 1, {2}}, {dy, x, Ints({6, 2, 3, 3})}, tol);
    // 1-D and 3-D
    Compare({"Conv", "", 15, {{"pads", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2})}}},
            {test::RandomTensor(t, {2, 3, 17}), test::RandomTensor(t, {4, 3, 5}), test::RandomTensor(t, {4})}, tol);
    Compare({"Conv", "", 15, {{"pads", Attribute::Ints({1, 1, 0, 1, 1, 0})}}},
            {test::RandomTensor(t, {2, 2, 5, 6, 4}), test::RandomTensor(t, {3, 2, 3, 3, 2})}, tol);
  }
}

TEST(ExecutorCnnGpu, PoolingAndItsGradientsMatchTheCpu) {
  REQUIRE_GPU();
  for (DataType t : kTypes) {
    const double tol = Tol(t);
    const Attrs max{{"kernel_shape", Attribute::Ints({3, 3})},
                    {"strides", Attribute::Ints({2, 2})},
                    {"pads", Attribute::Ints({1, 1, 1, 1})}};
    const Tensor x = NoTies(t, {2, 3, 9, 10});
    Compare({"MaxPool", "", 15, max}, {x}, 0);  // exact: the selected element
    Compare({"MaxPoolGrad", kInternalDomain, 1, max}, {test::RandomTensor(t, {2, 3, 5, 5}), x}, tol);
    for (int include : {0, 1}) {
      Attrs avg = max;
      avg["count_include_pad"] = Attribute::Int(include);
      Compare({"AveragePool", "", 15, avg}, {test::RandomTensor(t, {2, 3, 9, 10})}, tol);
      Compare({"AveragePoolGrad", kInternalDomain, 1, avg, 1, {1}},
              {test::RandomTensor(t, {2, 3, 5, 5}), Ints({2, 3, 9, 10})}, tol);
    }
    const Attrs pool2{{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}};
    Compare({"MaxPool", "", 15, pool2}, {NoTies(t, {4, 16, 28, 28})}, 0);  // the fashion CNN's
    Compare({"GlobalAveragePool", "", 15}, {test::RandomTensor(t, {2, 5, 7, 6})}, tol);
    Compare({"GlobalMaxPool", "", 15}, {NoTies(t, {2, 5, 7, 6})}, 0);
  }
}

TEST(ExecutorCnnGpu, BatchNormalizationMatchesTheCpu) {
  REQUIRE_GPU();
  for (DataType t : kTypes) {
    const double tol = Tol(t);
    const int64_t c = 6;
    const std::vector<Tensor> in = {
        test::RandomTensor(t, {4, c, 7, 5}, -2, 3), test::RandomTensor(DataType::kFloat32, {c}, 0.5, 1.5),
        test::RandomTensor(DataType::kFloat32, {c}), test::RandomTensor(DataType::kFloat32, {c}),
        test::RandomTensor(DataType::kFloat32, {c}, 0.5, 2)};
    // Training: Y and the running statistics (m running + (1 - m) batch, the batch variance biased).
    Compare(
        {"BatchNormalization", "", 15, {{"training_mode", Attribute::Int(1)}, {"momentum", Attribute::Float(0.8f)}}, 3},
        in, tol);
    Compare({"BatchNormalization", "", 15, {{"epsilon", Attribute::Float(1e-3f)}}}, in, tol);  // inference
    // [N, C] input (spatial 1).
    Compare({"BatchNormalization", "", 15, {{"training_mode", Attribute::Int(1)}}, 3},
            {test::RandomTensor(t, {9, c}), in[1], in[2], in[3], in[4]}, tol);
    const Tensor dy = test::RandomTensor(t, {4, c, 7, 5});
    Compare({"BatchNormGrad", kInternalDomain, 1, {{"training", Attribute::Int(1)}}, 3}, {dy, in[0], in[1]},
            t == DataType::kFloat32 ? 1e-4 : tol);
    Compare({"BatchNormGrad", kInternalDomain, 1, {{"training", Attribute::Int(0)}}, 3},
            {dy, in[0], in[1], in[3], in[4]}, t == DataType::kFloat32 ? 1e-4 : tol);
  }
}

// Conv's bias gradient: ReduceSum(dY, axes {0, 2, 3}) (the generated kernels reduce trailing axes only).
TEST(ExecutorCnnGpu, ReduceSumOverBatchAndSpaceMatchesTheCpu) {
  REQUIRE_GPU();
  for (DataType t : kTypes) {
    const Tensor dy = test::RandomTensor(t, {8, 16, 14, 14});
    for (int keep : {0, 1})
      Compare({"ReduceSum", "", 15, {{"keepdims", Attribute::Int(keep)}}, 1, {1}}, {dy, Ints({0, 2, 3})},
              t == DataType::kFloat32 ? 1e-5 : Tol(t));
    Compare({"ReduceSum", "", 15, {{"keepdims", Attribute::Int(0)}}, 1, {1}},
            {test::RandomTensor(t, {5, 7, 9}), Ints({0, 2})}, t == DataType::kFloat32 ? 1e-5 : Tol(t));
    // What the generated kernels lower (trailing axes) still runs as before.
    Compare({"ReduceSum", "", 15, {{"keepdims", Attribute::Int(0)}}, 1, {1}},
            {test::RandomTensor(t, {5, 7, 9}), Ints({2})}, t == DataType::kFloat32 ? 1e-5 : Tol(t));
  }
}

// What cuDNN's legacy API cannot express is refused when the plan is made, naming the node and the reason.
TEST(ExecutorCnnGpu, UnsupportedConfigurationsAreNamed) {
  REQUIRE_GPU();
  auto expect_refused = [](const Op& op, const std::vector<Tensor>& in, const std::string& why) {
    SCOPED_TRACE(op.type);
    try {
      RunNode(op, in, Gpu());
      FAIL() << op.type << " ran on the GPU";
    } catch (const UnsupportedError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("node 'node' (" + op.type), std::string::npos) << m;  // test::RunOp's node
      EXPECT_NE(m.find(why), std::string::npos) << m;
    }
  };
  const Tensor x = test::RandomTensor(DataType::kFloat32, {1, 2, 6, 6});
  // SAME_UPPER with an even kernel pads (0, 1): not symmetric, and the output size differs from pad 0 or 1.
  expect_refused({"Conv", "", 15, {{"auto_pad", Attribute::String("SAME_UPPER")}}},
                 {x, test::RandomTensor(DataType::kFloat32, {3, 2, 2, 2})}, "symmetric");
  expect_refused({"MaxPool", "", 15, {{"kernel_shape", Attribute::Ints({2, 2})}}, 2}, {x}, "Indices");
  expect_refused(
      {"MaxPool", "", 15, {{"kernel_shape", Attribute::Ints({2, 2})}, {"dilations", Attribute::Ints({2, 2})}}}, {x},
      "dilation");
  expect_refused({"MaxPool",
                  "",
                  15,
                  {{"kernel_shape", Attribute::Ints({3, 3})},
                   {"strides", Attribute::Ints({2, 2})},
                   {"ceil_mode", Attribute::Int(1)}}},
                 {x}, "ceil_mode");
  // float64 has no GPU kernel here.
  expect_refused(
      {"Conv", "", 15},
      {test::RandomTensor(DataType::kFloat64, {1, 2, 6, 6}), test::RandomTensor(DataType::kFloat64, {3, 2, 3, 3})},
      "float64");
}

}  // namespace
}  // namespace ot
