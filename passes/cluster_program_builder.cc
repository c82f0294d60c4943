#include "passes/cluster_program_builder.h"

#include <algorithm>
#include <deque>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

void SetClusterAttributes(Node* f, const cluster::Program& p, const std::vector<int64_t>& row_keepdims,
                          const std::vector<std::string>& ops) {
  f->attrs["program"] = Attribute::String(cluster::ToText(p));
  f->attrs["row_keepdims"] = Attribute::Ints(row_keepdims);
  Attribute a;
  a.kind = Attribute::Kind::kStrings;
  a.strings = ops;
  f->attrs["fused_ops"] = a;
}

bool ToClusterType(DataType t, cluster::DType* out) {
  switch (t) {
    case DataType::kFloat32:
      *out = cluster::DType::kF32;
      return true;
    case DataType::kFloat16:
      *out = cluster::DType::kF16;
      return true;
    case DataType::kBFloat16:
      *out = cluster::DType::kBF16;
      return true;
    case DataType::kBool:
      *out = cluster::DType::kBool;
      return true;
    default:
      return false;
  }
}

DataType FromClusterType(cluster::DType t) {
  switch (t) {
    case cluster::DType::kF32:
      return DataType::kFloat32;
    case cluster::DType::kF16:
      return DataType::kFloat16;
    case cluster::DType::kBF16:
      return DataType::kBFloat16;
    case cluster::DType::kBool:
      return DataType::kBool;
  }
  return DataType::kUndefined;
}

namespace {

struct NotFusible : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int64_t Numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// True when `d` broadcasts (numpy rules, right-aligned) to `to`.
bool BroadcastsTo(const std::vector<int64_t>& d, const std::vector<int64_t>& to) {
  if (d.size() > to.size()) return false;
  const size_t off = to.size() - d.size();
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] != 1 && d[i] != to[off + i]) return false;
  return true;
}

bool IsState(const Graph& g, const Value* v) {
  for (const auto& b : g.update_bindings)
    if (b.state == v) return true;
  return false;
}

std::vector<const Node*> LocalTopoOrder(const std::vector<const Node*>& nodes) {
  std::set<const Node*> members(nodes.begin(), nodes.end());
  std::vector<const Node*> order, rest = nodes;
  std::set<const Value*> done;
  while (!rest.empty()) {
    bool progress = false;
    for (auto it = rest.begin(); it != rest.end();) {
      bool ready = true;
      for (const Value* in : (*it)->inputs)
        if (in && in->producer && members.count(in->producer) && !done.count(in)) ready = false;
      if (!ready) {
        ++it;
        continue;
      }
      for (const Value* o : (*it)->outputs)
        if (o) done.insert(o);
      order.push_back(*it);
      it = rest.erase(it);
      progress = true;
    }
    if (!progress) throw NotFusible("the nodes form a cycle");
  }
  return order;
}

// Records the reduction axes of each node; every other call is a no-op (pass 1 of the build).
class Probe : public ClusterBuilder {
 public:
  explicit Probe(const Node& n, const Graph& g) : n_(n), g_(g) {}
  int In(int) override { return 0; }
  int Emit(int, int, int, int, int, float) override { return 0; }
  int Const(float) override { return 0; }
  int Reduce(int, int, const std::vector<int64_t>& axes, int) override {
    axes_ = axes;
    reduces_ = true;
    return 0;
  }
  int OutType(int) const override { return 0; }
  const Tensor* ConstInput(int i) const override {
    if (!n_.has_input(i) || IsState(g_, n_.inputs[i])) return nullptr;
    auto t = fuse::ConstantTensor(n_.inputs[i]);
    if (!t) return nullptr;
    held_.push_back(*t);
    return &held_.back();
  }
  void Out(int, int) override {}
  bool reduces_ = false;
  std::vector<int64_t> axes_;

 private:
  const Node& n_;
  const Graph& g_;
  mutable std::deque<Tensor> held_;
};

class Builder : public ClusterBuilder {
 public:
  Builder(const Graph& g, const DimsOf& dims, BuiltCluster& out, int reduce_axes)
      : g_(g), dims_(dims), out_(out), reduce_axes_(reduce_axes) {
    out_.program.reduce_axes = reduce_axes;
    rows_ = 1;
    for (size_t i = 0; i + reduce_axes < out_.domain.size(); ++i) rows_ *= out_.domain[i];
  }
  void Lower(const Node& n) {
    node_ = &n;
    const OpSchema* s = OpRegistry::Global().Find(n.domain, n.op_type);
    if (!s || !s->lower) throw NotFusible(n.Describe() + " is not fusible");
    std::string why = s->lower(n, *this);
    if (!why.empty()) throw NotFusible(n.Describe() + ": " + why);
  }

