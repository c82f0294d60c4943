// fuse_softmax_ce (pattern fusion, before the loss pass): log-softmax followed by the negative log-likelihood ->
// one SoftmaxCrossEntropyLoss node.
//
// Rewrite (scores any float value of known rank r >= 2; target, weight, reduction and ignore_index as given):
//   lp = LogSoftmax(scores, axis)            | lp = Log(Softmax(scores, axis))
//   loss = NegativeLogLikelihoodLoss(lp, target[, weight]) {reduction, ignore_index}
//   -> loss = SoftmaxCrossEntropyLoss(scores, target[, weight]) {reduction, ignore_index}
// Conditions:
//   - the (Log)Softmax runs along the class axis, the only axis SoftmaxCrossEntropyLoss uses (axis 1 of
//     [N, C, d1...]): from opset 13 its axis normalizes to 1; before 13 ONNX coerces the input to 2-D at `axis`
//     (the softmax runs over the flattened dims [axis, r)), which is the class axis only when r == 2 and axis is
//     1 or -1 (the default 1 included);
//   - lp has no other consumer than the NLL node and is no training state; Softmax's output feeds only the Log.
//     When lp is also a graph output, the fused node's second output log_prob (LogSoftmax along axis 1) becomes
//     that value; another node reading lp stops the rewrite (its backward would add a second SoftmaxGrad);
//   - scores, lp, the loss and the weight share one float dtype.
// The loss (and lp when kept) keep their Values; the new node is named after the NLL node's scope.
// Why: the pair saves the [N, C] log-probabilities for the backward and runs LogSoftmax's SoftmaxGrad on top of the
// NLL's one-hot gradient; the fused loss's backward is the one LossGrad (softmax(x) - onehot) * w * g, which also
// stays finite where Log(Softmax) underflows to log(0) = -inf.
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss both exist from opset 12, so the fused node keeps the NLL
// node's opset.
#pragma once
#include "passes/pass.h"

namespace ot {

class FuseSoftmaxCrossEntropyPass : public Pass {
 public:
  std::string name() const override { return "fuse_softmax_ce"; }
  bool Run(Graph& g) override;
  int fused() const { return fused_; }  // after Run: how many SoftmaxCrossEntropyLoss nodes it made

 private:
  int fused_ = 0;
};

}  // namespace ot
