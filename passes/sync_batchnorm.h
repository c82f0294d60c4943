// sync_batchnorm: `--sync-batchnorm` under data-parallel training (PyTorch's SyncBatchNorm): each BatchNormalization
// in training mode normalizes with the mean and variance of the global batch -- every rank's samples -- instead of
// its own, and its running statistics follow those.
//
// Rewrite (world > 1; after training_mode, before autodiff): BatchNormalization(X, scale, B, mean, var) {epsilon,
// momentum} in training mode becomes, with the means over every axis but the channels (1):
//   m = AllReduceSum(ReduceMean(X)) / world                    -- the global batch mean
//   v = AllReduceSum(ReduceMean((X - m)^2)) / world            -- its biased variance, in two passes as the
//                                                                 one-process kernel (E[X^2] - m^2 rounds otherwise:
//                                                                 the CNN's trajectories parted by 5e-5 in 30 steps)
//   Y = (X - m) / sqrt(v + epsilon) * scale + B
//   mean' = mean * momentum + m * (1 - momentum), var' likewise with v   -- the states the node updated
// The constants are Constant nodes (autodiff trains float initializers). Every rank holds the same number of
// samples (the data loader's rule), so the mean of the ranks' means is the global mean. autodiff differentiates it
// through AllReduceSum's rule (the gradient's sum over the ranks), which is SyncBatchNorm's backward. A node whose
// saved-statistics outputs (opsets < 14: 3, 4) are read is an error naming it. One rank: nothing changes.
#pragma once
#include "passes/pass.h"

namespace ot {

class SyncBatchNormPass : public Pass {
 public:
  explicit SyncBatchNormPass(int world) : world_(world) {}
  std::string name() const override { return "sync_batchnorm"; }
  bool Run(Graph& g) override;

 private:
  int world_;
};

}  // namespace ot
