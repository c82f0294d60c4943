// The executor on a CUDA device (executor/device.h, executor/cuda/): single ops and whole steps run on the GPU and
// compared with the CPU executor on fresh random inputs. Label `gpu` (tests named *Gpu*), skipped without a device.
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
    for (const char* op : {"Relu", "Tanh", "Sigmoid", "Exp", "Erf", "Neg", "Abs", "Sqrt", "Log"})
      Compare(op, {a}, {}, tol);
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

// The GEMM forms passes/fold_transpose and fuse_bias_grad make: MatMulTrans under every flag (a batched B, a shared
// 2-D B), GemmSum with either operand summed, and MatMulBias {trans_b}, on the GPU against the CPU executor.
TEST(ExecutorGpu, TransposedGemmOperandsMatchTheCpu) {
  REQUIRE_GPU();
  auto run = [](DataType t, const std::string& op, const std::vector<Tensor>& in, Attrs attrs,
                std::shared_ptr<DeviceBackend> dev, int output = 0) {
    Graph g;
    g.opset_imports[""] = 17;
    g.opset_imports[kInternalDomain] = 1;
    std::map<std::string, Tensor> feeds;
    std::vector<Value*> ins;
    for (size_t i = 0; i < in.size(); ++i) {
      Value* v = g.AddValue("in" + std::to_string(i));
      v->dtype = t;
      v->shape = Shape::Static(in[i].dims());
      g.inputs.push_back(v);
      ins.push_back(v);
      feeds.emplace(v->name, in[i]);
    }
    std::vector<Value*> outs{g.AddValue("y")};
    if (op == "GemmSum") outs.push_back(g.AddValue("s"));
    Node* n = g.AddNode(op, ins, outs, "gemm");
    n->domain = kInternalDomain;
    n->opset = 1;
    n->attrs = std::move(attrs);
    g.outputs = outs;
    InferShapes(g, true);
    ExecutorOptions eo;
    eo.device = std::move(dev);
    return Executor(g, eo).Run(feeds)[static_cast<size_t>(output)];
  };
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    const double tol = t == DataType::kFloat32 ? 1e-5 : t == DataType::kFloat16 ? 2e-3 : 1.6e-2;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int shared = 0; shared < 2; ++shared) {
          SCOPED_TRACE(DataTypeName(t) + " trans_a " + std::to_string(ta) + " trans_b " + std::to_string(tb) +
                       (shared ? " shared B" : " batched B"));
          const int64_t m = 19, k = 40, n = 24;
          const Tensor a = test::RandomTensor(t, ta ? std::vector<int64_t>{3, k, m} : std::vector<int64_t>{3, m, k});
          std::vector<int64_t> bd = tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
          if (!shared) bd.insert(bd.begin(), 3);
          const Tensor b = test::RandomTensor(t, bd);
          const Attrs attrs{{"trans_a", Attribute::Int(ta)}, {"trans_b", Attribute::Int(tb)}};
          test::ExpectClose(run(t, "MatMulTrans", {a, b}, attrs, Gpu()), run(t, "MatMulTrans", {a, b}, attrs, nullptr),
                            tol, tol);
        }
    for (int si = 0; si < 2; ++si) {  // GemmSum: cuBLASLt's bias-gradient epilogue (or its fallback) vs the CPU
      SCOPED_TRACE(DataTypeName(t) + " GemmSum sum_input " + std::to_string(si));
      const Tensor g = test::RandomTensor(t, {300, 24}), x = test::RandomTensor(t, {300, 40});
      const Attrs attrs{
          {"transA", Attribute::Int(1)}, {"transB", Attribute::Int(0)}, {"sum_input", Attribute::Int(si)}};
      const std::vector<Tensor> in = si == 0 ? std::vector<Tensor>{g, x} : std::vector<Tensor>{x, g};
      for (int out = 0; out < 2; ++out)
        test::ExpectClose(run(t, "GemmSum", in, attrs, Gpu(), out), run(t, "GemmSum", in, attrs, nullptr, out), tol * 4,
                          tol * 4);
    }
    SCOPED_TRACE(DataTypeName(t) + " MatMulBias trans_b");
    const Tensor a = test::RandomTensor(t, {2, 9, 40}), w = test::RandomTensor(t, {24, 40}),
                 bias = test::RandomTensor(t, {24});
    const Attrs attrs{{"trans_b", Attribute::Int(1)}};
    test::ExpectClose(run(t, "MatMulBias", {a, w, bias}, attrs, Gpu()),
                      run(t, "MatMulBias", {a, w, bias}, attrs, nullptr), tol, tol);
  }
}

}  // namespace
}  // namespace ot