  int In(int i) override {
    if (!node_->has_input(i)) throw NotFusible(node_->Describe() + ": input " + std::to_string(i) + " is absent");
    const Value* v = node_->inputs[i];
    if (auto it = reg_.find(v); it != reg_.end()) return it->second;
    if (v->initializer && v->initializer->numel() == 1 && !IsState(g_, v) && IsFloat(v->initializer->dtype())) {
      const int r = Const(static_cast<float>(v->initializer->GetDouble(0)));
      reg_[v] = r;
      return r;
    }
    const ValueDims* d = dims_(v);
    if (!d) throw NotFusible("the dims of '" + v->name + "' are not known");
    cluster::DType t;
    if (!ToClusterType(d->dtype, &t)) throw NotFusible("'" + v->name + "' is " + DataTypeName(d->dtype));
    bool row = false;
    if (reduce_axes_ > 0) {
      row = true;
      const size_t r = out_.domain.size();
      for (size_t k = 0; k < d->dims.size(); ++k) {
        const size_t axis = r - d->dims.size() + k;  // right-aligned
        if (axis + reduce_axes_ >= r && d->dims[k] != 1) row = false;
      }
      if (d->dims.size() > r) row = false;
    }
    std::vector<int64_t> target = out_.domain;
    if (row)
      for (int k = 0; k < reduce_axes_; ++k) target[target.size() - 1 - k] = 1;
    if (!BroadcastsTo(d->dims, target))
      throw NotFusible("'" + v->name + "' " + DimsToString(d->dims) + " does not broadcast to the cluster's domain " +
                       DimsToString(out_.domain));
    cluster::Instr ins;
    ins.op = cluster::Op::kInput;
    ins.a = static_cast<int32_t>(out_.inputs.size());
    ins.dtype = t;
    ins.row = row;
    out_.inputs.push_back(const_cast<Value*>(v));
    out_.program.num_inputs = static_cast<int32_t>(out_.inputs.size());
    out_.work_bytes += (row ? rows_ : Numel(out_.domain)) * static_cast<int64_t>(SizeOf(d->dtype));
    const int r = Push(ins);
    reg_[v] = r;
    return r;
  }
  int Emit(int op, int t, int a, int b, int c, float imm) override {
    cluster::Instr ins;
    ins.op = static_cast<cluster::Op>(op);
    ins.a = a;
    ins.b = b;
    ins.c = c;
    ins.imm = imm;
    ins.dtype = static_cast<cluster::DType>(t);
    ins.row = reduce_axes_ > 0;
    for (int x : {a, b, c})
      if (x >= 0 && !out_.program.code[x].row) ins.row = false;
    out_.work_bytes += 4 * (ins.row ? rows_ : Numel(out_.domain));
    return Push(ins);
  }
  int Const(float v) override {
    cluster::Instr ins;
    ins.op = cluster::Op::kConst;
    ins.imm = v;
    ins.row = reduce_axes_ > 0;
    return Push(ins);
  }
  int Reduce(int op, int a, const std::vector<int64_t>& axes, int t) override {
    const ValueDims* in = dims_(node_->inputs[0]);
    if (!in || in->dims != out_.domain)
      throw NotFusible(node_->Describe() + ": reduces a value that is not the cluster's whole domain");
    if (static_cast<int>(axes.size()) != reduce_axes_ &&
        !(axes.empty() && reduce_axes_ == static_cast<int>(in->dims.size())))
      throw NotFusible(node_->Describe() + ": reduces other axes than the cluster's rows");
    if (out_.program.code[a].row) throw NotFusible(node_->Describe() + ": reduces a row value");
    cluster::Instr ins;
    ins.op = static_cast<cluster::Op>(op);
    ins.a = a;
    ins.dtype = static_cast<cluster::DType>(t < 0 ? OutType(0) : t);
    ins.row = true;
    out_.work_bytes += 4 * Numel(out_.domain);  // every element is read once into the row's sum
    return Push(ins);
  }
  int OutType(int i) const override {
    const ValueDims* d = node_->has_output(i) ? dims_(node_->outputs[i]) : nullptr;
    cluster::DType t;
    if (!d || !ToClusterType(d->dtype, &t))
      throw NotFusible(node_->Describe() + ": output " + std::to_string(i) + " is not float or bool");
    return static_cast<int>(t);
  }
  const Tensor* ConstInput(int i) const override {
    if (!node_->has_input(i) || IsState(g_, node_->inputs[i])) return nullptr;
    auto t = fuse::ConstantTensor(node_->inputs[i]);
    if (!t) return nullptr;
    held_.push_back(*t);
    return &held_.back();
  }
  void Out(int i, int reg) override {
    const Value* v = node_->outputs[i];
    const ValueDims* d = dims_(v);
    if (!d) throw NotFusible("the dims of '" + v->name + "' are not known");
    const cluster::Instr& ins = out_.program.code[reg];
    if (ins.row) {
      if (Numel(d->dims) != rows_) throw NotFusible("'" + v->name + "' is not one value per row");
    } else if (!BroadcastsTo(d->dims, out_.domain)) {
      throw NotFusible("'" + v->name + "' " + DimsToString(d->dims) + " does not broadcast to the domain " +
                       DimsToString(out_.domain));
    }
    reg_[v] = reg;
  }
  int RegOf(const Value* v) const {
    auto it = reg_.find(v);
    return it == reg_.end() ? -1 : it->second;
  }
  int64_t rows() const { return rows_; }

