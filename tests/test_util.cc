#include "tests/test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "executor/executor.h"

namespace ot::test {

// Every test verifies the graph between the passes of every pipeline it builds (passes/pass_manager.h).
const bool kVerifyPasses = [] {
  setenv("ONNXTRAIN_VERIFY_PASSES", "1", 0);
  return true;
}();

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(std::random_device{}());
  return rng;
}

std::vector<Tensor> RunOp(const std::string& op_type, const std::vector<Tensor>& inputs,
                          const std::map<std::string, Attribute>& attrs, int num_outputs, int opset,
                          const std::vector<int>& constant_inputs, std::shared_ptr<DeviceBackend> device,
                          const std::string& domain) {
  Graph g;
  g.opset_imports[""] = domain.empty() ? opset : 17;
  if (!domain.empty()) g.opset_imports[domain] = 1;  // an internal op: version 1 of its domain
  std::vector<Value*> ins;
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty_tensor()) {
      ins.push_back(nullptr);
      continue;
    }
    std::string name = "in" + std::to_string(i);
    bool is_const =
        std::find(constant_inputs.begin(), constant_inputs.end(), static_cast<int>(i)) != constant_inputs.end();
    Value* v;
    if (is_const) {
      v = g.AddInitializer(name, inputs[i]);
    } else {
      v = g.AddValue(name);
      v->dtype = inputs[i].dtype();
      v->shape = Shape::Static(inputs[i].dims());
      g.inputs.push_back(v);
      feeds[name] = inputs[i];
    }
    ins.push_back(v);
  }
  std::vector<Value*> outs;
  for (int i = 0; i < num_outputs; ++i) {
    Value* o = g.AddValue("out" + std::to_string(i));
    outs.push_back(o);
    g.outputs.push_back(o);
  }
  Node* n = g.AddNode(op_type, ins, outs, "node");
  n->attrs = attrs;
  n->domain = domain;
  n->opset = domain.empty() ? opset : 1;
  ExecutorOptions eo;
  eo.device = std::move(device);
  Executor ex(g, eo);
  return ex.Run(feeds);
}

Tensor RandomTensor(DataType t, const std::vector<int64_t>& dims, double lo, double hi) {
  Tensor r(t, dims);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < r.numel(); ++i) {
    double v = u(Rng());
    if (IsInteger(t) || t == DataType::kBool) v = std::floor(v);
    r.SetDouble(i, v);
  }
  return r;
}

void ExpectClose(const Tensor& a, const Tensor& e, double rtol, double atol) {
  ASSERT_EQ(DataTypeName(a.dtype()), DataTypeName(e.dtype()));
  ASSERT_EQ(DimsToString(a.dims()), DimsToString(e.dims()));
  int bad = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.GetDouble(i), y = e.GetDouble(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::isinf(y) && x == y) continue;
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y))) {
      if (++bad <= 5) ADD_FAILURE() << "element " << i << ": got " << x << ", expected " << y;
    }
  }
  EXPECT_EQ(bad, 0) << "elements out of tolerance (rtol " << rtol << ", atol " << atol << ")";
}

void ExpectCloseAfterAdam(const Tensor& a, const Tensor& e, double rtol, double atol, double noise_bound) {
  ASSERT_EQ(DataTypeName(a.dtype()), DataTypeName(e.dtype()));
  ASSERT_EQ(DimsToString(a.dims()), DimsToString(e.dims()));
  int64_t outside = 0;
  double diff2 = 0, ref2 = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.GetDouble(i), y = e.GetDouble(i), d = std::fabs(x - y);
    diff2 += d * d;
    ref2 += y * y;
    if (!(d <= noise_bound))
      ADD_FAILURE() << "element " << i << ": got " << x << ", expected " << y << " (past lr x steps)";
    if (!(d <= atol + rtol * std::fabs(y))) ++outside;
  }
  const int64_t allowed = std::max<int64_t>(1, a.numel() / 1000);
  EXPECT_LE(outside, allowed) << "elements out of tolerance (rtol " << rtol << ", atol " << atol << ") of "
                              << a.numel();
  EXPECT_LE(std::sqrt(diff2), rtol * std::sqrt(ref2)) << "relative difference in norm";
}

}  // namespace ot::test
