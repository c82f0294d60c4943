// The channels_last attribute of Conv, ConvGradData, ConvGradWeight, BatchNormalization (and BatchNormRelu),
// BatchNormGrad, MaxPool, AveragePool, MaxPoolGrad and AveragePoolGrad on the CPU executor: activations stored [N,
// spatial..., C]. Each node against the same node without the attribute on the NCHW values (fresh random ones): shapes
// from inference, values within float rounding (the layouts add in different orders). Errors: a float64 channels-last
// convolution, and BatchNormGrad's dX-sum output, are refused naming the node.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/op_registry.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::RandomTensor;

// [N, C, spatial...] <-> [N, spatial..., C] of a float tensor.
Tensor Permuted(const Tensor& t, bool to_last) {
  const std::vector<int64_t>& d = t.dims();
  const int64_t n = d[0], c = to_last ? d[1] : d.back();
  const int64_t sp = t.numel() / (n * c);
  std::vector<int64_t> nd{n};
  if (to_last) {
    nd.insert(nd.end(), d.begin() + 2, d.end());
    nd.push_back(c);
  } else {
    nd.push_back(c);
    nd.insert(nd.end(), d.begin() + 1, d.end() - 1);
  }
  Tensor r(t.dtype(), nd);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < sp; ++p) {
        const int64_t first = (i * c + k) * sp + p, last = (i * sp + p) * c + k;
        r.SetDouble(to_last ? last : first, t.GetDouble(to_last ? first : last));
      }
  return r;
}

struct Operand {
  Tensor value;
  bool constant = false;  // an initializer (a shape the plan needs), else a fed input
};

// One node over its operands; returns its outputs and, through `dims`, their inferred dims.
std::vector<Tensor> RunNode(const std::string& op, const std::string& domain, const std::vector<Operand>& ins,
                            int outputs, const std::map<std::string, Attribute>& attrs,
                            std::vector<std::vector<int64_t>>* dims = nullptr) {
  Graph g;
  g.opset_imports[""] = 17;
  g.opset_imports[kInternalDomain] = 1;
  std::vector<Value*> iv, ov;
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    if (ins[i].constant) {
      iv.push_back(g.AddInitializer(name, ins[i].value));
      continue;
    }
    Value* v = g.AddValue(name);
    v->dtype = ins[i].value.dtype();
    v->shape = Shape::Static(ins[i].value.dims());
    g.inputs.push_back(v);
    iv.push_back(v);
    feeds[name] = ins[i].value;
  }
  for (int i = 0; i < outputs; ++i) ov.push_back(g.AddValue("out" + std::to_string(i)));
  Node* n = g.AddNode(op, iv, ov, "node");
  n->domain = domain;
  n->attrs = attrs;
  g.outputs = ov;
  InferShapes(g, true);
  if (dims) {
    dims->clear();
    for (Value* v : ov) dims->push_back(v->shape.is_static() ? v->shape.StaticDims() : std::vector<int64_t>{});
  }
  return Executor(g).Run(feeds);
}

void ExpectNear(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.GetDouble(i), want.GetDouble(i), tol * (1 + std::abs(want.GetDouble(i)))) << what << " " << i;
}

Attribute Ints(std::vector<int64_t> v) { return Attribute::Ints(std::move(v)); }

