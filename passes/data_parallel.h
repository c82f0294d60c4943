// data_parallel: the gradient all-reduce of data-parallel training (DDP's semantics), for a world of more than one
// rank (dist/comm.h).
//
// Rewrite: the gradients autodiff made are packed, in the order the backward produces them (their producers' order
// in the graph, which the passes keep topological), into buckets of at most `bucket_bytes` (a gradient larger than
// that is a bucket of its own). Each bucket becomes two nodes (graph/ops/collective.cc): ai.onnxtrain.AllReduceStart
// (g1, ..., gk) -> bucket packs the gradients and starts their sum over the ranks, which a communication thread
// carries on (dist/comm.h) while the executor runs the rest of the backward; AllReduceWait(bucket) -> (m1, ..., mk)
// waits for it and writes each mean. Every collective of the step (the starts, and --sync-batchnorm's
// AllReduceSum nodes) also reads the one before it in the topological order (not as data), so every rank issues
// them in one order whatever order its threads finish the backward in (MPI matches collectives by order); each
// wait also reads the last bucket, so no wait holds the backward up. The optimizer then reads the
// means: every rank takes the same update, its loss-scale check included (a non-finite gradient on one rank is
// non-finite in the mean on all). Runs after autodiff and before the optimizer, so the amp pass sees the
// all-reduce (deny ops: the buckets hold float32 gradients, the ones the update reads).
#pragma once
#include <cstdint>
#include <vector>

#include "passes/pass.h"

namespace ot {

struct DataParallelOptions {
  int world = 1;                      // ranks (mpirun -np N); 1: the pass changes nothing
  int64_t bucket_bytes = 25ll << 20;  // --bucket-mb
  bool sync_batchnorm = false;        // --sync-batchnorm (passes/sync_batchnorm.h)
  // --shard-optimizer: each bucket is reduce-scattered instead (attribute scatter = 1 on its two nodes): rank r
  // receives block r of the bucket's mean (graph/ops/optimizer_shard.h, the buckets being its groups), the part of
  // the gradients its shard of the optimizer reads.
  bool shard_optimizer = false;
  // Builds the collectives for a world of one too (tests: NCCL's path against the plain run on one GPU).
  bool even_alone = false;
  int rank = 0;  // this process's rank (which blocks of the sharded master weights it holds)
};

class DataParallelPass : public Pass {
 public:
  // `grads`: the gradients the optimizer will read (AutodiffPass::grads()), grads[i] that of params[i] (an
  // initializer: its dims are the gradient's); Run replaces each by its mean.
  DataParallelPass(DataParallelOptions o, std::vector<Value*> params, std::vector<Value*>& grads)
      : opts_(o), params_(std::move(params)), grads_(grads) {}
  std::string name() const override { return "data_parallel"; }
  bool Run(Graph& g) override;
  // The buckets made, each as its gradients' indices in `grads` (for tests and the memory report).
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }

 private:
  DataParallelOptions opts_;
  std::vector<Value*> params_;
  std::vector<Value*>& grads_;
  std::vector<std::vector<size_t>> buckets_;
};

}  // namespace ot
