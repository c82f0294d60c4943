// --shard-optimizer's state in checkpoints (graph/ops/optimizer_shard.h): a file holds each optimizer state per
// parameter ("P.exp_avg", as an unsharded run names it), so a checkpoint of a sharded run resumes unsharded, on
// another number of ranks, or sharded again, and one of an unsharded run resumes sharded. The sharded master
// weights (passes/shard_masters.h) are held as the parameters themselves ("P"): gathered, only those of parameters
// that exist nowhere else whole (the others are states of their own), and cut from every parameter's array.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/ops/optimizer_shard.h"
#include "graph/tensor.h"

namespace ot {

class ShardedState {
 public:
  // The sharded states of the step's OptimizerUpdate node (none when it is not sharded).
  explicit ShardedState(const Graph& step);
  bool empty() const { return states_.empty(); }
  // True for a sharded state ("optimizer.shard.exp_avg", "optimizer.shard.master").
  bool Has(const Value* state) const;
  // The sharded master weights, or null.
  const Value* master() const { return master_; }
  // The parameters whose float32 value is only in the master shard (their names, their dims).
  std::vector<std::pair<std::string, std::vector<int64_t>>> ShardOnlyParams() const;
  // Every rank's shard of `state` gathered (a collective: every rank calls it, in the same order) into one tensor
  // per parameter, named as an unsharded run names it.
  std::vector<std::pair<std::string, Tensor>> Gather(const Value* state) const;
  // The file's arrays this rank's shard of `state` is cut from (their names), and the cutting: fills `shard` from
  // `arrays`; returns what is missing or mis-shaped ("" when all is well).
  std::vector<std::string> Names(const Value* state) const;
  std::string Scatter(const Value* state, const std::map<std::string, Tensor>& arrays, Tensor* shard) const;

 private:
  struct State {
    const Value* value;
    std::string suffix;  // "exp_avg"; "" for the master weights
  };
  struct Param {
    std::string name;
    std::vector<int64_t> dims;
    bool whole = true;  // a state of its own in the step
  };
  std::vector<State> states_;
  std::vector<Param> params_;
  const Value* master_ = nullptr;
  std::string Name(const Param& p, const State& s) const { return s.suffix.empty() ? p.name : p.name + "." + s.suffix; }
  OptimizerShards shards_;
  const State* Find(const Value* v) const;
};

}  // namespace ot
