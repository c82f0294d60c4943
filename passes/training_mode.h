// training_mode: puts BatchNormalization and Dropout into training mode (for the step graph) or inference mode
// (for evaluation and the saved model), whatever mode the model was exported in.
//
// Rewrite, training = true:
//   BatchNormalization (opset >= 14): training_mode = 1; opsets 7-13: training is having the running-statistics
//   outputs; opset < 7: is_test = 0. The running mean/var outputs (1, 2) are added where missing, and when the
//   mean/var inputs are initializers they become training state: Graph::update_bindings gets {mean, mean'} and
//   {var, var'} (ONNX semantics: running = running * momentum + batch * (1 - momentum), biased batch variance).
//   Dropout (opset >= 12): training_mode input = true; opset <= 6: is_test = 0. (Opsets 7-11 have no training
//   mode in ONNX: left as they are, an identity.) A training-mode Dropout whose ratio is a constant 0 and whose mask
//   nobody reads becomes an Identity (it passes X through: models exported with dropout switched off).
// Rewrite, training = false:
//   BatchNormalization: training_mode = 0 (is_test = 1), the running-statistics and saved outputs dropped (and
//   removed from the graph outputs; one still consumed by another node is an error naming it): BN normalizes with
//   its running statistics. Dropout: training_mode = false (is_test = 1): an identity.
// The seeds of Dropout nodes are left alone (the executor keys draws on the seed, the node and its run counter).
#pragma once
#include <vector>

#include "passes/pass.h"

namespace ot {

class TrainingModePass : public Pass {
 public:
  explicit TrainingModePass(bool training) : training_(training) {}
  std::string name() const override { return training_ ? "training_mode" : "inference_mode"; }
  bool Run(Graph& g) override;

 private:
  bool training_;
};

}  // namespace ot
