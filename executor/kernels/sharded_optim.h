// The sharded update of OptimizerUpdate (--shard-optimizer, graph/ops/optimizer_shard.h), for the CPU kernel of
// executor/kernels/internal_optim.cc: this rank updates its slices of the parameters with its shard of the
// optimizer state (the whole model's gradient norm and skip decision summed over the ranks), then every rank's
// slices are all-gathered into the full parameters, and the half copies are rounded from them.
#pragma once
#include <cstdint>
#include <vector>

#include "cpu_ops/optimizer.h"
#include "executor/kernel_registry.h"
#include "graph/ops/optimizer_layout.h"
#include "graph/ops/optimizer_shard.h"

namespace ot {

struct ShardedUpdate {
  OptimizerLayout l;
  OptimizerShards shards;
  std::vector<std::vector<ShardSlice>> slices;  // by rank
  std::vector<int64_t> numel;
  std::vector<cpu::HalfKind> half;  // by parameter
  std::vector<int> half_slot;       // output of parameter i's half copy, -1 when none
  std::vector<char> whole;          // parameter i has its input and output (not only in the master shard)
  cpu::OptimHyper h;
  OptimizerHyperparams a;
  bool lr_f64 = false;

  // Validates the node against its operands (fails through ctx) and sizes the workspace.
  static ShardedUpdate Make(const KernelContext& ctx, const OptimizerHyperparams& a, const cpu::OptimHyper& h);
  size_t workspace_bytes() const;
  size_t gather_bytes() const;
  void Run(const KernelIO& io) const;

 private:
  // Every rank's updated blocks into the whole parameters and half copies, a group (a gradient bucket) at a time.
  void Gather(const KernelIO& io, int rank, float* blocks) const;
};

}  // namespace ot
