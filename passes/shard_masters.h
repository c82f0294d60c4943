// shard_masters: with --shard-optimizer and mixed precision, the float32 master weights are partitioned over the
// ranks as the optimizer's moments are (ZeRO stage 1: masters and moments; graph/ops/optimizer_shard.h splits them).
//
// Runs after master_weights and loss_scaling, on a step whose OptimizerUpdate is sharded (shard_world = W > 1) and
// has half copies. It adds the state "optimizer.shard.master": this rank's blocks of every parameter's float32
// value (1-D, laid out as the sharded moments), the last input and output of the update (attribute shard_master = 1,
// master_names naming each parameter). A parameter read by nothing but the update -- the forward reads its half
// copy -- then loses its input and output on the update and its update binding, and its initializer is dropped:
// its whole fp32 value exists nowhere (1/W of it on each rank), and the update writes its half copy from the
// all-gathered shards. A parameter that the forward also reads in float32 stays whole (its shard a copy).
//
// `rank` picks which blocks the initial master holds (each rank builds its own step). Returns false, changing
// nothing, when the update is not sharded or has no half copy.
#pragma once
#include "passes/pass.h"

namespace ot {

class ShardMastersPass : public Pass {
 public:
  explicit ShardMastersPass(int rank) : rank_(rank) {}
  std::string name() const override { return "shard_masters"; }
  bool Run(Graph& g) override;

 private:
  int rank_;
};

}  // namespace ot
