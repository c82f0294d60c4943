#include "executor/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "graph/error.h"
#include "passes/autodiff.h"
#include "passes/pass_manager.h"

namespace ot {

namespace {
int OutputIndex(Graph& g, Value* v) {
  auto it = std::find(g.outputs.begin(), g.outputs.end(), v);
  if (it != g.outputs.end()) return static_cast<int>(it - g.outputs.begin());
  g.outputs.push_back(v);
  return static_cast<int>(g.outputs.size()) - 1;
}
}  // namespace

Trainer::Trainer(std::unique_ptr<Graph> model, TrainerOptions opts) : graph_(std::move(model)) {
  Graph& g = *graph_;
  LossPass loss(opts.loss);
  loss.Run(g);
  loss_name_ = loss.loss_name();
  AutodiffPass autodiff({loss_name_, opts.freeze});
  autodiff.Run(g);
  if (autodiff.params().empty()) throw Error("no trainable parameter reaches the loss '" + loss_name_ + "'");
  params_ = autodiff.params();
  OptimizerPass optimizer(opts.optimizer, autodiff.params(), autodiff.grads());
  optimizer.Run(g);
  lr_ = optimizer.lr();

  loss_out_ = OutputIndex(g, g.FindValue(loss_name_));
  grad_norm_out_ = OutputIndex(g, optimizer.grad_norm());
  skipped_out_ = OutputIndex(g, optimizer.skipped());
  for (const auto& b : g.update_bindings) state_outs_.push_back({b.state, OutputIndex(g, b.next)});
  ExecutorOptions eo;
  eo.seed = opts.seed;
  exec_ = std::make_unique<Executor>(g, eo);
}

Trainer::~Trainer() = default;

std::vector<std::string> Trainer::input_names() const {
  std::vector<std::string> r;
  for (const Value* v : graph_->RealInputs()) r.push_back(v->name);
  return r;
}

StepResult Trainer::Step(const std::map<std::string, Tensor>& batch) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> out = exec_->Run(batch);
  // The update kernel already left everything unchanged on a skipped step; write the next state in place.
  for (const auto& [state, idx] : state_outs_) {
    Tensor& s = *state->initializer;
    if (out[idx].nbytes() != s.nbytes()) throw Error("state '" + state->name + "' changed size");
    std::memcpy(s.raw(), out[idx].raw(), s.nbytes());
  }
  StepResult r;
  r.loss = out[loss_out_].GetDouble(0);
  r.grad_norm = out[grad_norm_out_].GetDouble(0);
  r.skipped = out[skipped_out_].GetDouble(0) != 0;
  r.lr = lr_ && lr_->initializer ? lr_->initializer->GetDouble(0) : 0;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::map<std::string, Tensor> Trainer::Parameters() const {
  std::map<std::string, Tensor> r;
  for (const Value* p : params_) r[p->name] = p->initializer->Clone();
  return r;
}

}  // namespace ot
