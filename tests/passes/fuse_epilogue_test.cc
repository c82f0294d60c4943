// Epilogue fusion (passes/fuse_epilogue.h) on a fake sizer (tests/passes/fake_sizer.h): a GEMM's elementwise reader
// folded into a MatMulEpilogue under full; a batched B, and a result the cluster broadcasts, left alone with the
// reason. The fused kernels' numbers are tested in tests/executor/gemm_epilogue_test.cc and conv_epilogue_test.cc.
#include "passes/fuse_epilogue.h"

#include <gtest/gtest.h>

#include "tests/passes/fake_sizer.h"

namespace ot {
namespace {

using test::Count;
using test::Emit;
using test::FakeSizer;
using test::Input;

FusionReport Fold(Graph& g) {
  FakeSizer sizer;
  const FusionSizes s = sizer.Measure(g);
  FuseOptions o;
  o.mode = FuseMode::kFull;
  FusionReport r;
  EpiloguePass(o, s, &r).Run(g);
  return r;
}

TEST(EpiloguePass, FoldsAGemmsElementwiseReader) {
  auto g = test::Make([](Graph& g) {
    Value* w = g.AddInitializer("w", test::RandomTensor(DataType::kFloat32, {16, 32}));
    Value* y = Emit(g, "MatMul", {Input(g, "a", {8, 16}), w});
    g.outputs.push_back(Emit(g, "Relu", {Emit(g, "Add", {y, Input(g, "b", {32})})}));
  });
  // The cluster pass's work first: one FusedElementwise reads the GEMM (its own test covers that step); here a single
  // elementwise reader is folded as it is.
  FusionReport r = Fold(*g);
  ASSERT_EQ(Count(*g, "MatMulEpilogue"), 1) << test::Refusals(r);
  EXPECT_EQ(Count(*g, "MatMul"), 0);
  const Node* e = test::Find(*g, "MatMulEpilogue");
  EXPECT_EQ(e->domain, kInternalDomain);
  EXPECT_EQ(e->inputs[0]->name, "a");
  EXPECT_EQ(e->inputs[1]->name, "w");
  ASSERT_FALSE(r.clusters.empty());
  EXPECT_EQ(r.clusters.back().name.rfind("epilogue/", 0), 0u) << r.clusters.back().name;
}

TEST(EpiloguePass, LeavesBatchedAndBroadcastGemmsAlone) {
  auto batched = test::Make([](Graph& g) {
    Value* y = Emit(g, "MatMul", {Input(g, "a", {2, 8, 16}), Input(g, "bt", {2, 16, 32})});
    g.outputs.push_back(Emit(g, "Relu", {y}));
  });
  FusionReport rb = Fold(*batched);
  EXPECT_EQ(Count(*batched, "MatMulEpilogue"), 0);
  EXPECT_NE(test::Refusals(rb).find("is batched"), std::string::npos) << test::Refusals(rb);
  EXPECT_EQ(Count(*batched, "MatMul"), 1);

  auto broadcast = test::Make([](Graph& g) {
    Value* w = g.AddInitializer("w", test::RandomTensor(DataType::kFloat32, {16, 32}));
    Value* y = Emit(g, "MatMul", {Input(g, "a", {1, 16}), w});
    g.outputs.push_back(Emit(g, "Add", {y, Input(g, "m", {8, 32})}));
  });
  FusionReport r = Fold(*broadcast);
  EXPECT_EQ(Count(*broadcast, "MatMulEpilogue"), 0);
  EXPECT_NE(test::Refusals(r).find("domain"), std::string::npos) << test::Refusals(r);
}

}  // namespace
}  // namespace ot
