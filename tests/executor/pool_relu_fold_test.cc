// The pool ReluGrad fold (passes/fuse_pool_relu.h) under --fuse=lite and full, sized by a real plan
// (training/fusion.h): ReluGrad(MaxPoolGrad(dP, R), R) becomes MaxPoolGrad {relu = 1}(dP, R). The fold claims the
// separate ops' bits, so the differential tests compare the folded graph with the unfused one exactly, on fresh
// random inputs (R = Relu(X): about half zeros, so whole windows are masked), for every float type and for the
// kernel's paths (2x2 vector rows, 3x3 tiles, overlapping windows, pads, ceil mode, 1-D and 3-D). Negative twins:
// --fuse=off, dR read elsewhere, a MaxPoolGrad whose X is not ReluGrad's R.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/graph.h"
#include "tests/executor/fusion_test_util.h"
#include "tests/test_util.h"
#include "training/fusion.h"

namespace ot {
namespace {

using test::Count;
using test::Emit;
using test::Find;
using test::Input;
using test::Make;

struct Pool {
  std::vector<int64_t> x{2, 3, 8, 10}, kernel{2, 2}, strides{2, 2}, pads;  // pads: begins then ends, or none
  bool ceil = false;
  DataType t = DataType::kFloat32;
  bool dr_out = false;   // dR is also a graph output
  bool other_x = false;  // MaxPoolGrad's X is another Relu than the one ReluGrad masks with
};

std::vector<int64_t> OutDims(const Pool& p) {
  std::vector<int64_t> y{p.x[0], p.x[1]};
  const size_t r = p.kernel.size();
  for (size_t i = 0; i < r; ++i) {
    const int64_t pad = p.pads.empty() ? 0 : p.pads[i] + p.pads[i + r];
    const int64_t span = p.x[i + 2] + pad - p.kernel[i];
    int64_t o = (p.ceil ? (span + p.strides[i] - 1) / p.strides[i] : span / p.strides[i]) + 1;
    // ceil mode: a last window that would start past the input and its begin pad is dropped
    if (p.ceil && (o - 1) * p.strides[i] >= p.x[i + 2] + (p.pads.empty() ? 0 : p.pads[i])) --o;
    y.push_back(o);
  }
  return y;
}

// The backward of Relu -> MaxPool as autodiff writes it: MaxPoolGrad(dP, R) -> dR, ReluGrad(dR, R) -> dY.
void Block(Graph& g, const Pool& p) {
  Value* r = Emit(g, "Relu", {Input(g, "x", p.x, p.t)});
  Value* rx = p.other_x ? Emit(g, "Relu", {Input(g, "x2", p.x, p.t)}) : r;
  Value* dp = Input(g, "dp", OutDims(p), p.t);
  test::Attrs a{{"kernel_shape", Attribute::Ints(p.kernel)}, {"strides", Attribute::Ints(p.strides)}};
  if (!p.pads.empty()) a["pads"] = Attribute::Ints(p.pads);
  if (p.ceil) a["ceil_mode"] = Attribute::Int(1);
  Value* dr = test::EmitInternal(g, "MaxPoolGrad", {dp, rx}, 1, a)[0];
  if (p.dr_out) g.outputs.push_back(dr);
  g.outputs.push_back(test::EmitInternal(g, "ReluGrad", {dr, r})[0]);
}

void ExpectSameBits(const Pool& p, const std::string& mode = "lite") {
  test::ExpectFusedMatches([&](Graph& g) { Block(g, p); }, mode, "MaxPoolGrad", 0.0, 0.0);
}

TEST(PoolReluFold, LiteFoldsReluGradIntoMaxPoolGrad) {
  Pool p;
  auto g = Make([&](Graph& g) { Block(g, p); });
  FusionReport r = test::FuseStatic(*g, "lite");
  EXPECT_EQ(Count(*g, "ReluGrad"), 0) << FormatFusionReport(r);
  const Node* m = Find(*g, "MaxPoolGrad");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->attr_int("relu", 0), 1);
  EXPECT_EQ(m->outputs[0], g->outputs[0]);
  EXPECT_EQ(m->inputs[1]->producer->op_type, "Relu");
  ASSERT_EQ(r.clusters.size(), 1u) << FormatFusionReport(r);
  EXPECT_EQ(r.clusters[0].kind, "fold");
  EXPECT_EQ(r.clusters[0].ops.size(), 2u);
  EXPECT_EQ(r.clusters[0].saved_bytes, 2 * 2 * 3 * 8 * 10 * 4);  // dR written and read
  EXPECT_EQ(r.fused_nodes, 2);
  ExpectSameBits(p);
  ExpectSameBits(p, "full");
}

TEST(PoolReluFold, EveryFloatTypeKeepsTheBits) {
  for (DataType t : {DataType::kFloat64, DataType::kBFloat16, DataType::kFloat16}) {
    Pool p;
    p.t = t;
    p.x = {2, 3, 6, 19};  // an odd row: the vector loop's tail
    ExpectSameBits(p);
  }
}

TEST(PoolReluFold, EveryKernelPathKeepsTheBits) {
  Pool three;  // 3x3 tiles
  three.x = {2, 2, 9, 12};
  three.kernel = three.strides = {3, 3};
  Pool overlap;  // overlapping windows: an element's gradient summed from several, zeroed as a whole
  overlap.x = {2, 2, 9, 11};
  overlap.kernel = {3, 3};
  overlap.strides = {2, 2};
  Pool padded;  // pads and ceil mode: the gathered-window path
  padded.x = {1, 3, 7, 6};
  padded.kernel = {3, 2};
  padded.pads = {1, 0, 1, 1};
  padded.ceil = true;
  Pool one;  // 1-D
  one.x = {2, 3, 21};
  one.kernel = one.strides = {2};
  Pool cube;  // 3-D
  cube.x = {1, 2, 4, 6, 5};
  cube.kernel = cube.strides = {2, 2, 2};
  for (const Pool& p : {three, overlap, padded, one, cube}) {
    auto g = Make([&](Graph& g) { Block(g, p); });
    test::FuseStatic(*g, "lite");
    EXPECT_EQ(Count(*g, "ReluGrad"), 0);
    ExpectSameBits(p);
  }
}

TEST(PoolReluFold, NoFoldUnderOff) {
  auto g = Make([&](Graph& g) { Block(g, Pool{}); });
  test::FuseStatic(*g, "off");
  EXPECT_EQ(Count(*g, "ReluGrad"), 1);
  EXPECT_EQ(Find(*g, "MaxPoolGrad")->attr_int("relu", 0), 0);
}

TEST(PoolReluFold, NoFoldWhenDRIsReadElsewhere) {
  Pool p;
  p.dr_out = true;
  auto g = Make([&](Graph& g) { Block(g, p); });
  FusionReport r = test::FuseStatic(*g, "lite");
  EXPECT_EQ(Count(*g, "ReluGrad"), 1);
  EXPECT_EQ(Find(*g, "MaxPoolGrad")->attr_int("relu", 0), 0);
  EXPECT_TRUE(test::RefusedWith(r, "other readers")) << FormatFusionReport(r);
}

TEST(PoolReluFold, NoFoldWhenThePoolReadsAnotherValue) {
  Pool p;
  p.other_x = true;
  auto g = Make([&](Graph& g) { Block(g, p); });
  FusionReport r = test::FuseStatic(*g, "lite");  // (the ReluGrad may join a cluster with its Relu instead)
  EXPECT_EQ(Find(*g, "MaxPoolGrad")->attr_int("relu", 0), 0);
  EXPECT_TRUE(test::RefusedWith(r, "not the Relu output")) << FormatFusionReport(r);
  ExpectSameBits(p);
}

}  // namespace
}  // namespace ot
