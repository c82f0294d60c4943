// optimizer: appends the parameter update to a graph that autodiff has differentiated.
//
// Rewrite: one internal node ai.onnxtrain.OptimizerUpdate (graph/ops/internal_optim.cc) takes the learning rate,
// the step counter, every trained parameter, its gradient and its optimizer states, and produces the new
// parameters, the new states, the new step counter, the global gradient norm and a `skipped` flag. New state
// initializers: "optimizer.lr" (float64 scalar), "optimizer.step" (int64 scalar, 0), and per parameter P
// "P.momentum_buffer" (momentum, nesterov) or "P.exp_avg" and "P.exp_avg_sq" (adam, adamw, lamb), zero-filled.
// Graph::update_bindings gets {P, P'} for every parameter and {S, S'} for every state and the step counter (the
// learning rate keeps its value; a schedule binds it later). The gradients stop being graph outputs (autodiff
// made them outputs for lack of a consumer); "grad_norm" and "skipped" become graph outputs.
// With accumulate K > 1 there are two more states, "optimizer.micro_step" (int64) and "P.grad_accum" per
// parameter (the running gradient sums), bound like the others; the node's attribute accumulate = K.
// An LR schedule is attributes of the node (lr_schedule, warmup, total_steps): lr stays the base rate.
// Semantics are torch.optim's (LAMB: NVIDIA Apex FusedLAMB), including global-norm clipping
// (clip_grad_norm_), and a step whose gradients are not all finite changes nothing (step counter included).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "kernel_common/optim_math.h"  // OptimizerKind
#include "passes/pass.h"

namespace ot {

// "sgd" | "momentum" | "nesterov" | "adam" | "adamw" | "lamb"; throws Error naming the choices otherwise.
OptimizerKind ParseOptimizerKind(const std::string& s);
const char* OptimizerKindName(OptimizerKind k);
// "constant" | "linear" | "cosine" -> 0 | 1 | 2; throws Error naming the choices otherwise.
int ParseLrSchedule(const std::string& s);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdam;
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  // Unset: the default of the optimizer (torch.optim; LAMB: Apex FusedLAMB): eps 1e-8 (lamb 1e-6),
  // weight_decay 0 (adamw and lamb 0.01).
  std::optional<double> eps, weight_decay;
  double momentum = 0.9;      // momentum and nesterov
  double clip_grad_norm = 0;  // > 0: clip the global gradient norm to this (torch.nn.utils.clip_grad_norm_)
  int64_t accumulate = 1;     // --grad-accum K: the update applies the mean gradient of K micro-steps
  // Data-parallel ranks (mpirun -np N). With accumulate > 1 and N > 1 the update itself averages the accumulated
  // sums over the ranks, once per optimizer step, at the K-th micro-step (node attribute world = N); with
  // accumulate 1 the data_parallel pass averages the gradients before the update instead.
  int world = 1;
  // --shard-optimizer (ZeRO stage 1, graph/ops/optimizer_shard.h) over `world` ranks: each rank keeps and updates
  // its shard of the optimizer state, one 1-D float32 tensor per state ("optimizer.shard.exp_avg", ...), and
  // gathers the parameters after its update. shard_groups: data-parallel's buckets (parameter indices in packing
  // order); empty: one group of every parameter in order.
  bool shard = false;
  std::vector<std::vector<size_t>> shard_groups;
  // --lr-schedule constant|linear|cosine (0|1|2, kernel_common/optim_math.h LrScheduleFactor) over total_steps
  // optimizer steps with `warmup` warm-up steps; applied by the update kernel to lr from the step counter.
  int lr_schedule = 0;
  int64_t warmup = 0, total_steps = 0;
  double Eps() const;
  double WeightDecay() const;
};

// The learning rate of the update after `done` optimizer steps.
double ScheduledLr(const OptimizerOptions& o, int64_t done);

class OptimizerPass : public Pass {
 public:
  // params[i] is trained with gradient grads[i] (AutodiffPass::params()/grads()).
  OptimizerPass(OptimizerOptions o, std::vector<Value*> params, std::vector<Value*> grads)
      : opts_(std::move(o)), params_(std::move(params)), grads_(std::move(grads)) {}
  std::string name() const override { return "optimizer"; }
  bool Run(Graph& g) override;

  // After Run: the state values and the scalar outputs.
  Value* lr() const { return lr_; }
  Value* step() const { return step_; }
  Value* grad_norm() const { return grad_norm_; }
  Value* skipped() const { return skipped_; }
  Node* update_node() const { return node_; }

 private:
  OptimizerOptions opts_;
  std::vector<Value*> params_, grads_;
  Value* lr_ = nullptr;
  Value* step_ = nullptr;
  Value* grad_norm_ = nullptr;
  Value* skipped_ = nullptr;
  Node* node_ = nullptr;
};

}  // namespace ot
