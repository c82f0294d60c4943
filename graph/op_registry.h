// The op registry: one entry per op with everything the rest of the system asks about it.
// Type/shape inference lives here; the gradient rule, AMP class and fusible kind are filled by later passes'
// issues. No pass or executor switches on op-type strings of its own: they ask this table.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace ot {

struct TypeShape {
  DataType dtype = DataType::kUndefined;
  Shape shape;
  bool present = false;  // false for an omitted optional input/output
};

// Data propagation (ONNX's name for it): the elements of a small int64 value of rank 0 or 1 that holds sizes, as
// dims -- static, or symbolic when they come from a Shape of a symbolic dim. Exporters compute Reshape targets as
// Shape -> Gather -> Unsqueeze -> Concat chains; following them keeps `batch` named through the Reshape instead of
// leaving "?" (so gradients of equal named shapes need no ReduceToShape, and the fusion pass sees equal shapes).
//
// One element: a known integer (any sign: a Reshape target's -1, a negative index) or a size that is a symbolic
// (named) or unknown dim.
struct DimOrInt {
  bool known = false;
  int64_t value = 0;  // when known
  Dim dim;            // when not known: Dim::Symbol("batch") or Dim() (unknown)
  static DimOrInt Int(int64_t v) { return {true, v, Dim()}; }
  static DimOrInt Size(const Dim& d) { return d.is_static() ? Int(d.value) : DimOrInt{false, 0, d}; }
  // As a size: static when known and >= 0, else the symbolic or unknown dim.
  Dim AsDim() const { return known ? (value >= 0 ? Dim(value) : Dim()) : dim; }
};
using DimsValue = std::vector<DimOrInt>;
// An op's rule: output 0's elements from the node and its inputs' elements (`input(i)`: nullopt when unknown);
// nullopt when they cannot be followed.
using DimsValueOfInput = std::function<std::optional<DimsValue>(int)>;
using DimsValueFn = std::function<std::optional<DimsValue>(const Node&, const DimsValueOfInput&)>;
// The elements of `v` as dims: from its value (initializer, Constant node; int64/int32 of rank <= 1) or its
// producer's data-propagation rule, recursively; nullopt when unknown.
std::optional<DimsValue> DimsValueOf(const Value* v);

// What an inference function sees of one node: its attributes (through `node`), its inputs' types, shapes and
// (where known) values, and the outputs it must set. Used both on graphs with symbolic dims and by the
// executor with concrete shapes and the values it folded at plan time.
class InferContext {
 public:
  InferContext(const Node& node, std::vector<TypeShape> inputs, std::vector<const Tensor*> values, int num_outputs);
  const Node& node;

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i].present; }
  DataType input_type(int i) const;
  const Shape& input_shape(int i) const;
  // The input's value when known (initializer, Constant, folded at plan time); nullptr otherwise.
  const Tensor* input_value(int i) const { return i < static_cast<int>(values_.size()) ? values_[i] : nullptr; }
  // The input's elements as dims (a shape computed from shapes): static from its value when known, else followed
  // through the graph (DimsValueOf); nullopt when unknown.
  std::optional<DimsValue> input_dims_value(int i) const;
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  bool has_output(int i) const { return i < num_outputs() && node.has_output(i); }
  int opset() const { return node.opset; }

  void set_output(int i, DataType t, Shape s);
  const std::vector<TypeShape>& outputs() const { return outputs_; }
  // A fresh unknown dim (for data-dependent sizes whose value is not known).
  Dim UnknownDim() const { return Dim(); }

  // Throws Error("<node description>: msg").
  [[noreturn]] void Fail(const std::string& msg) const;
  // Throws UnsupportedError("<node description>: msg").
  [[noreturn]] void Unsupported(const std::string& msg) const;
  // Requires input i to be present; returns its shape.
  const Shape& Require(int i) const;
  // Requires between lo and hi inputs (trailing absent ones not counted) and at most hi outputs: "takes 1 input,
  // got 3".
  void RequireArity(int lo, int hi, int max_outputs) const;

 private:
  std::vector<TypeShape> inputs_;
  std::vector<const Tensor*> values_;
  std::vector<TypeShape> outputs_;
};

