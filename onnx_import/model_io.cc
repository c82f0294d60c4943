// ModelProto <-> Graph. The import parses the protobuf itself (no onnx checker or shape inference: they reject
// opsets newer than the library) and validates what a hostile file could abuse: tensor sizes against the bytes
// present, external-data paths, names defined twice or never.
#include "onnx_import/model_io.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"
#include "onnx_import/file_util.h"
#include "onnx_import/proto_tensor.h"

namespace ot {

using onnx_detail::DataTypeFromOnnx;
using onnx_detail::TensorFromProto;
using onnx_detail::TensorToProto;

namespace {

std::string NormalizeDomain(const std::string& d) { return d == "ai.onnx" ? "" : d; }

const char* TypeCaseName(onnx::TypeProto::ValueCase c) {
  switch (c) {
    case onnx::TypeProto::kSequenceType:
      return "sequence";
    case onnx::TypeProto::kMapType:
      return "map";
    case onnx::TypeProto::kOptionalType:
      return "optional";
    case onnx::TypeProto::kSparseTensorType:
      return "sparse tensor";
    case onnx::TypeProto::kOpaqueType:
      return "opaque";
    default:
      return "unknown";
  }
}

class Importer {
 public:
  Importer(const std::string& base_dir, const std::string& what, Graph& g) : base_dir_(base_dir), what_(what), g_(g) {}

  // Takes the model mutable so each initializer's bytes are freed once converted (peak memory ~1x the weights).
  void Run(onnx::ModelProto& m) {
    if (!m.has_graph()) throw Error(what_ + ": model has no graph");
    g_.ir_version = m.ir_version();
    g_.producer_name = m.producer_name();
    g_.producer_version = m.producer_version();
    g_.doc_string = m.doc_string();
    g_.metadata_props.clear();
    for (const auto& kv : m.metadata_props()) g_.metadata_props.emplace_back(kv.key(), kv.value());
    g_.opset_imports.clear();
    for (const auto& op : m.opset_import()) {
      std::string d = NormalizeDomain(op.domain());
      if (op.version() < 0 || op.version() > INT_MAX)
        throw Error(what_ + ": opset import for domain '" + op.domain() + "' has invalid version " +
                    std::to_string(op.version()));
      int v = static_cast<int>(op.version());
      auto it = g_.opset_imports.find(d);
      if (it != g_.opset_imports.end() && it->second != v)
        throw Error(what_ + ": domain '" + op.domain() + "' is imported twice with different versions");
      g_.opset_imports[d] = v;
    }
    // Newer than what onnx-train knows: an op may mean something else there.
    if (m.ir_version() > kMaxIrVersion)
      throw Error(what_ + ": IR version " + std::to_string(m.ir_version()) + " is newer than onnx-train knows (up to " +
                  std::to_string(kMaxIrVersion) + ")");
    if (auto it = g_.opset_imports.find(""); it != g_.opset_imports.end() && it->second > kMaxAiOnnxOpset)
      throw Error(what_ + ": ai.onnx opset " + std::to_string(it->second) + " is newer than onnx-train knows (up to " +
                  std::to_string(kMaxAiOnnxOpset) + ")");
    onnx::GraphProto& gp = *m.mutable_graph();
    g_.name = gp.name();
    ReadGraph(gp);
    for (const auto& n : g_.nodes())
      if (!g_.opset_imports.count(n->domain))
        throw Error(what_ + ": " + n->Describe() + " is of domain " + (n->domain.empty() ? "ai.onnx" : n->domain) +
                    ", which the model does not import (no opset_import entry)");
    g_.TopologicalOrder();  // throws on a cycle (a node that needs its own output)
  }

  // Reads a TrainingInfoProto graph (initialization or algorithm). Names it uses without defining are resolved
  // in `outers` (the main graph, then the algorithm): see Graph::training_info.
  void RunSubgraph(onnx::GraphProto& gp, const Graph& main, std::vector<const Graph*> outers) {
    outers_ = std::move(outers);
    g_.ir_version = main.ir_version;
    g_.opset_imports = main.opset_imports;
    g_.name = gp.name();
    ReadGraph(gp);
    g_.TopologicalOrder();
  }

