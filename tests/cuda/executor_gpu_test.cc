// The executor on a CUDA device (executor/device.h, executor/cuda/): single ops and whole steps run on the GPU and
// compared with the CPU executor on fresh random inputs. Label `gpu` (tests named *Gpu*), skipped without a device.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "executor/device.h"
#include "executor/executor.h"
#include "graph/error.h"
#include "tests/test_util.h"

namespace ot {
namespace {

std::shared_ptr<DeviceBackend> Gpu() {
  static std::shared_ptr<DeviceBackend> d = CudaDeviceCount() > 0 ? OpenDevice("cuda:0") : nullptr;
  return d;
}

#define REQUIRE_GPU() \
  if (!Gpu()) GTEST_SKIP() << "no CUDA device"

// Runs op on the CPU and on the GPU and compares every output.
void Compare(const std::string& op, const std::vector<Tensor>& in, const std::map<std::string, Attribute>& attrs = {},
             double rtol = 1e-5, int opset = 17, const std::vector<int>& constants = {}) {
  SCOPED_TRACE(op);
  const std::vector<Tensor> cpu = test::RunOp(op, in, attrs, 1, opset, constants);
  const std::vector<Tensor> gpu = test::RunOp(op, in, attrs, 1, opset, constants, Gpu());
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) test::ExpectClose(gpu[i], cpu[i], rtol, rtol);
}

TEST(ExecutorGpu, ElementwiseOpsMatchTheCpu) {
  REQUIRE_GPU();
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    SCOPED_TRACE(DataTypeName(t));
    const double tol = t == DataType::kFloat32 ? 1e-5 : t == DataType::kFloat16 ? 2e-3 : 1.6e-2;
    const Tensor a = test::RandomTensor(t, {7, 33, 65}, -2, 2), b = test::RandomTensor(t, {33, 1}, 0.5, 2);
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max"}) Compare(op, {a, b}, {}, tol);
    for (const char* op : {"Relu", "Tanh", "Sigmoid", "Exp", "Erf", "Neg", "Abs", "Sqrt", "Log"}) Compare(op, {a}, {}, tol);
  }
  const Tensor x = test::RandomTensor(DataType::kFloat32, {5, 1000}, -3, 3);
  Compare("Cast", {x}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat16))}}, 1e-3);
  Compare("Cast", {test::RandomTensor(DataType::kFloat16, {3, 77}, -3, 3)},
          {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat32))}}, 0);
  Tensor shape(DataType::kInt64, {2});
  shape.SetDouble(0, 1000);
  shape.SetDouble(1, 5);
  Compare("Reshape", {x, shape}, {}, 0, 17, {1});
}

TEST(ExecutorGpu, AnOpWithoutAGpuKernelIsNamed) {
  REQUIRE_GPU();
  const Tensor a = test::RandomTensor(DataType::kFloat32, {3, 4}), b = test::RandomTensor(DataType::kFloat32, {4, 5});
  try {
    test::RunOp("Einsum", {a, b}, {{"equation", Attribute::String("ij,jk->ik")}}, 1, 17, {}, Gpu());
    FAIL() << "Einsum ran on the GPU: update this test to another op without a GPU kernel";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("Einsum"), std::string::npos) << m;
    EXPECT_NE(m.find("--device cpu"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace ot
