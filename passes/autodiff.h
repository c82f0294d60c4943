// autodiff: reverse-mode differentiation of a scalar loss with respect to every trainable parameter.
//
// Rewrite: for each node on a path from a trainable parameter to the loss, in reverse topological order, the
// op's gradient rule (op registry) emits nodes computing its inputs' gradients from its outputs' gradients.
// A value used more than once gets the sum of its gradients (one Sum node). The backward starts from a constant
// 1 of the loss's dtype. Each parameter's gradient becomes a graph output named "<param>_grad" (the optimizer
// pass, later, consumes them instead).
// Trainable parameters: float initializers whose names do not match `freeze` (ECMAScript regex). Nodes that no
// path from a parameter reaches get no gradient; an op with no rule on a needed path is an error naming it.
#pragma once
#include <string>
#include <vector>

#include "passes/pass.h"

namespace ot {

struct AutodiffOptions {
  std::string loss;    // name of the scalar loss value
  std::string freeze;  // parameters whose names match are not trained
  // Float graph inputs differentiated as well, after the parameters (gradients "<input>_grad"): gradient checks of
  // graphs whose dims are symbolic, where the differentiated tensors must be fed.
  std::vector<std::string> inputs = {};
};

class AutodiffPass : public Pass {
 public:
  explicit AutodiffPass(AutodiffOptions o) : opts_(std::move(o)) {}
  std::string name() const override { return "autodiff"; }
  bool Run(Graph& g) override;
  // After Run: the trained parameters and their gradient values, in the same order.
  const std::vector<Value*>& params() const { return params_; }
  const std::vector<Value*>& grads() const { return grads_; }
  // The loss gradient's seed (an initializer of ones named "<loss>_grad_seed"): loss scaling multiplies it by S.
  Value* seed() const { return seed_; }

 private:
  AutodiffOptions opts_;
  std::vector<Value*> params_, grads_;
  Value* seed_ = nullptr;
};

}  // namespace ot
