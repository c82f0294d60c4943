// The ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum standard/nesterov) on the CPU executor against
// a double reference written from the ONNX spec, with several tensors per node, float and double, iteration
// counts 0 (no bias correction / beta adjustment) and > 0; user errors name the node.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/error.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::ExpectClose;
using test::RandomTensor;

constexpr const char* kDomain = "ai.onnx.preview.training";

// One preview-training node over graph inputs in0..in(k-1); returns its outputs.
std::vector<Tensor> RunPreview(const std::string& op, const std::vector<Tensor>& ins, int num_outputs,
                               const std::map<std::string, Attribute>& attrs) {
  Graph g;
  g.opset_imports[""] = 17;
  g.opset_imports[kDomain] = 1;
  std::vector<Value*> iv, ov;
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < ins.size(); ++i) {
    Value* v = g.AddValue("in" + std::to_string(i));
    v->dtype = ins[i].dtype();
    v->shape = Shape::Static(ins[i].dims());
    g.inputs.push_back(v);
    iv.push_back(v);
    feeds["in" + std::to_string(i)] = ins[i];
  }
  for (int i = 0; i < num_outputs; ++i) ov.push_back(g.AddValue("out" + std::to_string(i)));
  Node* n = g.AddNode(op, iv, ov, "opt");
  n->domain = kDomain;
  n->opset = 1;
  n->attrs = attrs;
  g.outputs = ov;
  Executor ex(g);
  return ex.Run(feeds);
}

Tensor Scalar(DataType t, double v) {
  Tensor s(t, {});
  s.SetDouble(0, v);
  return s;
}

// Applies `rule(x, g, states...) -> (x', states'...)` elementwise in double to build the expected outputs.
using Rule = std::function<std::vector<double>(double x, double g, const std::vector<double>& s)>;
std::vector<Tensor> Reference(const std::vector<Tensor>& xs, const std::vector<Tensor>& gs,
                              const std::vector<std::vector<Tensor>>& states, const Rule& rule) {
  const size_t n = xs.size(), k = states.size();
  std::vector<Tensor> out;
  for (size_t j = 0; j <= k; ++j)
    for (size_t i = 0; i < n; ++i) out.emplace_back(xs[i].dtype(), xs[i].dims());
  for (size_t i = 0; i < n; ++i)
    for (int64_t e = 0; e < xs[i].numel(); ++e) {
      std::vector<double> s;
      for (size_t j = 0; j < k; ++j) s.push_back(states[j][i].GetDouble(e));
      std::vector<double> r = rule(xs[i].GetDouble(e), gs[i].GetDouble(e), s);
      for (size_t j = 0; j <= k; ++j) out[j * n + i].SetDouble(e, r[j]);
    }
  return out;
}

struct Case {
  DataType dtype;
  int64_t t;
};

class PreviewOps : public ::testing::TestWithParam<Case> {};

TEST_P(PreviewOps, Adagrad) {
  const DataType dt = GetParam().dtype;
  const int64_t t = GetParam().t;
  const double r = 0.1, decay = 0.05, eps = 1e-5, norm = 0.02;
  std::vector<Tensor> xs = {RandomTensor(dt, {3, 4}), RandomTensor(dt, {5})};
  std::vector<Tensor> gs = {RandomTensor(dt, {3, 4}), RandomTensor(dt, {5})};
  std::vector<Tensor> hs = {RandomTensor(dt, {3, 4}, 0.0, 2.0), RandomTensor(dt, {5}, 0.0, 2.0)};
  std::vector<Tensor> ins = {Scalar(DataType::kFloat32, r), Tensor::FromInt64({t}, {})};
  for (auto* v : {&xs, &gs, &hs}) ins.insert(ins.end(), v->begin(), v->end());
  auto got = RunPreview("Adagrad", ins, 4,
                        {{"decay_factor", Attribute::Float(decay)},
                         {"epsilon", Attribute::Float(eps)},
                         {"norm_coefficient", Attribute::Float(norm)}});
  // Attributes are float32 in the proto: the reference uses the same rounded values.
  const double d = static_cast<float>(decay), ep = static_cast<float>(eps), nc = static_cast<float>(norm);
  const double rr = static_cast<float>(r) / (1 + t * d);
  auto want = Reference(xs, gs, {hs}, [&](double x, double g, const std::vector<double>& s) {
    const double gr = nc * x + g, h = s[0] + gr * gr;
    return std::vector<double>{x - rr * gr / (std::sqrt(h) + ep), h};
  });
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ExpectClose(got[i], want[i], dt == DataType::kFloat64 ? 1e-12 : 1e-6, 1e-7);
}

