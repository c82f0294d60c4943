// The IR: a Graph owns Values and Nodes. A Value is produced by at most one Node (or is a graph input or an
// initializer) and records its uses. Nodes keep the opset they were written against, so opset-dependent
// semantics (axes as attribute or input, opset-6 broadcast) are decided per node and a round trip through
// ONNX keeps the model as it was.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/attribute.h"
#include "graph/dtype.h"
#include "graph/shape.h"
#include "graph/tensor.h"

namespace ot {

// The domain of onnx-train's internal ops (ReduceToShape, ReluGrad, ...), each with a schema and CPU kernel.
inline constexpr const char* kInternalDomain = "ai.onnxtrain";

class Node;

struct Use {
  Node* node;
  int input_index;
};

class Value {
 public:
  std::string name;
  DataType dtype = DataType::kUndefined;
  Shape shape;
  Node* producer = nullptr;  // null for graph inputs, initializers and state
  int producer_output = -1;
  std::vector<Use> uses;
  std::shared_ptr<Tensor> initializer;  // constant data (weights, or model-level constants)
  bool is_initializer() const { return initializer != nullptr; }
};

class Node {
 public:
  std::string name;
  std::string op_type;
  std::string domain;  // "" for ai.onnx
  int opset = 0;       // the opset of `domain` the model imports
  std::string doc_string;
  std::map<std::string, Attribute> attrs;
  std::vector<Value*> inputs;   // nullptr for an omitted optional input
  std::vector<Value*> outputs;  // nullptr for an omitted optional output

  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  const Attribute* attr(const std::string& k) const;
  int64_t attr_int(const std::string& k, int64_t def) const;
  float attr_float(const std::string& k, float def) const;
  std::string attr_string(const std::string& k, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& k, const std::vector<int64_t>& def = {}) const;
  std::vector<float> attr_floats(const std::string& k, const std::vector<float>& def = {}) const;
  std::vector<std::string> attr_strings(const std::string& k, const std::vector<std::string>& def = {}) const;
  bool has_input(int i) const { return i < static_cast<int>(inputs.size()) && inputs[i] != nullptr; }
  bool has_output(int i) const { return i < static_cast<int>(outputs.size()) && outputs[i] != nullptr; }
  // "node 'conv1' (Conv, opset 13)" for messages.
  std::string Describe() const;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Model-level metadata kept for export.
  std::string name;
  int64_t ir_version = 8;
  std::string producer_name = "onnx-train";
  std::string producer_version;
  std::string doc_string;
  std::map<std::string, int> opset_imports;  // domain -> version ("" = ai.onnx)

  std::vector<Value*> inputs;   // graph inputs in order (may include values that also have initializers)
  std::vector<Value*> outputs;  // graph outputs in order

  // Training state: initializers that persist across steps (parameters, optimizer moments, step counter, loss
  // scale) and, for each, the value that replaces it after a step -- ONNX TrainingInfoProto's update_binding.
  struct UpdateBinding {
    Value* state;
    Value* next;
  };
  std::vector<UpdateBinding> update_bindings;

  // ModelProto.metadata_props, in file order (onnx-train records its step outputs as "onnx-train.loss" etc.).
  std::vector<std::pair<std::string, std::string>> metadata_props;
  // ONNX TrainingInfoProto entries, kept by import and written back by export (onnx_import/model_io.h).
  // `initialization` and `algorithm` are Graphs of their own (null when the proto has none). ONNX runs the
  // algorithm on this graph and it concatenated, so names a sub-graph uses without defining are this graph's:
  // they are values without producer in the sub-graph, and those naming this graph's initializers share their
  // Tensor (the same shared_ptr), so an update of one is seen by both. algorithm->update_bindings holds
  // update_binding, initialization->update_bindings initialization_binding (state: the initializer's value in that
  // sub-graph, next: the value bound to it).
  struct TrainingInfo {
    std::unique_ptr<Graph> initialization, algorithm;
  };
  std::vector<TrainingInfo> training_info;

  // Values and nodes. Pointers stay valid for the Graph's lifetime.
  Value* AddValue(const std::string& name);
  Value* FindValue(const std::string& name) const;
  Value* GetOrAddValue(const std::string& name);
  // A fresh name with the given prefix that no value has.
  std::string UniqueName(const std::string& prefix);
  Value* AddInitializer(const std::string& name, Tensor t);
  Node* AddNode(const std::string& op_type, const std::vector<Value*>& inputs, const std::vector<Value*>& outputs,
                const std::string& name = "");
  // Moves node n to just before `anchor` in the node list (the tie-break order of TopologicalOrder), so a node
  // that replaces others runs where the first of them would have.
  void MoveNodeBefore(Node* n, const Node* anchor);
  // Removes a node and its uses; its outputs stay as values without producer.
  void RemoveNode(Node* n);
  // Removes several nodes with one pass over the node list (RemoveNode is linear in the graph per call).
  void RemoveNodes(const std::vector<Node*>& ns);
  // Drops a node's uses of its inputs and its outputs' producer links, leaving it in the node list (for a pass
  // that rewrites many nodes and removes them all at the end with RemoveNodes).
  void DetachNode(Node* n);
  // Puts the node list in this order: `order` holds every node of the graph exactly once.
  void OrderNodes(const std::vector<const Node*>& order);
  void ReplaceAllUses(Value* from, Value* to);
  void SetInput(Node* n, int i, Value* v);

  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<std::unique_ptr<Value>>& values() const { return values_; }
  // Nodes in a topological order (stable: ties keep insertion order). Throws Error on a cycle.
  std::vector<Node*> TopologicalOrder() const;
  // Opset of a domain ("" = ai.onnx), 0 when not imported.
  int OpsetOf(const std::string& domain) const;
  // Graph inputs that are not initializers (what a caller must feed).
  std::vector<Value*> RealInputs() const;

 private:
  std::vector<std::unique_ptr<Value>> values_;
  std::map<std::string, Value*> by_name_;
  std::vector<std::unique_ptr<Node>> nodes_;
  int64_t unique_counter_ = 0;
};

}  // namespace ot