 private:
  // The graph's initializers, inputs, nodes, outputs and value_info, in that order.
  void ReadGraph(onnx::GraphProto& gp) {
    if (gp.sparse_initializer_size() > 0)
      throw UnsupportedError(what_ + ": sparse initializers are not supported ('" +
                             gp.sparse_initializer(0).values().name() + "')");
    ReadInitializers(gp);
    ReadInputs(gp);
    ReadNodes(gp);
    ReadOutputs(gp);
    ReadValueInfo(gp);
  }

  // A name defined by an enclosing graph: its value here gets the outer value's type and, for an initializer, its
  // tensor (shared). False when no enclosing graph defines it.
  bool ResolveOuter(const std::string& name) {
    for (const Graph* o : outers_) {
      const Value* ov = o->FindValue(name);
      if (!ov) continue;
      Value* v = g_.GetOrAddValue(name);
      v->dtype = ov->dtype;
      v->shape = ov->shape;
      v->initializer = ov->initializer;
      defined_[name] = "the enclosing graph";
      return true;
    }
    return false;
  }

  void ReadInitializers(onnx::GraphProto& gp) {
    for (auto& tp : *gp.mutable_initializer()) {
      if (tp.name().empty()) throw Error(what_ + ": an initializer has no name");
      if (defined_.count(tp.name())) throw Error(what_ + ": initializer '" + tp.name() + "' is defined twice");
      Tensor t = TensorFromProto(tp, base_dir_, what_, "tensor '" + tp.name() + "'");
      std::string().swap(*tp.mutable_raw_data());  // release the bytes now held by the Tensor
      g_.AddInitializer(tp.name(), std::move(t));
      defined_[tp.name()] = "an initializer";
    }
  }

  // Reads a value's declared type. Non-tensor types throw UnsupportedError when `strict`, else are ignored.
  // Returns false when the type was ignored.
  bool ReadType(const onnx::TypeProto& tp, const std::string& context, bool strict, DataType* dt, Shape* shape) {
    *dt = DataType::kUndefined;
    *shape = Shape();
    if (tp.value_case() == onnx::TypeProto::VALUE_NOT_SET) return true;
    if (tp.value_case() != onnx::TypeProto::kTensorType) {
      if (strict)
        throw UnsupportedError(context + " has a non-tensor type (" + std::string(TypeCaseName(tp.value_case())) +
                               "), which is not supported");
      return false;
    }
    const auto& tt = tp.tensor_type();
    if (tt.elem_type() != 0) {
      if (strict) {
        *dt = DataTypeFromOnnx(tt.elem_type(), context);
      } else {
        try {
          *dt = DataTypeFromOnnx(tt.elem_type(), context);
        } catch (const Error&) {
          return false;
        }
      }
    }
    if (tt.has_shape()) {
      std::vector<Dim> dims;
      dims.reserve(tt.shape().dim_size());
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value()) {
          if (d.dim_value() < 0)
            throw Error(context + ": negative dimension " + std::to_string(d.dim_value()) + " in its shape");
          dims.emplace_back(d.dim_value());
        } else if (d.has_dim_param() && !d.dim_param().empty()) {
          dims.push_back(Dim::Symbol(d.dim_param()));
        } else {
          dims.emplace_back();
        }
      }
      *shape = Shape(std::move(dims));
    }
    return true;
  }

  void ReadInputs(const onnx::GraphProto& gp) {
    std::unordered_set<std::string> seen;
    for (const auto& vi : gp.input()) {
      const std::string& name = vi.name();
      const std::string context = what_ + ": graph input '" + name + "'";
      if (name.empty()) throw Error(what_ + ": a graph input has no name");
      if (!seen.insert(name).second) throw Error(context + " is listed twice");
      DataType dt;
      Shape shape;
      ReadType(vi.type(), context, /*strict=*/true, &dt, &shape);
      Value* v = g_.FindValue(name);
      if (v && v->is_initializer()) {
        // An initializer that is also an input (an overridable default): the initializer's static type wins,
        // but the declared element type must agree with it.
        if (dt != DataType::kUndefined && dt != v->dtype)
          throw Error(context + " is declared " + DataTypeName(dt) + " but its initializer is " +
                      DataTypeName(v->dtype));
      } else {
        v = g_.AddValue(name);
        v->dtype = dt;
        v->shape = shape;
        defined_[name] = "a graph input";
      }
      g_.inputs.push_back(v);
    }
  }

