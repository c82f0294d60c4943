// loss: chooses the training loss, or appends one.
//
// Rewrite: with `kind` empty, nothing changes: the loss is `output` (--loss-output) or the model's only scalar
// float output. With kind cross_entropy, appends SoftmaxCrossEntropyLoss(logits, labels, reduction=mean) where
// `labels` becomes a new int64 graph input shaped like the logits without their class axis (1); with kind mse,
// appends ReduceMean((logits - labels)^2) with float labels shaped like the logits; with kind ctc, appends
// ai.onnxtrain.CTCLoss(logits, labels, logit_lengths, label_lengths) (graph/ops/ctc.cc) on logits [frames, batch,
// classes] (layout btc: [batch, frames, classes]) with three new int64 inputs: labels [batch, width] and the two
// lengths [batch]. The appended loss is a graph output named "loss". Errors name the value that is missing or not a
// scalar.
#pragma once
#include <cstdint>
#include <string>

#include "passes/pass.h"

namespace ot {

struct LossOptions {
  std::string output;  // --loss-output NAME
  std::string kind;    // "" | "cross_entropy" | "mse" | "ctc"
  std::string logits;  // --logits NAME
  std::string labels;  // --labels NAME
  // kind ctc: the names of the two length inputs (--logit-lengths, --label-lengths) and CTCLoss's attributes.
  std::string logit_lengths{}, label_lengths{};
  int64_t blank = 0;                   // --blank
  std::string ctc_reduction = "mean";  // --ctc-reduction mean|sum
  bool zero_infinity = false;          // --ctc-zero-infinity
  std::string logits_layout = "tbc";   // --logits-layout tbc|btc
};

class LossPass : public Pass {
 public:
  explicit LossPass(LossOptions o) : opts_(std::move(o)) {}
  std::string name() const override { return "loss"; }
  bool Run(Graph& g) override;
  // After Run: the name of the scalar loss value.
  const std::string& loss_name() const { return loss_; }

 private:
  void AppendCtc(Graph& g, Value* logits, Value* labels, Value* loss) const;
  LossOptions opts_;
  std::string loss_;
};

}  // namespace ot