TEST(ChannelsLastOps, ConvAndItsGradientsMatchNchw) {
  for (const int64_t group : {int64_t{1}, int64_t{8}}) {
    SCOPED_TRACE("group " + std::to_string(group));
    const Tensor x = RandomTensor(DataType::kFloat32, {2, 8, 9, 9});
    const Tensor w = RandomTensor(DataType::kFloat32, {16, 8 / group, 3, 3});
    const Tensor b = RandomTensor(DataType::kFloat32, {16});
    std::map<std::string, Attribute> a{
        {"pads", Ints({1, 1, 1, 1})}, {"strides", Ints({2, 2})}, {"group", Attribute::Int(group)}};
    const Tensor y = RunNode("Conv", "", {{x}, {w}, {b}}, 1, a)[0];
    std::map<std::string, Attribute> al = a;
    al["channels_last"] = Attribute::Int(1);
    std::vector<std::vector<int64_t>> dims;
    const Tensor yl = RunNode("Conv", "", {{Permuted(x, true)}, {w}, {b}}, 1, al, &dims)[0];
    EXPECT_EQ(dims[0], (std::vector<int64_t>{2, 5, 5, 16}));
    ExpectNear(Permuted(yl, false), y, 1e-5, "Y");
    // Gradients: dY like Y.
    const Tensor dy = RandomTensor(DataType::kFloat32, y.dims());
    const Tensor xshape = Tensor::FromInt64(x.dims(), {4}), wshape = Tensor::FromInt64(w.dims(), {4});
    const Tensor xlshape = Tensor::FromInt64(Permuted(x, true).dims(), {4});
    const Tensor dx = RunNode("ConvGradData", kInternalDomain, {{dy}, {w}, {xshape, true}}, 1, a)[0];
    const Tensor dxl =
        RunNode("ConvGradData", kInternalDomain, {{Permuted(dy, true)}, {w}, {xlshape, true}}, 1, al, &dims)[0];
    EXPECT_EQ(dims[0], (std::vector<int64_t>{2, 9, 9, 8}));
    ExpectNear(Permuted(dxl, false), dx, 1e-5, "dX");
    const Tensor dw = RunNode("ConvGradWeight", kInternalDomain, {{dy}, {x}, {wshape, true}}, 1, a)[0];
    const Tensor dwl = RunNode("ConvGradWeight", kInternalDomain,
                               {{Permuted(dy, true)}, {Permuted(x, true)}, {wshape, true}}, 1, al)[0];
    ExpectNear(dwl, dw, 1e-5, "dW");
  }
}

TEST(ChannelsLastOps, BatchNormAndItsGradientMatchNchw) {
  const Tensor x = RandomTensor(DataType::kFloat32, {3, 12, 5, 7}, 1, 4);
  const Tensor scale = RandomTensor(DataType::kFloat32, {12}), bias = RandomTensor(DataType::kFloat32, {12});
  const Tensor mean = RandomTensor(DataType::kFloat32, {12}), var = RandomTensor(DataType::kFloat32, {12}, 0.5, 2);
  for (const char* op : {"BatchNormalization", "BatchNormRelu"}) {
    SCOPED_TRACE(op);
    const std::string domain = std::string(op) == "BatchNormRelu" ? kInternalDomain : "";
    std::map<std::string, Attribute> a{{"training_mode", Attribute::Int(1)}, {"momentum", Attribute::Float(0.9f)}};
    const std::vector<Tensor> want = RunNode(op, domain, {{x}, {scale}, {bias}, {mean}, {var}}, 3, a);
    a["channels_last"] = Attribute::Int(1);
    std::vector<std::vector<int64_t>> dims;
    const std::vector<Tensor> got =
        RunNode(op, domain, {{Permuted(x, true)}, {scale}, {bias}, {mean}, {var}}, 3, a, &dims);
    EXPECT_EQ(dims[0], (std::vector<int64_t>{3, 5, 7, 12}));
    EXPECT_EQ(dims[1], (std::vector<int64_t>{12}));
    ExpectNear(Permuted(got[0], false), want[0], 1e-5, "Y");
    ExpectNear(got[1], want[1], 1e-6, "running mean");
    ExpectNear(got[2], want[2], 1e-6, "running var");
  }
  const Tensor dy = RandomTensor(DataType::kFloat32, x.dims()), r = RandomTensor(DataType::kFloat32, x.dims());
  for (const bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "relu" : "plain");
    std::map<std::string, Attribute> a{{"training", Attribute::Int(1)}, {"relu", Attribute::Int(relu)}};
    std::vector<Operand> ins{{dy}, {x}, {scale}};
    std::vector<Operand> insl{{Permuted(dy, true)}, {Permuted(x, true)}, {scale}};
    if (relu) {
      ins.insert(ins.end(), {{mean}, {var}, {r}});  // inputs 3, 4 unread in training
      insl.insert(insl.end(), {{mean}, {var}, {Permuted(r, true)}});
    }
    const std::vector<Tensor> want = RunNode("BatchNormGrad", kInternalDomain, ins, 3, a);
    a["channels_last"] = Attribute::Int(1);
    const std::vector<Tensor> got = RunNode("BatchNormGrad", kInternalDomain, insl, 3, a);
    ExpectNear(Permuted(got[0], false), want[0], 1e-4, "dX");
    ExpectNear(got[1], want[1], 1e-5, "dScale");
    ExpectNear(got[2], want[2], 1e-5, "dB");
  }
}