  Attribute ReadAttribute(const onnx::AttributeProto& ap, const std::string& node_desc) {
    int type = ap.type();
    if (!ap.ref_attr_name().empty()) type = -1;     // function-body reference: keep opaque
    if (type == onnx::AttributeProto::UNDEFINED) {  // very old writers: infer from the field that is set
      if (ap.has_f())
        type = onnx::AttributeProto::FLOAT;
      else if (ap.has_i())
        type = onnx::AttributeProto::INT;
      else if (ap.has_s())
        type = onnx::AttributeProto::STRING;
      else if (ap.has_t())
        type = onnx::AttributeProto::TENSOR;
      else if (ap.has_g())
        type = onnx::AttributeProto::GRAPH;
      else if (ap.floats_size())
        type = onnx::AttributeProto::FLOATS;
      else if (ap.ints_size())
        type = onnx::AttributeProto::INTS;
      else if (ap.strings_size())
        type = onnx::AttributeProto::STRINGS;
      else if (ap.tensors_size())
        type = onnx::AttributeProto::TENSORS;
      else if (ap.graphs_size())
        type = onnx::AttributeProto::GRAPHS;
    }
    Attribute a;
    switch (type) {
      case onnx::AttributeProto::FLOAT:
        a = Attribute::Float(ap.f());
        break;
      case onnx::AttributeProto::INT:
        a = Attribute::Int(ap.i());
        break;
      case onnx::AttributeProto::STRING:
        a = Attribute::String(ap.s());
        break;
      case onnx::AttributeProto::TENSOR:
        a = Attribute::TensorValue(
            TensorFromProto(ap.t(), base_dir_, what_, node_desc + ": attribute '" + ap.name() + "'"));
        break;
      case onnx::AttributeProto::FLOATS:
        a = Attribute::Floats({ap.floats().begin(), ap.floats().end()});
        break;
      case onnx::AttributeProto::INTS:
        a = Attribute::Ints({ap.ints().begin(), ap.ints().end()});
        break;
      case onnx::AttributeProto::STRINGS:
        a.kind = Attribute::Kind::kStrings;
        a.strings.assign(ap.strings().begin(), ap.strings().end());
        break;
      case onnx::AttributeProto::TENSORS:
        a.kind = Attribute::Kind::kTensors;
        for (int i = 0; i < ap.tensors_size(); ++i)
          a.tensors.push_back(
              TensorFromProto(ap.tensors(i), base_dir_, what_,
                              node_desc + ": attribute '" + ap.name() + "'[" + std::to_string(i) + "]"));
        break;
      case onnx::AttributeProto::GRAPH:
        a.kind = Attribute::Kind::kGraph;
        a.opaque = ap.SerializeAsString();
        break;
      default:  // GRAPHS, sparse tensors, type protos, references: kept as written for export
        a.kind = Attribute::Kind::kOther;
        a.opaque = ap.SerializeAsString();
        break;
    }
    return a;
  }

