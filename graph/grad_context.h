// What a gradient rule sees and uses: the forward node, its inputs and outputs, the gradients flowing into its
// outputs, and helpers that emit the backward nodes into the graph. A rule sets the gradient of each input that
// needs one (`needs_grad(i)`); the autodiff pass sums gradients of values used more than once.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace ot {

class GradContext {
 public:
  GradContext(Graph& g, const Node& node, std::vector<Value*> output_grads, std::vector<bool> needs)
      : g_(g), node_(node), dy_(std::move(output_grads)), needs_(std::move(needs)), dx_(node.inputs.size()) {}

  const Node& node() const { return node_; }
  Value* X(int i) const { return node_.inputs[i]; }
  Value* Y(int i) const { return node_.outputs[i]; }
  // Gradient flowing into output i; nullptr when none does (the output does not reach the loss).
  Value* dY(int i) const { return i < static_cast<int>(dy_.size()) ? dy_[i] : nullptr; }
  bool needs_grad(int i) const { return i < static_cast<int>(needs_.size()) && needs_[i]; }
  void SetGrad(int i, Value* g) { dx_[i] = g; }
  const std::vector<Value*>& input_grads() const { return dx_; }

  // Emits `op_type`(inputs) {attrs} with `num_outputs` outputs (domain "" or kInternalDomain); returns output 0.
  Value* Op(const std::string& op_type, const std::vector<Value*>& inputs,
            const std::map<std::string, Attribute>& attrs = {}, const std::string& domain = "");
  std::vector<Value*> OpN(const std::string& op_type, const std::vector<Value*>& inputs, int num_outputs,
                          const std::map<std::string, Attribute>& attrs = {}, const std::string& domain = "");
  // An int64 1-D constant.
  Value* Ints(const std::vector<int64_t>& v);
  // A scalar constant of `like`'s dtype.
  Value* Scalar(double v, const Value* like);
  // `grad` summed over the dims along which `like` was broadcast, then reshaped to `like`'s shape: undoes
  // numpy broadcasting in the backward of a broadcasting op. Identity when the shapes already match.
  Value* ReduceToShape(Value* grad, Value* like);
  // Errors name the forward node.
  [[noreturn]] void Fail(const std::string& msg) const;

 private:
  Graph& g_;
  const Node& node_;
  std::vector<Value*> dy_;
  std::vector<bool> needs_;
  std::vector<Value*> dx_;
};

}  // namespace ot
