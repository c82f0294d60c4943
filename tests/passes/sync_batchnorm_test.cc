// sync_batchnorm pass: a training-mode BatchNormalization becomes its decomposition over the ranks' statistics (two
// AllReduceSum per layer, Constant nodes -- no new trainable initializer -- the running statistics still bound), and,
// over a fake world of 2 whose other rank holds the same batch, computes what the one-process kernel computes: Y and
// both running statistics, every element. One rank: nothing changes.
#include "passes/sync_batchnorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "dist/comm.h"
#include "executor/executor.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "passes/training_mode.h"
#include "tests/test_util.h"

namespace ot {
namespace {

Tensor Random(std::mt19937& rng, std::vector<int64_t> dims, float lo, float hi) {
  Tensor t(DataType::kFloat32, dims);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Y = BatchNormalization(X [3, 4, 5, 6], scale, B, mean, var) in training mode (opset 15), the running statistics
// bound as state; X an input.
std::unique_ptr<Graph> Build(uint32_t seed) {
  std::mt19937 rng(seed);
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 15;
  Value* x = g->AddValue("X");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({3, 4, 5, 6});
  g->inputs.push_back(x);
  std::vector<Value*> ins = {x};
  ins.push_back(g->AddInitializer("scale", Random(rng, {4}, 0.5f, 1.5f)));
  ins.push_back(g->AddInitializer("B", Random(rng, {4}, -1, 1)));
  ins.push_back(g->AddInitializer("mean", Random(rng, {4}, -1, 1)));
  ins.push_back(g->AddInitializer("var", Random(rng, {4}, 0.5f, 2)));
  Value* y = g->AddValue("Y");
  Node* bn = g->AddNode("BatchNormalization", ins, {y}, "bn");
  bn->attrs["epsilon"] = Attribute::Float(1e-3f);
  bn->attrs["momentum"] = Attribute::Float(0.8f);
  g->outputs.push_back(y);
  EXPECT_TRUE(TrainingModePass(true).Run(*g));
  return g;
}

// Runs the graph with the running statistics' next values as outputs: {Y, mean', var'}.
std::vector<Tensor> RunStep(Graph& g, const Tensor& x) {
  for (const auto& ub : g.update_bindings) g.outputs.push_back(ub.next);
  Executor ex(g);
  return ex.Run({{"X", x}});
}

class TwinWorld final : public dist::Comm {  // 2 ranks, the other holding this one's values
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string description() const override { return "twin"; }
  void AllReduceSum(float* d, int64_t n) override {
    ++sums;
    for (int64_t i = 0; i < n; ++i) d[i] *= 2;
  }
  void AllReduceSum(double* d, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) d[i] *= 2;
  }
  std::shared_ptr<dist::Request> StartAllReduceSum(float*, int64_t) override { return nullptr; }
  std::vector<std::string> AllGather(const std::string& s) override { return {s, s}; }
  [[noreturn]] void Abort(int) override { std::abort(); }
  void Finalize() override {}
  int sums = 0;
};

size_t FloatInitializers(const Graph& g) {
  size_t n = 0;
  for (const auto& v : g.values()) n += v->initializer && IsFloat(v->initializer->dtype());
  return n;
}

TEST(SyncBatchNormPass, DecomposesOverTheRanksStatistics) {
  auto g = Build(1);
  const size_t initializers = FloatInitializers(*g);
  ASSERT_TRUE(SyncBatchNormPass(2).Run(*g));
  VerifyGraph(*g);
  int sums = 0, bns = 0;
  for (const auto& n : g->nodes()) {
    sums += n->op_type == "AllReduceSum";
    bns += n->op_type == "BatchNormalization";
  }
  EXPECT_EQ(bns, 0);
  EXPECT_EQ(sums, 2);  // the mean, then the variance
  EXPECT_EQ(FloatInitializers(*g), initializers) << "a new float initializer would be trained";
  ASSERT_EQ(g->update_bindings.size(), 2u);
  for (const auto& ub : g->update_bindings) ASSERT_NE(ub.next->producer, nullptr);
}

TEST(SyncBatchNormPass, TwoRanksWithTheSameBatchComputeTheOneProcessKernel) {
  std::mt19937 rng(std::random_device{}());
  const Tensor x = Random(rng, {3, 4, 5, 6}, -2, 3);
  const uint32_t seed = rng();
  auto ref = Build(seed);
  const std::vector<Tensor> want = RunStep(*ref, x);
  auto g = Build(seed);
  ASSERT_TRUE(SyncBatchNormPass(2).Run(*g));
  TwinWorld world;
  dist::SetWorldForTesting(&world);
  std::vector<Tensor> got;
  try {
    got = RunStep(*g, x);
  } catch (...) {
    dist::SetWorldForTesting(nullptr);
    throw;
  }
  dist::SetWorldForTesting(nullptr);
  EXPECT_EQ(world.sums, 2);  // the layer's mean and variance
  ASSERT_EQ(got.size(), want.size());
  const char* what[3] = {"Y", "mean'", "var'"};
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].numel(), want[o].numel()) << what[o];
    for (int64_t i = 0; i < got[o].numel(); ++i)
      ASSERT_NEAR(got[o].GetDouble(i), want[o].GetDouble(i), 2e-5 * (1 + std::fabs(want[o].GetDouble(i))))
          << what[o] << "[" << i << "]";
  }
}

TEST(SyncBatchNormPass, OneRankChangesNothing) {
  auto g = Build(2);
  const size_t nodes = g->nodes().size();
  EXPECT_FALSE(SyncBatchNormPass(1).Run(*g));
  EXPECT_EQ(g->nodes().size(), nodes);
}

}  // namespace
}  // namespace ot
