// ONNX ModelProto <-> Graph. Import keeps every node's opset, attributes, names, initializers and model
// metadata so that export writes the same model back. Errors name the file and the node or tensor concerned.
#pragma once
#include <memory>
#include <string>

#include "graph/graph.h"

namespace ot {

// The newest ONNX that onnx-train knows (ONNX 1.22: IR version 13, ai.onnx opset 27); a model that declares a newer
// one is refused, naming both.
constexpr int64_t kMaxIrVersion = 13;
constexpr int kMaxAiOnnxOpset = 27;

// Reads MODEL.onnx. External-data tensors are loaded from files inside the model's folder only (a location
// with "..", an absolute path or a symlink out of the folder is refused).
std::unique_ptr<Graph> LoadModel(const std::string& path);
// Parses a serialized ModelProto; `base_dir` resolves external data ("" = none allowed); `what` names the source
// in error messages.
std::unique_ptr<Graph> ParseModel(const std::string& bytes, const std::string& base_dir, const std::string& what);
// Writes the graph as a ModelProto (initializers inline).
std::string SerializeModel(const Graph& g);
void SaveModel(const Graph& g, const std::string& path);

}  // namespace ot
