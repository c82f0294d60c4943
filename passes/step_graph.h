// The training pipeline that turns a model into its step graph, in order:
//   training_mode (BN/Dropout in training mode, BN running statistics become state) -> sync_batchnorm (more than
//   one rank with --sync-batchnorm: BN on the global batch's statistics) -> pattern_fusion (fuse_gelu,
//   fuse_layer_norm, fuse_softmax_ce, fuse_matmul_bias) -> channels_last (CPU: a CNN's activations NHWC) -> loss ->
//   autodiff -> data_parallel (more than one rank: the gradients' mean over the ranks) -> optimizer -> amp ->
//   fp16_range (fp16 only) -> master_weights -> loss_scaling
//   -> half_grad_update (the update reads half gradients) -> fold_transpose (GEMMs read transposed operands through
//   their flags) -> fuse_bias_grad (a Linear's weight and bias gradients in one kernel).
// The result is one Graph holding forward, loss, backward and the update, with update bindings for every state
// (what ONNX's TrainingInfoProto holds); its outputs include the loss, "grad_norm" and "skipped".
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "passes/amp.h"
#include "passes/data_parallel.h"
#include "passes/fp16_range.h"
#include "passes/loss.h"
#include "passes/loss_scaling.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"

namespace ot {

struct StepOptions {
  LossOptions loss;
  std::string freeze;  // --freeze REGEX
  OptimizerOptions optimizer;
  // mpirun -np N: the gradient all-reduce (world > 1), --bucket-mb, --sync-batchnorm.
  DataParallelOptions data_parallel;
  AmpOptions amp;               // --amp[=fp16|bf16], --keep-fp32, --keep-fp32-node
  Fp16RangeOptions fp16_range;  // --fp16-infinity, --fp16-epsilon
  // --loss-scale...; mode kAuto: dynamic for fp16, none otherwise.
  LossScaleOptions loss_scale = [] {
    LossScaleOptions l;
    l.mode = LossScaleMode::kAuto;
    return l;
  }();
  // A CNN's activations channels-last (passes/channels_last.h): for steps that run on the CPU (the Trainer sets it
  // when it has no device; the GPU's kernels read NCHW).
  bool channels_last = false;
  // --disable-pass (OptionalPasses(); stage 2's names are taken and left to it), --dump-after, --verify-passes.
  PipelineControl control;
};

// The step pipeline's passes in order (every name --dump-after and --disable-pass know of stage 1).
std::vector<std::string> StepPassNames();
// pattern_fusion: fuse_gelu, fuse_layer_norm, (training: fuse_softmax_ce,) fuse_matmul_bias. `run` applies the same
// fusions to the forward graph it runs.
bool RunPatternFusion(Graph& g, bool training);

// The passes --disable-pass may name: rewrites the step is correct without (pattern_fusion, fp16_range,
// fold_transpose, fuse_bias_grad), stage 2's passes (passes/fusion_stage.h) and "fusion", the whole of stage 2
// (--fuse=off).
const std::vector<std::string>& OptionalPasses();
// Throws Error naming the flag for a name that is not a pass or names one the step cannot be built without.
void CheckDisabledPasses(const std::vector<std::string>& names);

struct StepGraphInfo {
  std::string loss;            // the scalar loss value
  std::vector<Value*> params;  // trained parameters
  Value* lr = nullptr;         // base learning rate (state, not updated by the step)
  Value* step = nullptr;       // optimizer steps taken (state)
  Value* grad_norm = nullptr;  // outputs of the update
  Value* skipped = nullptr;
  Value* seed = nullptr;                              // the loss gradient's seed (ones)
  AmpReport amp;                                      // what the amp pass did (empty without --amp)
  LossScaleMode loss_scaling = LossScaleMode::kNone;  // the mode in effect (never kAuto)
  Value* loss_scale = nullptr;                        // the scale state S (with loss scaling)
  Value* param_norm = nullptr;                        // outputs of the update: L2 norm of the parameters after it
  Value* zero_grad_fraction = nullptr;                // share of this step's gradient elements that are exactly zero
  std::vector<std::string> fp16_range_changes;
};

// Rewrites `g` (the model) into its step graph. Errors name the loss, op or node that stops training.
StepGraphInfo BuildStepGraph(Graph& g, const StepOptions& o);

}  // namespace ot