  void ReadNodes(const onnx::GraphProto& gp) {
    // Names given in the file, so generated names for unnamed nodes do not collide with them.
    std::unordered_set<std::string> node_names;
    for (const auto& np : gp.node())
      if (!np.name().empty()) node_names.insert(np.name());
    struct PendingInput {
      Node* node;
      std::string name;
    };
    std::vector<PendingInput> pending;
    for (int idx = 0; idx < gp.node_size(); ++idx) {
      const auto& np = gp.node(idx);
      std::string name = np.name();
      if (name.empty()) {
        name = np.op_type() + "_" + std::to_string(idx);
        for (int k = 1; node_names.count(name); ++k)
          name = np.op_type() + "_" + std::to_string(idx) + "_" + std::to_string(k);
        node_names.insert(name);
      }
      const std::string domain = NormalizeDomain(np.domain());
      std::string desc = "node '" + name + "' (" + (domain.empty() ? "" : domain + ".") + np.op_type() + ")";
      if (np.op_type().empty()) throw Error(what_ + ": node '" + name + "' has no op_type");
      std::vector<Value*> inputs, outputs;
      inputs.reserve(np.input_size());
      for (const auto& in : np.input()) {
        if (in.empty()) {
          inputs.push_back(nullptr);
          continue;
        }
        inputs.push_back(g_.GetOrAddValue(in));
      }
      std::unordered_set<std::string> own;
      for (const auto& out : np.output()) {
        if (out.empty()) {
          outputs.push_back(nullptr);
          continue;
        }
        auto it = defined_.find(out);
        if (it != defined_.end())
          throw Error(what_ + ": " + desc + ": output '" + out + "' is already defined by " + it->second);
        if (!own.insert(out).second) throw Error(what_ + ": " + desc + ": output '" + out + "' is listed twice");
        outputs.push_back(g_.GetOrAddValue(out));
      }
      Node* n = g_.AddNode(np.op_type(), inputs, outputs, name);
      n->domain = domain;
      n->opset = g_.OpsetOf(domain);
      n->doc_string = np.doc_string();
      for (const auto& ap : np.attribute()) {
        if (ap.name().empty()) throw Error(what_ + ": " + desc + ": an attribute has no name");
        if (n->attrs.count(ap.name()))
          throw Error(what_ + ": " + desc + ": attribute '" + ap.name() + "' is given twice");
        n->attrs.emplace(ap.name(), ReadAttribute(ap, desc));
      }
      for (const auto& out : np.output())
        if (!out.empty()) defined_[out] = desc;
      for (const auto& in : np.input())
        if (!in.empty()) pending.push_back({n, in});
    }
    // ONNX files may list nodes out of order, so inputs are checked once every node is known.
    for (const auto& p : pending)
      if (!defined_.count(p.name) && !ResolveOuter(p.name))
        throw Error(what_ + ": node '" + p.node->name + "' (" + p.node->op_type + "): input '" + p.name +
                    "' is not defined by any node, input or initializer");
  }

  void ReadOutputs(const onnx::GraphProto& gp) {
    std::unordered_set<std::string> seen;
    for (const auto& vi : gp.output()) {
      const std::string& name = vi.name();
      const std::string context = what_ + ": graph output '" + name + "'";
      if (name.empty()) throw Error(what_ + ": a graph output has no name");
      if (!seen.insert(name).second) throw Error(context + " is listed twice");
      if (!defined_.count(name) && !ResolveOuter(name))
        throw Error(context + " is not defined by any node, input or initializer");
      DataType dt;
      Shape shape;
      ReadType(vi.type(), context, /*strict=*/true, &dt, &shape);
      Value* v = g_.FindValue(name);
      if (v->dtype == DataType::kUndefined) v->dtype = dt;
      if (!v->shape.known_rank()) v->shape = shape;
      g_.outputs.push_back(v);
    }
  }

  void ReadValueInfo(const onnx::GraphProto& gp) {
    for (const auto& vi : gp.value_info()) {
      Value* v = g_.FindValue(vi.name());
      if (!v || v->is_initializer()) continue;
      DataType dt;
      Shape shape;
      if (!ReadType(vi.type(), what_ + ": value_info '" + vi.name() + "'", /*strict=*/false, &dt, &shape)) continue;
      if (v->dtype == DataType::kUndefined) v->dtype = dt;
      if (!v->shape.known_rank()) v->shape = shape;
    }
  }

  const std::string& base_dir_;
  const std::string& what_;
  Graph& g_;
  std::vector<const Graph*> outers_;                      // enclosing graphs of a TrainingInfoProto graph
  std::unordered_map<std::string, std::string> defined_;  // value name -> what defines it
};

// The value of `sub` that a binding's key names: an initializer of `sub` or of an enclosing graph (shared).
Value* BindingState(Graph& sub, const std::vector<const Graph*>& outers, const std::string& key,
                    const std::string& context) {
  Value* v = sub.FindValue(key);
  if (v && v->is_initializer()) return v;
  for (const Graph* o : outers) {
    const Value* ov = o->FindValue(key);
    if (!ov || !ov->is_initializer()) continue;
    if (!v) v = sub.AddValue(key);
    v->dtype = ov->dtype;
    v->shape = ov->shape;
    v->initializer = ov->initializer;
    return v;
  }
  throw Error(context + ": '" + key + "' is not an initializer of the model" +
              (outers.size() > 1 ? " or of its algorithm" : ""));
}

