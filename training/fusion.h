// Stage 2 of the pipeline, fusion of a step for the shapes it will run (passes/fusion_stage.h), answered by the
// executor: each time the passes ask for the step's facts, a plan is compiled for those shapes -- its buffers give
// every value's dims and storage, its kernels the order, workspaces and in-place pairs the sizing prices. The
// passes rewrite the graph in place. The clusters work for any later shape; only the sizing decisions were made
// for these.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "executor/kernel_registry.h"
#include "graph/graph.h"
#include "passes/fusion_stage.h"

namespace ot {

class Plan;

// What the sizing needs to know of `g`, from a plan compiled from it.
FusionSizes SizesFromPlan(const Graph& g, const Plan& plan);

// Runs stage 2 on `g` for `inputs` (dtype and dims of every fed input; `known`: values of the inputs that decide
// shapes) and returns the report. Nothing runs. `control`: --disable-pass, --dump-after, --verify-passes.
FusionReport FuseForShapes(Graph& g, const FuseOptions& opts, const std::map<std::string, TensorDesc>& inputs,
                           const std::map<std::string, const Tensor*>& known, const PipelineControl& control = {});

// The default --memory-budget: the machine's physical memory (the CUDA backend will use the device's free memory).
int64_t DefaultMemoryBudget();

// Parses a size: "512M", "2G", "1.5GB", "123456" (bytes), "300MiB"... Throws Error naming the text.
int64_t ParseByteSize(const std::string& s);

}  // namespace ot
