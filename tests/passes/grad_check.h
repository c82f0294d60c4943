// The finite-difference gradient check shared by the GradientCheck.<Op> suites: builds
//   loss = ReduceSum(body(params...) * R)
// with float64 parameters (initializers p0, p1, ...) and a random R (so every output element matters), runs the
// autodiff pass (R and initializers named k_* are constants, not parameters), and compares every gradient
// element with central differences of the loss.
//
// Every check then runs again on the same body built with symbolic dims, as exported models are: the parameters
// and R become graph inputs whose dims are all named (p0_0, p0_1, ..., r_0, ...), and every integer constant the
// body reads (Slice's starts, Reshape's target, Pad's pads, indices...) is computed from a Shape read (constant +
// Size(R) * 0), so no rule can read a static dim or a constant index. One step graph is built and run at two sizes:
// the test's, and a second one found by growing the parameters' dims one at a time until the body accepts them (or
// given by the test); its gradients are compared with central differences at each size.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/error.h"
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

// loss = ReduceSum(y * r) {keepdims = 0}.
inline void AddLoss(Graph& g, Value* y, Value* r) {
  Value* prod = Emit(g, "Mul", {y, r});
  Value* loss = g.AddValue("loss");
  Node* red = g.AddNode("ReduceSum", {prod}, {loss}, "loss_sum");
  red->attrs["keepdims"] = Attribute::Int(0);
  g.outputs.push_back(loss);
}

inline std::unique_ptr<Graph> Build(const std::vector<Tensor>& params, const BuildFn& body, const Tensor& r,
                                    int opset) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = opset;
  std::vector<Value*> ps;
  for (size_t i = 0; i < params.size(); ++i)
    ps.push_back(g->AddInitializer("p" + std::to_string(i), params[i].Clone()));
  Value* y = body(*g, ps);
  AddLoss(*g, y, g->AddInitializer("r", r));
  return g;
}

inline double Loss(const std::vector<Tensor>& params, const BuildFn& body, const Tensor& r, int opset) {
  auto g = Build(params, body, r, opset);
  Executor ex(*g);
  return ex.Run({})[0].GetDouble(0);
}

// Central differences of the loss in every parameter element.
inline std::vector<Tensor> FiniteDifferences(const std::vector<Tensor>& params, const BuildFn& body, const Tensor& r,
                                             int opset) {
  const double eps = 1e-6;
  std::vector<Tensor> fd;
  for (size_t p = 0; p < params.size(); ++p) {
    fd.push_back(params[p].Clone());
    for (int64_t i = 0; i < params[p].numel(); ++i) {
      std::vector<Tensor> plus = params, minus = params;
      plus[p] = params[p].Clone();
      minus[p] = params[p].Clone();
      plus[p].SetDouble(i, params[p].GetDouble(i) + eps);
      minus[p].SetDouble(i, params[p].GetDouble(i) - eps);
      fd[p].SetDouble(i, (Loss(plus, body, r, opset) - Loss(minus, body, r, opset)) / (2 * eps));
    }
  }
  return fd;
}

inline void ExpectGradients(const std::vector<Tensor>& grads, const std::vector<Tensor>& fd, const std::string& what) {
  ASSERT_EQ(grads.size(), fd.size()) << what;
  for (size_t p = 0; p < fd.size(); ++p) {
    ASSERT_EQ(grads[p].dims(), fd[p].dims()) << what << ": gradient of p" << p;
    for (int64_t i = 0; i < fd[p].numel(); ++i) {
      const double want = fd[p].GetDouble(i);
      EXPECT_NEAR(grads[p].GetDouble(i), want, 1e-6 + 1e-5 * std::fabs(want)) << what << ": p" << p << "[" << i << "]";
    }
  }
}