 private:
  int Push(const cluster::Instr& ins) {
    out_.program.code.push_back(ins);
    return static_cast<int>(out_.program.code.size()) - 1;
  }
  const Graph& g_;
  const DimsOf& dims_;
  BuiltCluster& out_;
  int reduce_axes_ = 0;
  int64_t rows_ = 1;
  const Node* node_ = nullptr;
  std::unordered_map<const Value*, int> reg_;
  mutable std::deque<Tensor> held_;
};

}  // namespace

BuiltCluster BuildClusterProgram(const Graph& g, const std::vector<const Node*>& nodes,
                                 const std::vector<const Value*>& escapes, const DimsOf& dims) {
  BuiltCluster out;
  try {
    const std::vector<const Node*> order = LocalTopoOrder(nodes);
    // The domain: the largest shape among the nodes' operands and results (integer operands -- reduction axes --
    // excluded).
    for (const Node* n : order) {
      auto consider = [&](const Value* v) {
        if (!v) return;
        const ValueDims* d = dims(v);
        if (!d) throw NotFusible("the dims of '" + v->name + "' are not known");
        cluster::DType t;
        if (!ToClusterType(d->dtype, &t)) return;
        if (Numel(d->dims) > Numel(out.domain) ||
            (Numel(d->dims) == Numel(out.domain) && d->dims.size() > out.domain.size()))
          out.domain = d->dims;
      };
      for (const Value* v : n->inputs) consider(v);
      for (const Value* v : n->outputs) consider(v);
    }
    // Pass 1: the reductions' axes decide the rows.
    int reduce_axes = 0;
    for (const Node* n : order) {
      const OpSchema* s = OpRegistry::Global().Find(n->domain, n->op_type);
      if (!s || !s->lower) throw NotFusible(n->Describe() + " is not fusible");
      if (s->fusible != FusibleKind::kReduction) continue;
      Probe probe(*n, g);
      std::string why = s->lower(*n, probe);
      if (!why.empty()) throw NotFusible(n->Describe() + ": " + why);
      const int rank = static_cast<int>(out.domain.size());
      std::vector<int64_t> axes;
      for (int64_t a : probe.axes_) axes.push_back(a < 0 ? a + rank : a);
      std::sort(axes.begin(), axes.end());
      if (axes.empty())
        for (int a = 0; a < rank; ++a) axes.push_back(a);
      for (size_t k = 0; k < axes.size(); ++k)
        if (axes[k] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(k))
          throw NotFusible(n->Describe() + ": reduces axes that are not the trailing axes of " +
                           DimsToString(out.domain));
      const int k = static_cast<int>(axes.size());
      if (reduce_axes && reduce_axes != k) throw NotFusible(n->Describe() + ": reduces other axes than the rows");
      reduce_axes = k;
    }
    // Pass 2: the program.
    Builder b(g, dims, out, reduce_axes);
    for (const Node* n : order) b.Lower(*n);
    for (const Value* v : escapes) {
      const int r = b.RegOf(v);
      if (r < 0) throw NotFusible("'" + v->name + "' is not computed by the cluster");
      const ValueDims* d = dims(v);
      const cluster::Instr& ins = out.program.code[r];
      int64_t keep = 0;
      if (ins.row) {
        std::vector<int64_t> kept = out.domain;
        for (int k = 0; k < reduce_axes; ++k) kept[kept.size() - 1 - k] = 1;
        std::vector<int64_t> dropped(out.domain.begin(), out.domain.end() - reduce_axes);
        if (d->dims == kept)
          keep = 1;
        else if (d->dims != dropped)
          throw NotFusible("'" + v->name + "' " + DimsToString(d->dims) + " is neither full nor one per row");
      } else if (d->dims != out.domain) {
        throw NotFusible("'" + v->name + "' " + DimsToString(d->dims) + " leaves the cluster but is smaller than " +
                         "its domain " + DimsToString(out.domain));
      }
      out.program.outputs.push_back(r);
      out.outputs.push_back(const_cast<Value*>(v));
      out.row_keepdims.push_back(keep);
    }
    cluster::Validate(out.program);
  } catch (const NotFusible& e) {
    out.error = e.what();
  } catch (const std::invalid_argument& e) {
    out.error = std::string("invalid program: ") + e.what();
  } catch (const Error& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace ot
