// The pass pipeline as the tools ask for it (docs/ARCHITECTURE.md): stage 1 builds the training step
// (passes/step_graph.h), stage 2 fuses a graph for the shapes it will run (training/fusion.h over
// passes/fusion_stage.h). `train` gets both from the Trainer; `passes` and `plan` build a step here without running
// it; `run` and `check` prepare a forward graph here. tools/ includes no passes/ header.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "passes/step_graph.h"
#include "training/fusion.h"

namespace ot {

// Every pass name of both stages in order (--dump-after), then "fusion" (the end of stage 2).
std::vector<std::string> PipelinePassNames();

// Stage 1 on `g` (the model becomes its step graph). Errors name the loss, op or node that stops training.
StepGraphInfo BuildStep(Graph& g, const StepOptions& o);
// The model in inference mode (BatchNormalization on running statistics, Dropout off): what `passes -o` saves.
void ToInferenceMode(Graph& g);

// A forward graph as `run` and `check` run it (no training step): every ai.onnx.preview.training Gradient node
// expanded into the backward in standard ops. Before the feeds are read.
void ExpandTrainingOps(Graph& g);

struct ForwardOptions {
  bool pattern_fusion = true;  // stage 1's pattern fusions for inference (fuse_gelu, fuse_layer_norm, ...)
  FuseOptions fuse;            // stage 2 for the feeds' shapes (mode kOff: none)
  PipelineControl passes;      // --disable-pass (pattern_fusion, fusion, stage 2's names)
};
// The forward's rewrites, sized for `feeds` (every real input's array); returns stage 2's report.
FusionReport PrepareForward(Graph& g, const ForwardOptions& o, const std::map<std::string, Tensor>& feeds);

}  // namespace ot
