// loss: chooses the training loss, or appends one.
//
// Rewrite: with `kind` empty, nothing changes: the loss is `output` (--loss-output) or the model's only scalar
// float output. With kind cross_entropy, appends SoftmaxCrossEntropyLoss(logits, labels, reduction=mean) where
// `labels` becomes a new int64 graph input shaped like the logits without their class axis (1); with kind mse,
// appends ReduceMean((logits - labels)^2) with float labels shaped like the logits. The appended loss is a
// graph output named "loss". Errors name the value that is missing or not a scalar.
#pragma once
#include <string>

#include "passes/pass.h"

namespace ot {

struct LossOptions {
  std::string output;  // --loss-output NAME
  std::string kind;    // "" | "cross_entropy" | "mse"
  std::string logits;  // --logits NAME
  std::string labels;  // --labels NAME
};

class LossPass : public Pass {
 public:
  explicit LossPass(LossOptions o) : opts_(std::move(o)) {}
  std::string name() const override { return "loss"; }
  bool Run(Graph& g) override;
  // After Run: the name of the scalar loss value.
  const std::string& loss_name() const { return loss_; }

 private:
  LossOptions opts_;
  std::string loss_;
};

}  // namespace ot