// Output dims of body on params of these dims (forward only); nullopt when the body rejects them.
inline std::optional<std::vector<int64_t>> ForwardDims(const std::vector<std::vector<int64_t>>& dims,
                                                       const BuildFn& body, int opset) {
  try {
    auto g = std::make_unique<Graph>();
    g->opset_imports[""] = opset;
    std::vector<Value*> ps;
    for (size_t i = 0; i < dims.size(); ++i)
      ps.push_back(g->AddInitializer("p" + std::to_string(i), Tensor(DataType::kFloat64, dims[i])));
    g->outputs.push_back(body(*g, ps));
    Executor ex(*g);
    return ex.Run({})[0].dims();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// A second size for the symbolic check: the first of these changes to the parameters' dims that the body accepts
// with a non-empty output: one axis of every parameter grown by one; one axis of one parameter grown by one, shrunk by
// one or set to 1 (a broadcast); one parameter's dims reversed (a Reshape's fixed target takes [6, 2] for [2, 6]).
inline std::optional<std::vector<std::vector<int64_t>>> SecondSize(const std::vector<std::vector<int64_t>>& dims,
                                                                   const BuildFn& body, int opset) {
  size_t max_rank = 0;
  for (const auto& d : dims) max_rank = std::max(max_rank, d.size());
  std::vector<std::vector<std::vector<int64_t>>> candidates;
  for (size_t axis = 0; axis < max_rank; ++axis) {
    auto c = dims;
    bool grew = false;
    for (auto& d : c)
      if (axis < d.size()) {
        ++d[axis];
        grew = true;
      }
    if (grew) candidates.push_back(c);
  }
  for (int64_t change : {1, -1, 0})
    for (size_t p = 0; p < dims.size(); ++p)
      for (size_t axis = 0; axis < dims[p].size(); ++axis) {
        auto c = dims;
        c[p][axis] = change == 0 ? 1 : c[p][axis] + change;
        if (c[p][axis] >= 1 && c[p][axis] != dims[p][axis]) candidates.push_back(c);
      }
  for (size_t p = 0; p < dims.size(); ++p) {
    auto c = dims;
    std::reverse(c[p].begin(), c[p].end());
    if (c[p] != dims[p]) candidates.push_back(c);
  }
  for (const auto& c : candidates) {
    auto out = ForwardDims(c, body, opset);
    int64_t n = 1;
    if (out) {
      for (int64_t d : *out) n *= d;
      if (n > 0) return c;
    }
  }
  return std::nullopt;
}

// The body over inputs with named dims, its integer constants computed from Size(r); autodiff with respect to the
// inputs p0, p1, ...
inline std::unique_ptr<Graph> BuildSymbolic(size_t num_params, const std::vector<int>& ranks, int out_rank,
                                            const BuildFn& body, int opset) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = opset;
  auto input = [&](const std::string& name, int rank) {
    Value* v = g->AddValue(name);
    v->dtype = DataType::kFloat64;
    std::vector<Dim> d;
    for (int k = 0; k < rank; ++k) d.push_back(Dim::Symbol(name + "_" + std::to_string(k)));
    v->shape = Shape(d);
    g->inputs.push_back(v);
    return v;
  };
  std::vector<Value*> ps;
  for (size_t i = 0; i < num_params; ++i) ps.push_back(input("p" + std::to_string(i), ranks[i]));
  Value* r = input("r", out_rank);
  Value* y = body(*g, ps);
  // zero = Size(r) * 0, known only when the step runs (and folded by its plan).
  Value* zero = Emit(*g, "Mul", {Emit(*g, "Size", {r}), g->AddInitializer("k_zero", Tensor::FromInt64({0}, {}))});
  Value* zero32 = nullptr;
  std::map<Value*, Value*> computed;
  std::vector<Node*> readers;
  for (const auto& n : g->nodes()) readers.push_back(n.get());
  for (Node* n : readers) {
    if (n->op_type == "Size" || (n->op_type == "Mul" && n->outputs[0] == zero)) continue;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      Value* v = n->inputs[i];
      if (!v) continue;
      const Tensor* t = v->initializer.get();
      if (!t && v->producer && v->producer->op_type == "Constant") {
        const Attribute* a = v->producer->attr("value");
        if (a && a->kind == Attribute::Kind::kTensor) t = &a->t;
      }
      if (!t || (t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32) || v == g->FindValue("k_zero"))
        continue;
      auto it = computed.find(v);
      if (it == computed.end()) {
        Value* z = zero;
        if (t->dtype() == DataType::kInt32) {
          if (!zero32)
            zero32 = Emit(*g, "Cast", {zero}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kInt32))}});
          z = zero32;
        }
        it = computed.emplace(v, Emit(*g, "Add", {v, z})).first;
      }
      g->SetInput(n, static_cast<int>(i), it->second);
    }
  }
  AddLoss(*g, y, r);
  return g;
}

// out_dims: the shape of body's output (for R); [lo, hi): the range of the random parameters. second: the
// parameters' dims of the symbolic check's second size (found by SecondSize when empty).
inline void CheckGradients(const std::vector<std::vector<int64_t>>& param_dims, const std::vector<int64_t>& out_dims,
                           const BuildFn& body, int opset = 17, double lo = -1, double hi = 1,
                           std::vector<std::vector<int64_t>> second = {}) {
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
  const std::vector<Tensor> fd = FiniteDifferences(params, body, r, opset);
  ExpectGradients(std::vector<Tensor>(outs.begin() + 1, outs.end()), fd, "static dims");

  // Symbolic dims, computed index inputs: one step graph at two sizes.
  std::vector<int> ranks;
  std::vector<std::string> names;
  for (size_t i = 0; i < param_dims.size(); ++i) {
    ranks.push_back(static_cast<int>(param_dims[i].size()));
    names.push_back("p" + std::to_string(i));
  }
  auto sg = BuildSymbolic(params.size(), ranks, static_cast<int>(out_dims.size()), body, opset);
  AutodiffPass spass({"loss", "^(r|k_.*)$", names});
  try {
    spass.Run(*sg);
  } catch (const Error& e) {
    FAIL() << "symbolic dims: " << e.what();
  }
  auto run_symbolic = [&](const std::vector<Tensor>& ps, const Tensor& rr) {
    std::map<std::string, Tensor> feeds{{"r", rr}};
    for (size_t i = 0; i < ps.size(); ++i) feeds["p" + std::to_string(i)] = ps[i];
    // A fresh executor per size: random ops (Dropout) draw by the executor's run counter, as each Loss does.
    Executor sex(*sg);
    std::vector<Tensor> o = sex.Run(feeds);
    EXPECT_NEAR(o[0].GetDouble(0), Loss(ps, body, rr, opset), 1e-9 * (1 + std::fabs(o[0].GetDouble(0))));
    return std::vector<Tensor>(o.begin() + 1, o.end());
  };
  ExpectGradients(run_symbolic(params, r), fd, "symbolic dims, size 1");
  if (second.empty()) {
    auto s = SecondSize(param_dims, body, opset);
    ASSERT_TRUE(s) << "no second size found for the symbolic check: give one";
    second = *s;
  }
  std::vector<Tensor> params2;
  for (const auto& d : second) params2.push_back(RandomTensor(DataType::kFloat64, d, lo, hi));
  auto out2 = ForwardDims(second, body, opset);
  ASSERT_TRUE(out2) << "the body rejects the second size";
  Tensor r2 = RandomTensor(DataType::kFloat64, *out2);
  ExpectGradients(run_symbolic(params2, r2), FiniteDifferences(params2, body, r2, opset), "symbolic dims, size 2");
}

}  // namespace ot::test