using InferFn = std::function<void(InferContext&)>;

class GradContext;
// A gradient rule: given the gradients of a node's outputs, emit nodes computing its inputs' gradients.
using GradFn = std::function<void(GradContext&)>;

// Mixed-precision class (TF AutoMixedPrecision lists / PyTorch autocast), set by graph/ops/amp_table.cc:
//   allow  runs in half (GEMM, convolution and their gradients): where the speed comes from;
//   infer  runs in half inside half regions (its arithmetic stays fp32 inside), in fp32 elsewhere;
//   deny   runs in fp32 always (Exp, Log, Pow, reductions, losses, the optimizer);
//   clear  moves data without arithmetic (reshape, transpose, gather): any precision, it follows its neighbours;
//   unset  (ops of fixed output type: Cast, ConstantOfShape, random and quantized ops) stays as exported and is
//          neither a path for deny nor for allow.
enum class AmpClass { kUnset, kAllow, kInfer, kDeny, kClear };
// How cluster fusion may treat the op (graph/ops/fuse_table.cc): elementwise ops (with broadcasting, Casts,
// Where) and row reductions join clusters; opaque ops never do.
enum class FusibleKind { kOpaque, kElementwise, kReduction };

// What a fusible op's lowering sees while a cluster program (kernel_common/cluster_program.h) is built: the
// registers of the node's inputs, instructions to append, the registers of its outputs. The builder
// (passes/cluster_program_builder.h) knows the concrete shapes: it decides row vs full and checks reductions.
class ClusterBuilder {
 public:
  virtual ~ClusterBuilder() = default;
  // The register holding input i (throws NotFusible when absent or of an unsupported type).
  virtual int In(int i) = 0;
  // Appends an instruction whose value has storage type `t` (cluster::DType as int: kF32 for intermediates that
  // the unfused kernel keeps in float, OutType(k) for a value the node stores).
  virtual int Emit(int op, int t, int a = -1, int b = -1, int c = -1, float imm = 0.f) = 0;
  virtual int Const(float v) = 0;
  // A row reduction of register a over `axes` of the node's input 0 (normalized, sorted): the builder checks that
  // they are the domain's trailing axes and that keepdims matches the output shape. Its value has storage type `t`
  // (-1: OutType(0), the type of a Reduce* node's output; kF32 for a row statistic kept in float, as softmax's).
  virtual int Reduce(int op, int a, const std::vector<int64_t>& axes, int t = -1) = 0;
  // Storage type (cluster::DType as int) of output i of the node.
  virtual int OutType(int i) const = 0;
  // Input i's value when it is known when the cluster is built (an initializer, a folded constant), else null.
  virtual const Tensor* ConstInput(int i) const = 0;
  virtual void Out(int i, int reg) = 0;
};
// Lowers one node; returns "" or why this node cannot join a cluster (an attribute value, a dtype...).
using ClusterLowerFn = std::function<std::string(const Node&, ClusterBuilder&)>;

