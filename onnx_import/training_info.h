// Training models in ONNX's own form: a standard ModelProto whose main graph is the model for inference and whose
// TrainingInfoProto holds the training step (Graph::training_info).
//
//   AttachStepGraph: makes `model` (already in inference mode) carry `step` (the step graph of passes/step_graph:
//     forward + loss + backward + update, with update bindings) as training_info[0].algorithm. Every initializer of
//     the step (parameters, optimizer moments, step counter, lr, constants) becomes an initializer of the main
//     graph (shared, so the algorithm has none of its own); step values whose names the main graph already uses
//     (its forward, in training mode) are renamed with a "__step" suffix, because ONNX evaluates the algorithm on
//     the concatenation of both graphs; step inputs that are main-graph inputs are not declared again. The step's
//     loss, grad_norm and skipped outputs and its lr and step states are recorded in metadata_props (kLossKey...).
//   CombinedStepGraph: the reverse, for training such a model: main graph + algorithm concatenated into one Graph
//     whose initializers share their tensors with `model`'s, outputs = the algorithm's outputs, update_bindings =
//     the update_binding. A model without training_info, or whose algorithm is empty, is an error naming it.
#pragma once
#include <memory>
#include <string>

#include "graph/graph.h"

namespace ot {

inline constexpr const char* kLossKey = "onnx-train.loss";
inline constexpr const char* kGradNormKey = "onnx-train.grad_norm";
inline constexpr const char* kSkippedKey = "onnx-train.skipped";
inline constexpr const char* kLrKey = "onnx-train.lr";      // the learning-rate state (an initializer)
inline constexpr const char* kStepKey = "onnx-train.step";  // the optimizer-step counter state (an initializer)

struct StepOutputNames {
  std::string loss, grad_norm, skipped;  // outputs of the step, "" when absent
  std::string lr, step;                  // states of the step, "" when absent
};

// Returns the names the step outputs have in the algorithm graph (after renaming).
StepOutputNames AttachStepGraph(Graph& model, const Graph& step, const StepOutputNames& names);

// `names` gets the step outputs recorded in metadata_props ("" where the model has none).
std::unique_ptr<Graph> CombinedStepGraph(const Graph& model, StepOutputNames* names, const std::string& what);

// The value of metadata_props[key], or "".
std::string MetadataValue(const Graph& g, const std::string& key);

}  // namespace ot
