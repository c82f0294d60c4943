// loss_scaling: the loss gradient is scaled by S so that small fp16 gradients do not flush to zero; the update
// kernel unscales by 1/S, checks that every gradient is finite in the same pass, skips the step and (dynamic)
// backs S off when one is not.
//
// Input: a step graph (after the amp and master-weights passes) and the loss gradient seed that autodiff made
// (the initializer "<loss>_grad_seed" = 1, passed to the constructor; BuildStepGraph knows it).
// Rewrite (mode static or dynamic):
//   - new state initializers "loss_scale" (float32 scalar = init), "loss_scale.good_steps" and
//     "loss_scale.bad_steps" (int64 scalars = 0), fresh names when taken;
//   - every use of the seed now reads Mul(seed, loss_scale) (a visible node "loss_scaling/Mul"; a seed of another
//     float dtype multiplies by Cast(loss_scale) to it);
//   - OptimizerUpdate gets loss_scaling = mode and the knobs (growth_factor, backoff_factor, growth_interval,
//     overflows_to_backoff, min_scale), the three states as inputs and S', good', bad' as outputs
//     (graph/ops/optimizer_layout.h), with update bindings {state, state'} (the scale a step used is the state
//     before it; the Trainer logs it from there).
// Mode none (the default; and bf16/fp32 runs unless asked) changes nothing and returns false; so does a node
// that already scales. Static: S never changes, steps with non-finite gradients are still skipped.
// Dynamic defaults are PyTorch GradScaler's / Apex's: 2^16, x2 after 2000 finite steps, x0.5 on overflow, floor 1;
// `overflows` > 1 halves only after that many overflows (TF's ExponentialUpdateLossScaleManager).
//
// EnableOptimizerStats adds the monitoring outputs of the update node: param_norm and zero_grad_fraction (graph
// outputs of those names; zero_grad_fraction shows fp16 gradients flushed to zero by underflow).
#pragma once
#include <cstdint>
#include <string>

#include "graph/dtype.h"
#include "passes/pass.h"

namespace ot {

// --loss-scale: kAuto is dynamic for fp16 and none otherwise (ResolveLossScale; the step pipeline resolves it).
enum class LossScaleMode { kAuto, kNone, kStatic, kDynamic };
// "auto", "none", "static", "dynamic": the OptimizerUpdate attribute's spelling and the log's.
const char* LossScaleModeName(LossScaleMode m);
LossScaleMode ResolveLossScale(LossScaleMode m, DataType half);

struct LossScaleOptions {
  LossScaleMode mode = LossScaleMode::kNone;
  double init = 65536;   // the initial scale (static: the fixed scale)
  double factor = 2;     // growth factor after growth_interval finite steps
  double backoff = 0.5;  // factor on overflow
  int64_t growth_interval = 2000;
  int64_t overflows = 1;  // overflows before backing off
  double min_scale = 1;
};

class LossScalingPass : public Pass {
 public:
  // `seed`: the loss gradient seed of autodiff (may be null only when o.mode is kNone). o.mode is not kAuto.
  LossScalingPass(LossScaleOptions o, Value* seed) : opts_(std::move(o)), seed_(seed) {}
  std::string name() const override { return "loss_scaling"; }
  bool Run(Graph& g) override;

  // After a Run that changed the graph: the scale state and its next value.
  Value* scale() const { return scale_; }
  Value* scale_next() const { return scale_next_; }

 private:
  LossScaleOptions opts_;
  Value* seed_;
  Value* scale_ = nullptr;
  Value* scale_next_ = nullptr;
};

// Sets stats = 1 on the graph's OptimizerUpdate node and appends its outputs param_norm and zero_grad_fraction
// as graph outputs named so (fresh names when taken). Returns false when there is no such node or stats are on.
bool EnableOptimizerStats(Graph& g);

}  // namespace ot