TEST(ChannelsLastOps, PoolingAndItsGradientsMatchNchw) {
  const Tensor x = RandomTensor(DataType::kFloat32, {2, 20, 9, 9});
  for (const char* op : {"MaxPool", "AveragePool"}) {
    SCOPED_TRACE(op);
    const bool max = std::string(op) == "MaxPool";
    std::map<std::string, Attribute> a{
        {"kernel_shape", Ints({3, 3})}, {"strides", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}};
    const Tensor y = RunNode(op, "", {{x}}, 1, a)[0];
    std::map<std::string, Attribute> al = a;
    al["channels_last"] = Attribute::Int(1);
    std::vector<std::vector<int64_t>> dims;
    const Tensor yl = RunNode(op, "", {{Permuted(x, true)}}, 1, al, &dims)[0];
    EXPECT_EQ(dims[0], (std::vector<int64_t>{2, 5, 5, 20}));
    ExpectNear(Permuted(yl, false), y, 1e-6, "Y");
    const Tensor dy = RandomTensor(DataType::kFloat32, y.dims());
    const Tensor xshape = Tensor::FromInt64(x.dims(), {4}), xlshape = Tensor::FromInt64(Permuted(x, true).dims(), {4});
    const Tensor dx = max ? RunNode("MaxPoolGrad", kInternalDomain, {{dy}, {x}}, 1, a)[0]
                          : RunNode("AveragePoolGrad", kInternalDomain, {{dy}, {xshape, true}}, 1, a)[0];
    const Tensor dxl =
        max ? RunNode("MaxPoolGrad", kInternalDomain, {{Permuted(dy, true)}, {Permuted(x, true)}}, 1, al)[0]
            : RunNode("AveragePoolGrad", kInternalDomain, {{Permuted(dy, true)}, {xlshape, true}}, 1, al)[0];
    ExpectNear(Permuted(dxl, false), dx, 1e-6, "dX");
  }
}

TEST(ChannelsLastOps, RefusedCasesNameTheNode) {
  const Tensor x = RandomTensor(DataType::kFloat64, {1, 2, 4, 4}), w = RandomTensor(DataType::kFloat64, {2, 2, 1, 1});
  std::map<std::string, Attribute> a{{"channels_last", Attribute::Int(1)}};
  try {
    RunNode("Conv", "", {{Permuted(x, true)}, {w}}, 1, a);
    FAIL() << "a float64 channels-last Conv ran";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("channels-last float64"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("node"), std::string::npos) << e.what();
  }
  const Tensor xf = RandomTensor(DataType::kFloat32, {2, 3, 3, 4}), s = RandomTensor(DataType::kFloat32, {4});
  try {
    RunNode("BatchNormGrad", kInternalDomain, {{xf}, {xf}, {s}}, 4, a);
    FAIL() << "BatchNormGrad made its dX-sum channels-last";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("channels_last"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ot
