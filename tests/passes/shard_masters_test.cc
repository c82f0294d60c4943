// shard_masters pass: on a sharded step with half copies, the master shard holds exactly this rank's blocks of every
// parameter (graph/ops/optimizer_shard.h's split), the masters only the update reads leave the step (no input, no
// output, no binding, no initializer), one that a float32 op also reads stays whole; the schema accepts the result;
// HalfCopies still names each master. Negative twins: unsharded, or no half copy, changes nothing; a rank outside
// the world is an error. The numbers (2 ranks against the unsharded run) are tests/cli/data_parallel.sh's.
#include "passes/shard_masters.h"

#include <gtest/gtest.h>

#include <cstring>

#include "graph/ops/optimizer_layout.h"
#include "graph/ops/optimizer_shard.h"
#include "passes/master_weights.h"
#include "tests/passes/amp_step_util.h"

namespace ot {
namespace {

using namespace amp_test;

bool Bound(const Graph& g, const Value* state) {
  for (const auto& b : g.update_bindings)
    if (b.state == state) return true;
  return false;
}

TEST(ShardMasters, ShardsMastersOnlyTheUpdateReads) {
  for (int world : {2, 3})
    for (int rank = 0; rank < world; ++rank) {
      const Weights w = Weights::Random();
      Step s = MakeStep(w, "adam", 1, world);
      Graph& g = *s.graph;
      InsertAmpCasts(g, {"W1", "W2"}, DataType::kBFloat16);
      // W2 and b2: half copies, no other reader. W1: a half copy and a float32 reader besides, so its master stays
      // whole. b1: no half copy.
      InsertAmpCasts(g, {"b2"}, DataType::kBFloat16);
      Value* w1_sum = g.AddValue("w1_sum");
      g.AddNode("ReduceSum", {g.FindValue("W1")}, {w1_sum}, "w1_reader");
      InferShapes(g);
      g.outputs.push_back(w1_sum);
      ASSERT_TRUE(MasterWeightsPass().Run(g));
      Node* opt = UpdateNode(g);
      const OptimizerLayout before = OptimizerLayout::Of(*opt);
      ASSERT_EQ(before.m(), 3);
      std::vector<Value*> params;
      std::vector<int64_t> numel;
      for (int i = 0; i < before.n; ++i) {
        params.push_back(opt->inputs[before.param_in(i)]);
        numel.push_back(params.back()->initializer->numel());
      }
      const std::map<std::string, Tensor> original = {{"W1", w.w1}, {"b1", w.b1}, {"W2", w.w2}, {"b2", w.b2}};

      ShardMastersPass pass(rank);
      EXPECT_EQ(pass.name(), "shard_masters");
      ASSERT_TRUE(pass.Run(g));
      VerifyGraph(g);
      InferShapes(g, true);
      const OptimizerLayout l = OptimizerLayout::Of(*opt);
      ASSERT_TRUE(l.shard_master);
      EXPECT_EQ(static_cast<int>(opt->inputs.size()), l.num_inputs());
      EXPECT_EQ(static_cast<int>(opt->outputs.size()), l.num_outputs());
      ExpectProducersConsistent(opt);
      const std::vector<std::string> names = opt->attr_strings("master_names");
      ASSERT_EQ(static_cast<int>(names.size()), l.n);

      // The master shard: rank `rank`'s blocks of every parameter, the padding zero.
      const OptimizerShards shards(world, l.shard_groups, numel);
      Value* m = opt->inputs[l.master_in()];
      ASSERT_TRUE(m && m->initializer);
      EXPECT_EQ(m->initializer->dims(), std::vector<int64_t>{shards.size()});
      EXPECT_TRUE(Bound(g, m));
      EXPECT_EQ(opt->outputs[l.master_out()]->shape.ToString(), m->shape.ToString());
      Tensor want(DataType::kFloat32, {shards.size()});
      int64_t covered = 0;
      for (const ShardSlice& sl : shards.Slices(rank)) {
        std::memcpy(want.data<float>() + sl.at, original.at(names[sl.param]).data<float>() + sl.offset,
                    static_cast<size_t>(sl.len) * 4);
        covered += sl.len;
      }
      EXPECT_GT(covered, 0);
      EXPECT_EQ(std::memcmp(want.raw(), m->initializer->raw(), want.nbytes()), 0);

      // W2 and b2 (read by nothing but their half Casts and the update) left the step; W1 and b1 stay whole.
      for (int i = 0; i < l.n; ++i) {
        const bool gone = names[i] == "W2" || names[i] == "b2";
        EXPECT_EQ(!opt->has_input(l.param_in(i)), gone) << names[i];
        EXPECT_EQ(!opt->has_output(l.param_out(i)), gone) << names[i];
        EXPECT_EQ(params[i]->initializer == nullptr, gone) << names[i];
        EXPECT_EQ(Bound(g, params[i]), !gone) << names[i];
        EXPECT_EQ(params[i]->name, names[i]);
      }
      // Each half copy still has its master (by name where it left the step), shaped alike.
      const auto pairs = HalfCopies(g);
      ASSERT_EQ(pairs.size(), 3u);
      for (const auto& [master, half] : pairs) {
        EXPECT_EQ(half->name, master->name + ".half");
        EXPECT_EQ(half->initializer->dims(), original.at(master->name).dims());
      }
      EXPECT_FALSE(ShardMastersPass(rank).Run(g));  // once
    }
}

TEST(ShardMasters, NegativeTwinsChangeNothing) {
  {  // not sharded
    Step s = MakeStep(Weights::Random());
    InsertAmpCasts(*s.graph, {"W1"}, DataType::kFloat16);
    ASSERT_TRUE(MasterWeightsPass().Run(*s.graph));
    const Shape_ before = Snapshot(*s.graph);
    EXPECT_FALSE(ShardMastersPass(0).Run(*s.graph));
    EXPECT_TRUE(Snapshot(*s.graph) == before);
  }
  {  // sharded, no half copy (fp32)
    Step s = MakeStep(Weights::Random(), "adam", 1, 2);
    const Shape_ before = Snapshot(*s.graph);
    EXPECT_FALSE(ShardMastersPass(1).Run(*s.graph));
    EXPECT_TRUE(Snapshot(*s.graph) == before);
  }
}

TEST(ShardMasters, RankOutsideTheWorldIsAnError) {
  Step s = MakeStep(Weights::Random(), "sgd", 1, 2);
  InsertAmpCasts(*s.graph, {"W1"}, DataType::kFloat16);
  ASSERT_TRUE(MasterWeightsPass().Run(*s.graph));
  try {
    ShardMastersPass(2).Run(*s.graph);
    FAIL() << "rank 2 of 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 of a world of 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ot