// The value of `sub` a binding assigns: an output of `sub`, or (for the algorithm) an output of the main graph.
Value* BindingNext(Graph& sub, const Graph* main, const std::string& name, const std::string& context) {
  Value* v = sub.FindValue(name);
  if (v && std::find(sub.outputs.begin(), sub.outputs.end(), v) != sub.outputs.end()) return v;
  if (main) {
    const Value* mv = main->FindValue(name);
    if (mv && std::find(main->outputs.begin(), main->outputs.end(), mv) != main->outputs.end()) {
      if (!v) v = sub.AddValue(name);
      v->dtype = mv->dtype;
      v->shape = mv->shape;
      return v;
    }
  }
  throw Error(context + ": '" + name + "' is not an output of the " +
              (main ? "algorithm or of the model" : "initialization graph"));
}

// Reads TrainingInfoProto i into g.training_info.
void ReadTrainingInfo(onnx::TrainingInfoProto& tp, int index, Graph& g, const std::string& base_dir,
                      const std::string& what) {
  Graph::TrainingInfo ti;
  const std::string where = what + ": training_info[" + std::to_string(index) + "]";
  if (tp.has_algorithm()) {
    ti.algorithm = std::make_unique<Graph>();
    const std::string w = where + ".algorithm";
    Importer(base_dir, w, *ti.algorithm).RunSubgraph(*tp.mutable_algorithm(), g, {&g});
  }
  if (tp.has_initialization()) {
    ti.initialization = std::make_unique<Graph>();
    const std::string w = where + ".initialization";
    std::vector<const Graph*> outers = {&g};
    if (ti.algorithm) outers.push_back(ti.algorithm.get());
    Importer(base_dir, w, *ti.initialization).RunSubgraph(*tp.mutable_initialization(), g, outers);
  }
  std::set<std::string> keys;
  auto bind = [&](Graph* sub, const auto& entries, const std::string& field, bool algorithm) {
    for (int i = 0; i < entries.size(); ++i) {
      const std::string context = where + "." + field + "[" + std::to_string(i) + "]";
      if (!sub)
        throw Error(context + ": binding '" + entries.Get(i).key() + "' but the training info has no " +
                    (algorithm ? "algorithm" : "initialization") + " graph");
      const auto& e = entries.Get(i);
      if (algorithm && !keys.insert(e.key()).second)
        throw Error(context + ": '" + e.key() + "' is bound twice (each variable is updated at most once)");
      std::vector<const Graph*> outers = {&g};
      if (!algorithm && ti.algorithm) outers.push_back(ti.algorithm.get());
      Value* state = BindingState(*sub, outers, e.key(), context);
      Value* next = BindingNext(*sub, algorithm ? &g : nullptr, e.value(), context);
      sub->update_bindings.push_back({state, next});
    }
  };
  bind(ti.algorithm.get(), tp.update_binding(), "update_binding", true);
  bind(ti.initialization.get(), tp.initialization_binding(), "initialization_binding", false);
  g.training_info.push_back(std::move(ti));
}

// Names for values that have none (made by passes), so export never writes "" (= omitted) for a real value.
class NameTable {
 public:
  explicit NameTable(const Graph& g) {
    std::unordered_set<std::string> used;
    for (const auto& v : g.values())
      if (!v->name.empty()) used.insert(v->name);
    int64_t k = 0;
    for (const auto& v : g.values()) {
      if (!v->name.empty()) continue;
      std::string n;
      do n = "_ot_value_" + std::to_string(k++);
      while (used.count(n));
      used.insert(n);
      names_[v.get()] = n;
    }
  }
  const std::string& operator()(const Value* v) const {
    auto it = names_.find(v);
    return it == names_.end() ? v->name : it->second;
  }

 private:
  std::unordered_map<const Value*, std::string> names_;
};

void WriteValueInfo(const Value* v, const std::string& name, onnx::ValueInfoProto* vi) {
  vi->set_name(name);
  if (v->dtype == DataType::kUndefined && !v->shape.known_rank()) return;
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(v->dtype));
  if (!v->shape.known_rank()) return;
  auto* sh = tt->mutable_shape();
  for (const Dim& d : v->shape.dims()) {
    auto* dp = sh->add_dim();
    if (d.is_static())
      dp->set_dim_value(d.value);
    else if (!d.symbol.empty())
      dp->set_dim_param(d.symbol);
  }
}

