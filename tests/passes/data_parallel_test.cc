// data_parallel pass: buckets in the backward's order, at most the bucket size (a larger gradient alone), each
// bucket's start ordered after the previous one and its wait after the last start, every gradient the optimizer
// would read replaced by its mean; and the CPU kernels of AllReduceStart/Wait over a fake world of 2 (the other
// rank's gradients known): every output element is the mean, in the bucket's own packing order. One rank: nothing
// changes.
#include "passes/data_parallel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "dist/comm.h"
#include "executor/executor.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/verifier.h"
#include "passes/autodiff.h"
#include "tests/test_util.h"

namespace ot {
namespace {

Value* Emit(Graph& g, const std::string& op, std::vector<Value*> ins) {
  Value* out = g.AddValue(g.UniqueName(op + "_out"));
  g.AddNode(op, ins, {out}, g.UniqueName(op));
  return out;
}

Tensor Random(std::mt19937& rng, std::vector<int64_t> dims) {
  Tensor t(DataType::kFloat32, dims);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// loss = ReduceSum(((x W1 + b1) W2 + b2)^2): W1 [4, 6] (96 bytes), b1 [6], W2 [6, 3] (72 bytes), b2 [3]; x frozen.
struct Model {
  std::unique_ptr<Graph> g;
  std::vector<Value*> params, grads;
};
Model Build(uint32_t seed) {
  std::mt19937 rng(seed);
  Model m;
  m.g = std::make_unique<Graph>();
  Graph& g = *m.g;
  g.opset_imports[""] = 17;
  Value* x = g.AddInitializer("x", Random(rng, {2, 4}));
  Value* w1 = g.AddInitializer("W1", Random(rng, {4, 6}));
  Value* b1 = g.AddInitializer("b1", Random(rng, {6}));
  Value* w2 = g.AddInitializer("W2", Random(rng, {6, 3}));
  Value* b2 = g.AddInitializer("b2", Random(rng, {3}));
  Value* h = Emit(g, "Add", {Emit(g, "MatMul", {x, w1}), b1});
  Value* y = Emit(g, "Add", {Emit(g, "MatMul", {h, w2}), b2});
  Value* loss = g.AddValue("loss");
  Node* red = g.AddNode("ReduceSum", {Emit(g, "Mul", {y, y})}, {loss}, "loss_sum");
  red->attrs["keepdims"] = Attribute::Int(0);
  g.outputs.push_back(loss);
  AutodiffPass ad({"loss", "^x$"});
  EXPECT_TRUE(ad.Run(g));
  m.params = ad.params();
  m.grads = ad.grads();
  return m;
}

std::vector<Node*> Nodes(const Graph& g, const std::string& op) {
  std::vector<Node*> r;
  for (Node* n : g.TopologicalOrder())
    if (n->op_type == op) r.push_back(n);
  return r;
}

TEST(DataParallelPass, BucketsInBackwardOrderEachAfterThePrevious) {
  Model m = Build(1);
  Graph& g = *m.g;
  const std::vector<Value*> original = m.grads;
  std::vector<Value*> grads = m.grads;
  // 100 bytes: W2's gradient (72) and b2's (12) share a bucket, W1's (96) is alone, b1's (24) alone.
  DataParallelPass pass({2, 100}, m.params, grads);
  ASSERT_TRUE(pass.Run(g));
  VerifyGraph(g);
  const std::vector<Node*> start = Nodes(g, "AllReduceStart"), wait = Nodes(g, "AllReduceWait");
  ASSERT_EQ(start.size(), pass.buckets().size());
  ASSERT_EQ(wait.size(), pass.buckets().size());
  ASSERT_EQ(start.size(), 3u);
  std::map<std::string, size_t> bucket_of;  // parameter -> bucket
  for (size_t k = 0; k < pass.buckets().size(); ++k)
    for (size_t i : pass.buckets()[k]) bucket_of[m.params[i]->name] = k;
  // The backward reaches the last layer first.
  EXPECT_EQ(bucket_of["W2"], bucket_of["b2"]);
  EXPECT_LT(bucket_of["W2"], bucket_of["W1"]);
  EXPECT_NE(bucket_of["W1"], bucket_of["b1"]);
  const size_t last = start.size() - 1;
  for (size_t k = 0; k < start.size(); ++k) {
    const int64_t count = start[k]->attr_int("count", 0);
    EXPECT_EQ(start[k]->attr_int("world", 0), 2);
    EXPECT_EQ(static_cast<size_t>(count), pass.buckets()[k].size());
    EXPECT_EQ(wait[k]->outputs.size(), pass.buckets()[k].size());
    EXPECT_EQ(wait[k]->inputs[0], start[k]->outputs[0]);
    // Start k > 0 also reads bucket k - 1 (the order of the collectives); every wait but the last reads the last
    // bucket (no wait before every start).
    ASSERT_EQ(start[k]->inputs.size(), static_cast<size_t>(count) + (k > 0 ? 1 : 0));
    if (k > 0) EXPECT_EQ(start[k]->inputs.back(), start[k - 1]->outputs[0]);
    ASSERT_EQ(wait[k]->inputs.size(), k < last ? 2u : 1u);
    if (k < last) EXPECT_EQ(wait[k]->inputs[1], start[last]->outputs[0]);
  }
  // Every gradient replaced by a mean, and no longer an output of the graph.
  for (size_t i = 0; i < grads.size(); ++i) {
    ASSERT_NE(grads[i], original[i]);
    ASSERT_NE(grads[i]->producer, nullptr);
    EXPECT_EQ(grads[i]->producer->op_type, "AllReduceWait");
    EXPECT_EQ(std::count(g.outputs.begin(), g.outputs.end(), original[i]), 0) << original[i]->name;
  }
}

TEST(DataParallelPass, OneRankChangesNothing) {
  Model m = Build(2);
  std::vector<Value*> grads = m.grads;
  const size_t nodes = m.g->nodes().size();
  EXPECT_FALSE(DataParallelPass({1, 100}, m.params, grads).Run(*m.g));
  EXPECT_EQ(m.g->nodes().size(), nodes);
  EXPECT_EQ(grads, m.grads);
}

// A world of 2 inside this process: the other rank's contribution to every sum is `other` (element by element, in
// the bucket's packing order), recorded per call.
class FakeWorld final : public dist::Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string description() const override { return "fake"; }
  void AllReduceSum(float* data, int64_t n) override {
    calls.push_back(n);
    for (int64_t i = 0; i < n; ++i) data[i] += static_cast<float>(offset + i);
    offset += n;
  }
  void AllReduceSum(double* data, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) data[i] += 1;
  }
  struct Done final : dist::Request {
    void Wait() override {}
  };
  std::shared_ptr<dist::Request> StartAllReduceSum(float* data, int64_t n) override {
    AllReduceSum(data, n);
    return std::make_shared<Done>();
  }
  std::vector<std::string> AllGather(const std::string& s) override { return {s, s}; }
  [[noreturn]] void Abort(int) override { std::abort(); }
  void Finalize() override {}
  std::vector<int64_t> calls;
  int64_t offset = 0;
};

TEST(DataParallelPass, TheKernelWritesEachGradientsMeanOverTheRanks) {
  // The gradients of one rank (no pass), and the means through the pass with a fake world of 2 whose other rank
  // contributes 0, 1, 2, ... in packing order across the buckets.
  Model ref = Build(3);
  for (Value* v : ref.grads) ref.g->outputs.push_back(v);
  std::vector<Tensor> local;
  {
    Executor ex(*ref.g);
    local = ex.Run({});
  }
  Model m = Build(3);
  std::vector<Value*> grads = m.grads;
  DataParallelPass pass({2, 100}, m.params, grads);
  ASSERT_TRUE(pass.Run(*m.g));
  for (Value* v : grads) m.g->outputs.push_back(v);
  FakeWorld world;
  dist::SetWorldForTesting(&world);
  std::vector<Tensor> means;
  {
    Executor ex(*m.g);
    means = ex.Run({});
  }
  dist::SetWorldForTesting(nullptr);
  ASSERT_EQ(world.calls.size(), pass.buckets().size());  // one collective per bucket
  const size_t base = ref.g->outputs.size() - ref.grads.size();
  const size_t mbase = m.g->outputs.size() - grads.size();
  int64_t offset = 0;
  for (size_t k = 0; k < pass.buckets().size(); ++k)
    for (size_t i : pass.buckets()[k]) {
      const Tensor& l = local[base + i];
      const Tensor& got = means[mbase + i];
      ASSERT_EQ(got.numel(), l.numel());
      for (int64_t e = 0; e < l.numel(); ++e) {
        const double want = (l.GetDouble(e) + static_cast<double>(offset + e)) / 2;
        ASSERT_NEAR(got.GetDouble(e), want, 1e-6 * (1 + std::fabs(want))) << m.params[i]->name << "[" << e << "]";
      }
      offset += l.numel();
    }
}

TEST(DataParallelPass, TheKernelRefusesAnotherWorldSize) {
  Model m = Build(4);
  std::vector<Value*> grads = m.grads;
  ASSERT_TRUE(DataParallelPass({3, 1 << 20}, m.params, grads).Run(*m.g));
  for (Value* v : grads) m.g->outputs.push_back(v);
  FakeWorld world;  // 2 ranks
  dist::SetWorldForTesting(&world);
  try {
    Executor ex(*m.g);
    ex.Run({});
    ADD_FAILURE() << "ran a step built for 3 ranks in a world of 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("built for 3 ranks, this job has 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("AllReduceStart"), std::string::npos) << e.what();
  }
  dist::SetWorldForTesting(nullptr);
}

}  // namespace
}  // namespace ot