struct OpSchema {
  std::string op_type;
  std::string domain;  // "" = ai.onnx
  int min_opset = 1;   // earliest opset version whose semantics the entry implements
  InferFn infer;
  // Inputs whose *values* determine output shapes (Reshape's shape, Slice's starts...). The executor must know
  // them when it makes a plan; it folds their producers or asks the caller for them.
  std::vector<int> value_inputs;
  // False for ops that read only their inputs' shapes (Shape, Size): they fold whenever shapes are known.
  bool reads_input_data = true;
  AmpClass amp = AmpClass::kUnset;
  // When the op runs in half: float inputs/outputs that stay float32 (BatchNormalization's scale, bias and
  // statistics; LayerNormalization's saved mean and inverse std). Every other float32 input/output becomes half.
  std::vector<int> amp_fp32_inputs, amp_fp32_outputs;
  // A loss (deny): an infer op whose only consumers are losses stays fp32 (the softmax that feeds a loss).
  bool amp_loss = false;
  // Computes in fp32 inside whatever its storage type (norms): its epsilon attribute need not be raised in fp16.
  bool amp_fp32_inside = false;
  FusibleKind fusible = FusibleKind::kOpaque;
  ClusterLowerFn lower;  // set for fusible ops
  // Data propagation (graph/ops/dims_value_table.cc): set for the ops that move or compute sizes.
  DimsValueFn dims_value;
  // One pass over its inputs, no GEMM (fusible ops, norms, softmax, data movement): rematerialization under a memory
  // budget (passes/rematerialize.h) may run it a second time rather than keep its result.
  bool recompute_cheap = false;
  // Outputs after the first may be omitted (LayerNormalization's Mean and InvStdDev): a copy of the node that
  // computes output 0 alone is valid, so rematerialization may recompute that output of a multi-output node.
  bool trailing_outputs_optional = false;
  // Reverse-mode rule (graph/grad/*.cc); empty for ops with no gradient yet. Inputs listed in
  // `non_differentiable` (indices, shapes, masks) never receive a gradient.
  GradFn grad;
  std::vector<int> non_differentiable;
};

class OpRegistry {
 public:
  // The registry with every op of onnx-train registered.
  static const OpRegistry& Global();
  void Register(OpSchema schema);
  // Attaches a gradient rule to a registered op (throws when the op is not registered).
  void SetGrad(const std::string& domain, const std::string& op_type, GradFn fn, std::vector<int> non_diff = {});
  // The entry for (domain, op) or nullptr. "ai.onnx" and "" are the same domain.
  const OpSchema* Find(const std::string& domain, const std::string& op_type) const;
  std::vector<const OpSchema*> All() const;
  // Sets an op's mixed-precision facts (graph/ops/amp_table.cc); throws when the op is not registered.
  void SetAmp(const std::string& domain, const std::string& op_type, AmpClass c, std::vector<int> fp32_inputs = {},
              std::vector<int> fp32_outputs = {}, bool loss = false, bool fp32_inside = false);
  // Sets an op's fusion facts (graph/ops/fuse_table.cc); throws when the op is not registered.
  void SetFusion(const std::string& domain, const std::string& op_type, FusibleKind kind, ClusterLowerFn lower);
  // Sets an op's data-propagation rule (graph/ops/dims_value_table.cc); throws when the op is not registered.
  void SetDimsValue(const std::string& domain, const std::string& op_type, DimsValueFn fn);
  void SetRecomputeCheap(const std::string& domain, const std::string& op_type, bool trailing_outputs_optional = false);

 private:
  std::map<std::pair<std::string, std::string>, OpSchema> ops_;
};

// Why a node cannot run here ("" when supported as far as the registry knows): unknown op, domain, or an
// opset older than the registry's entry implements.
std::string UnsupportedReason(const OpRegistry& reg, const Node& n);
// Every node of `g` that cannot run here, one line each in graph order: "node 'N': op X (domain, opset V) is not
// supported" (with the first supported opset where only the version is too old). Empty when all are supported.
std::vector<std::string> UnsupportedNodes(const Graph& g);
// Throws UnsupportedError with those lines, each prefixed with `where` (the model's file), when there are any: a
// model is checked before anything else reads it, so the unsupported op is what the user is told.
void RequireSupportedOps(const Graph& g, const std::string& where);

// Runs the registry's inference over the graph in topological order, filling every node output's dtype and
// shape. Initializer and Constant values are known values. Nodes whose op is not registered get unknown
// outputs (when `strict` is false) or raise UnsupportedError (when true).
void InferShapes(Graph& g, bool strict = false);
// The same for one node whose inputs already have their types and shapes (strict).
void InferNode(Node& n);

}  // namespace ot