TEST_P(PreviewOps, Adam) {
  const DataType dt = GetParam().dtype;
  const int64_t t = GetParam().t;
  const double r = 0.01, alpha = 0.8, beta = 0.95, eps = 1e-4, norm = 0.01, post = 0.05;
  std::vector<Tensor> xs = {RandomTensor(dt, {2, 3}), RandomTensor(dt, {7})};
  std::vector<Tensor> gs = {RandomTensor(dt, {2, 3}), RandomTensor(dt, {7})};
  std::vector<Tensor> vs = {RandomTensor(dt, {2, 3}), RandomTensor(dt, {7})};
  std::vector<Tensor> hs = {RandomTensor(dt, {2, 3}, 0.0, 1.0), RandomTensor(dt, {7}, 0.0, 1.0)};
  std::vector<Tensor> ins = {Scalar(DataType::kFloat64, r), Tensor::FromInt64({t}, {})};
  for (auto* v : {&xs, &gs, &vs, &hs}) ins.insert(ins.end(), v->begin(), v->end());
  auto got = RunPreview("Adam", ins, 6,
                        {{"alpha", Attribute::Float(alpha)},
                         {"beta", Attribute::Float(beta)},
                         {"epsilon", Attribute::Float(eps)},
                         {"norm_coefficient", Attribute::Float(norm)},
                         {"norm_coefficient_post", Attribute::Float(post)}});
  const double a = static_cast<float>(alpha), b = static_cast<float>(beta), ep = static_cast<float>(eps),
               nc = static_cast<float>(norm), pc = static_cast<float>(post);
  const double rr = t > 0 ? r * std::sqrt(1 - std::pow(b, t)) / (1 - std::pow(a, t)) : r;
  auto want = Reference(xs, gs, {vs, hs}, [&](double x, double g, const std::vector<double>& s) {
    const double gr = nc * x + g, v = a * s[0] + (1 - a) * gr, h = b * s[1] + (1 - b) * gr * gr;
    return std::vector<double>{(1 - pc) * (x - rr * v / (std::sqrt(h) + ep)), v, h};
  });
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ExpectClose(got[i], want[i], dt == DataType::kFloat64 ? 1e-12 : 1e-5, 1e-6);
}

TEST_P(PreviewOps, MomentumStandardAndNesterov) {
  const DataType dt = GetParam().dtype;
  const int64_t t = GetParam().t;
  for (const char* mode : {"standard", "nesterov"}) {
    const bool nesterov = std::string(mode) == "nesterov";
    const double r = 0.05, alpha = 0.9, beta = 0.7, norm = 0.03;
    std::vector<Tensor> xs = {RandomTensor(dt, {4}), RandomTensor(dt, {2, 2, 2})};
    std::vector<Tensor> gs = {RandomTensor(dt, {4}), RandomTensor(dt, {2, 2, 2})};
    std::vector<Tensor> vs = {RandomTensor(dt, {4}), RandomTensor(dt, {2, 2, 2})};
    std::vector<Tensor> ins = {Scalar(DataType::kFloat32, r), Tensor::FromInt64({t}, {})};
    for (auto* v : {&xs, &gs, &vs}) ins.insert(ins.end(), v->begin(), v->end());
    auto got = RunPreview("Momentum", ins, 4,
                          {{"alpha", Attribute::Float(alpha)},
                           {"beta", Attribute::Float(beta)},
                           {"mode", Attribute::String(mode)},
                           {"norm_coefficient", Attribute::Float(norm)}});
    const double a = static_cast<float>(alpha), b = t > 0 ? static_cast<float>(beta) : 1.0,
                 nc = static_cast<float>(norm), rr = static_cast<float>(r);
    auto want = Reference(xs, gs, {vs}, [&](double x, double g, const std::vector<double>& s) {
      const double gr = nc * x + g, v = a * s[0] + b * gr;
      return std::vector<double>{nesterov ? x - rr * (gr + a * v) : x - rr * v, v};
    });
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ExpectClose(got[i], want[i], dt == DataType::kFloat64 ? 1e-12 : 1e-6, 1e-7);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PreviewOps,
                         ::testing::Values(Case{DataType::kFloat32, 0}, Case{DataType::kFloat32, 3},
                                           Case{DataType::kFloat64, 0}, Case{DataType::kFloat64, 7}),
                         [](const auto& info) {
                           return DataTypeName(info.param.dtype) + "_t" + std::to_string(info.param.t);
                         });

// Expects `f` to throw ot::Error whose message has every piece.
template <typename F>
void ExpectError(F&& f, const std::vector<std::string>& pieces) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one with '" << pieces.at(0) << "'";
  } catch (const Error& e) {
    for (const auto& p : pieces) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(PreviewOpsErrors, NameTheNode) {
  const DataType dt = DataType::kFloat32;
  std::vector<Tensor> ins = {Scalar(dt, 0.1), Tensor::FromInt64({1}, {}), RandomTensor(dt, {3}), RandomTensor(dt, {3}),
                             RandomTensor(dt, {3})};
  // An unknown Momentum mode.
  ExpectError(
      [&] {
        RunPreview("Momentum", ins, 2,
                   {{"alpha", Attribute::Float(0.9f)},
                    {"beta", Attribute::Float(1.0f)},
                    {"mode", Attribute::String("heavy_ball")},
                    {"norm_coefficient", Attribute::Float(0.0f)}});
      },
      {"'opt'", "Momentum", "heavy_ball"});
  // A missing required attribute.
  ExpectError([&] { RunPreview("Momentum", ins, 2, {{"alpha", Attribute::Float(0.9f)}}); }, {"'opt'", "beta"});
  // A gradient whose shape is not its X's.
  std::vector<Tensor> bad = ins;
  bad[3] = RandomTensor(dt, {4});
  ExpectError([&] { RunPreview("Adagrad", bad, 2, {}); }, {"'opt'", "Adagrad"});
  // An operand count that is not 2 + 3n.
  ins.pop_back();
  ExpectError([&] { RunPreview("Adagrad", ins, 2, {}); }, {"'opt'", "inputs"});
}

}  // namespace
}  // namespace ot
