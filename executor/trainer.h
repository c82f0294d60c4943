// The Trainer: turns a model into a step graph (loss pass -> autodiff -> optimizer) and runs steps on batches,
// writing each step's new state (parameters, optimizer moments, step counter) back in place.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/graph.h"
#include "passes/loss.h"
#include "passes/optimizer.h"

namespace ot {

struct TrainerOptions {
  LossOptions loss;
  std::string freeze;  // --freeze REGEX
  OptimizerOptions optimizer;
  uint64_t seed = 0;
};

struct StepResult {
  double loss = 0;
  double grad_norm = 0;
  bool skipped = false;
  double lr = 0;
  double ms = 0;
};

class Trainer {
 public:
  // Takes the model; builds the step graph. Errors name the loss, op or node that stops training.
  Trainer(std::unique_ptr<Graph> model, TrainerOptions opts);
  ~Trainer();
  // One optimizer step on a batch (arrays named after the step graph's inputs: the model's and the labels).
  StepResult Step(const std::map<std::string, Tensor>& batch);
  const Graph& step_graph() const { return *graph_; }
  // The inputs a batch must provide (model inputs and labels).
  std::vector<std::string> input_names() const;
  // Current values of the trained parameters, by name.
  std::map<std::string, Tensor> Parameters() const;
  const std::string& loss_name() const { return loss_name_; }

 private:
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Executor> exec_;
  std::string loss_name_;
  int loss_out_ = -1, grad_norm_out_ = -1, skipped_out_ = -1;
  std::vector<std::pair<Value*, int>> state_outs_;  // state value, index of its next value among the outputs
  std::vector<Value*> params_;
  Value* lr_ = nullptr;
};

}  // namespace ot
