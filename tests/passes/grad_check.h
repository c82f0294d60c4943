// The finite-difference gradient check shared by the GradientCheck.<Op> suites: builds
//   loss = ReduceSum(body(params...) * R)
// with float64 parameters (initializers p0, p1, ...) and a random R (so every output element matters), runs the
// autodiff pass (R and initializers named k_* are constants, not parameters), and compares every gradient
// element with central differences of the loss.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "passes/autodiff.h"
#include "tests/test_util.h"

namespace ot::test {

using BuildFn = std::function<Value*(Graph&, const std::vector<Value*>& params)>;
using Attrs = std::map<std::string, Attribute>;

inline std::vector<Value*> EmitN(Graph& g, const std::string& op, std::vector<Value*> ins, int nout, Attrs attrs = {}) {
  std::vector<Value*> outs;
  for (int i = 0; i < nout; ++i) outs.push_back(g.AddValue(g.UniqueName(op + "_out")));
  Node* n = g.AddNode(op, ins, outs, g.UniqueName(op));
  n->attrs = std::move(attrs);
  return outs;
}

inline Value* Emit(Graph& g, const std::string& op, std::vector<Value*> ins, Attrs attrs = {}) {
  return EmitN(g, op, std::move(ins), 1, std::move(attrs))[0];
}

inline std::unique_ptr<Graph> Build(const std::vector<Tensor>& params, const BuildFn& body, const Tensor& r, int opset) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = opset;
  std::vector<Value*> ps;
  for (size_t i = 0; i < params.size(); ++i) ps.push_back(g->AddInitializer("p" + std::to_string(i), params[i].Clone()));
  Value* y = body(*g, ps);
  Value* prod = Emit(*g, "Mul", {y, g->AddInitializer("r", r)});
  Value* loss = g->AddValue("loss");
  Node* red = g->AddNode("ReduceSum", {prod}, {loss}, "loss_sum");
  red->attrs["keepdims"] = Attribute::Int(0);
  g->outputs.push_back(loss);
  return g;
}

inline double Loss(const std::vector<Tensor>& params, const BuildFn& body, const Tensor& r, int opset) {
  auto g = Build(params, body, r, opset);
  Executor ex(*g);
  return ex.Run({})[0].GetDouble(0);
}

// out_dims: the shape of body's output (for R); [lo, hi): the range of the random parameters.
inline void CheckGradients(const std::vector<std::vector<int64_t>>& param_dims, const std::vector<int64_t>& out_dims,
                           const BuildFn& body, int opset = 17, double lo = -1, double hi = 1) {
  std::vector<Tensor> params;
  for (const auto& d : param_dims) params.push_back(RandomTensor(DataType::kFloat64, d, lo, hi));
  Tensor r = RandomTensor(DataType::kFloat64, out_dims);
  auto g = Build(params, body, r, opset);
  AutodiffPass pass({"loss", "^(r|k_.*)$"});
  ASSERT_TRUE(pass.Run(*g));
  ASSERT_EQ(pass.params().size(), params.size());
  Executor ex(*g);
  std::vector<Tensor> outs = ex.Run({});
  ASSERT_EQ(outs.size(), 1 + params.size());
  const double eps = 1e-6;
  for (size_t p = 0; p < params.size(); ++p) {
    const Tensor& grad = outs[1 + p];
    ASSERT_EQ(grad.dims(), params[p].dims()) << "gradient of p" << p;
    for (int64_t i = 0; i < params[p].numel(); ++i) {
      std::vector<Tensor> plus = params, minus = params;
      plus[p] = params[p].Clone();
      minus[p] = params[p].Clone();
      plus[p].SetDouble(i, params[p].GetDouble(i) + eps);
      minus[p].SetDouble(i, params[p].GetDouble(i) - eps);
      const double fd = (Loss(plus, body, r, opset) - Loss(minus, body, r, opset)) / (2 * eps);
      EXPECT_NEAR(grad.GetDouble(i), fd, 1e-6 + 1e-5 * std::fabs(fd)) << "p" << p << "[" << i << "]";
    }
  }
}

}  // namespace ot::test