void WriteAttribute(const std::string& key, const Attribute& a, const Node& n, onnx::AttributeProto* ap) {
  switch (a.kind) {
    case Attribute::Kind::kGraph:
    case Attribute::Kind::kOther:
      if (a.opaque.empty() || !onnx_detail::ParseProto(a.opaque, ap))
        throw Error(n.Describe() + ": attribute '" + key + "' cannot be exported (no serialized form)");
      ap->set_name(key);
      return;
    default:
      break;
  }
  ap->set_name(key);
  switch (a.kind) {
    case Attribute::Kind::kFloat:
      ap->set_type(onnx::AttributeProto::FLOAT);
      ap->set_f(a.f);
      break;
    case Attribute::Kind::kInt:
      ap->set_type(onnx::AttributeProto::INT);
      ap->set_i(a.i);
      break;
    case Attribute::Kind::kString:
      ap->set_type(onnx::AttributeProto::STRING);
      ap->set_s(a.s);
      break;
    case Attribute::Kind::kTensor:
      ap->set_type(onnx::AttributeProto::TENSOR);
      TensorToProto(a.t, "", ap->mutable_t());
      break;
    case Attribute::Kind::kFloats:
      ap->set_type(onnx::AttributeProto::FLOATS);
      for (float f : a.floats) ap->add_floats(f);
      break;
    case Attribute::Kind::kInts:
      ap->set_type(onnx::AttributeProto::INTS);
      for (int64_t i : a.ints) ap->add_ints(i);
      break;
    case Attribute::Kind::kStrings:
      ap->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& s : a.strings) ap->add_strings(s);
      break;
    case Attribute::Kind::kTensors:
      ap->set_type(onnx::AttributeProto::TENSORS);
      for (const auto& t : a.tensors) TensorToProto(t, "", ap->add_tensors());
      break;
    default:
      break;
  }
}

}  // namespace

namespace {

std::unique_ptr<Graph> ParseModelBytes(const uint8_t* data, size_t size, const std::string& base_dir,
                                       const std::string& what) {
  if (size > static_cast<size_t>(INT_MAX))
    throw Error(io::OneLine(what + ": model file is larger than 2 GiB (" + std::to_string(size) +
                            " bytes); store its weights as external data"));
  onnx::ModelProto m;
  if (!onnx_detail::ParseProto(data, size, &m))
    throw Error(io::OneLine(what + ": not a valid ONNX model (protobuf parse failed)"));
  auto g = std::make_unique<Graph>();
  Importer imp(base_dir, what, *g);
  try {
    imp.Run(m);
    for (int i = 0; i < m.training_info_size(); ++i)
      ReadTrainingInfo(*m.mutable_training_info(i), i, *g, base_dir, what);
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(io::OneLine(e.what()));
  } catch (const Error& e) {
    // Errors raised by the IR itself (e.g. Tensor limits) do not know the file: add it.
    std::string msg = e.what();
    if (msg.compare(0, what.size(), what) != 0) msg = what + ": " + msg;
    throw Error(io::OneLine(msg));
  }
  return g;
}

}  // namespace

std::unique_ptr<Graph> ParseModel(const std::string& bytes, const std::string& base_dir, const std::string& what) {
  return ParseModelBytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), base_dir, what);
}

std::unique_ptr<Graph> LoadModel(const std::string& path) {
  io::MappedFile f(path);  // parsed in place: no heap copy of the file
  return ParseModelBytes(f.data(), f.size(), io::DirName(path), path);
}

namespace {

// True for a value of a TrainingInfoProto graph that stands for an enclosing graph's initializer (same tensor):
// it is that graph's, not written again.
bool Borrowed(const Value* v, const std::vector<const Graph*>& outers) {
  if (!v->is_initializer()) return false;
  for (const Graph* o : outers) {
    const Value* ov = o->FindValue(v->name);
    if (ov && ov->initializer == v->initializer) return true;
  }
  return false;
}

void WriteGraph(const Graph& g, const std::vector<const Graph*>& outers, onnx::GraphProto* gp) {
  NameTable names(g);
  gp->set_name(g.name);
  for (const auto& v : g.values())
    if (v->is_initializer() && !Borrowed(v.get(), outers))
      TensorToProto(*v->initializer, names(v.get()), gp->add_initializer());
  std::unordered_set<const Value*> io;
  for (const Value* v : g.inputs) {
    WriteValueInfo(v, names(v), gp->add_input());
    io.insert(v);
  }
  for (const Value* v : g.outputs) {
    WriteValueInfo(v, names(v), gp->add_output());
    io.insert(v);
  }
  for (Node* n : g.TopologicalOrder()) {
    auto* np = gp->add_node();
    np->set_name(n->name);
    np->set_op_type(n->op_type);
    if (!n->domain.empty()) np->set_domain(n->domain);
    if (!n->doc_string.empty()) np->set_doc_string(n->doc_string);
    for (const Value* in : n->inputs) np->add_input(in ? names(in) : std::string());
    for (const Value* out : n->outputs) np->add_output(out ? names(out) : std::string());
    for (const auto& [key, a] : n->attrs) WriteAttribute(key, a, *n, np->add_attribute());
  }
  for (const auto& v : g.values()) {
    if (!v->producer || io.count(v.get()) || v->is_initializer() || v->dtype == DataType::kUndefined) continue;
    WriteValueInfo(v.get(), names(v.get()), gp->add_value_info());
  }
}

void WriteBindings(const Graph& sub, google::protobuf::RepeatedPtrField<onnx::StringStringEntryProto>* out) {
  NameTable names(sub);
  for (const auto& b : sub.update_bindings) {
    auto* e = out->Add();
    e->set_key(names(b.state));
    e->set_value(names(b.next));
  }
}

}  // namespace

std::string SerializeModel(const Graph& g) {
  onnx::ModelProto m;
  m.set_ir_version(g.ir_version);
  if (!g.producer_name.empty()) m.set_producer_name(g.producer_name);
  if (!g.producer_version.empty()) m.set_producer_version(g.producer_version);
  if (!g.doc_string.empty()) m.set_doc_string(g.doc_string);
  std::map<std::string, int> opsets = g.opset_imports;
  auto add_node_opsets = [&](const Graph& x) {  // a domain used by a node but not imported: import the node's opset
    for (const auto& n : x.nodes()) {
      std::string d = NormalizeDomain(n->domain);
      if (n->opset > 0 && !opsets.count(d)) opsets[d] = n->opset;
    }
  };
  add_node_opsets(g);
  for (const auto& ti : g.training_info) {
    if (ti.algorithm) add_node_opsets(*ti.algorithm);
    if (ti.initialization) add_node_opsets(*ti.initialization);
  }
  for (const auto& [d, v] : opsets) {
    auto* op = m.add_opset_import();
    op->set_domain(d);
    op->set_version(v);
  }
  WriteGraph(g, {}, m.mutable_graph());
  for (const auto& ti : g.training_info) {
    auto* tp = m.add_training_info();
    if (ti.initialization) {
      std::vector<const Graph*> outers = {&g};
      if (ti.algorithm) outers.push_back(ti.algorithm.get());
      WriteGraph(*ti.initialization, outers, tp->mutable_initialization());
    }
    if (ti.algorithm) WriteGraph(*ti.algorithm, {&g}, tp->mutable_algorithm());
    if (ti.initialization) WriteBindings(*ti.initialization, tp->mutable_initialization_binding());
    if (ti.algorithm) WriteBindings(*ti.algorithm, tp->mutable_update_binding());
  }
  for (const auto& [k, v] : g.metadata_props) {
    auto* e = m.add_metadata_props();
    e->set_key(k);
    e->set_value(v);
  }
  if (m.ByteSizeLong() > static_cast<size_t>(INT_MAX))
    throw Error("model '" + g.name + "' is larger than 2 GiB, which a single ONNX file cannot hold");
  std::string out;
  if (!m.SerializeToString(&out)) throw Error("model '" + g.name + "': serialization failed");
  return out;
}

void SaveModel(const Graph& g, const std::string& path) { io::WriteFile(path, SerializeModel(g)); }

}  // namespace ot
