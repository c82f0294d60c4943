#include "graph/graph.h"

#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"

namespace ot {

std::string Attribute::ToString() const {
  auto join = [](const auto& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s += ",";
      if constexpr (std::is_same_v<std::decay_t<decltype(v[0])>, std::string>)
        s += "\"" + v[i] + "\"";
      else
        s += std::to_string(v[i]);
    }
    return s + "]";
  };
  switch (kind) {
    case Kind::kFloat: {
      std::string s = std::to_string(f);
      return s;
    }
    case Kind::kInt:
      return std::to_string(i);
    case Kind::kString:
      return "\"" + s + "\"";
    case Kind::kTensor:
      return "tensor<" + DataTypeName(t.dtype()) + DimsToString(t.dims()) + ">";
    case Kind::kFloats:
      return join(floats);
    case Kind::kInts:
      return join(ints);
    case Kind::kStrings:
      return join(strings);
    case Kind::kTensors:
      return "tensors(" + std::to_string(tensors.size()) + ")";
    case Kind::kGraph:
      return "graph";
    case Kind::kOther:
      return "?";
  }
  return "?";
}

const Attribute* Node::attr(const std::string& k) const {
  auto it = attrs.find(k);
  return it == attrs.end() ? nullptr : &it->second;
}

int64_t Node::attr_int(const std::string& k, int64_t def) const {
  const Attribute* a = attr(k);
  if (!a) return def;
  if (a->kind != Attribute::Kind::kInt) throw Error(Describe() + ": attribute '" + k + "' must be an int");
  return a->i;
}

float Node::attr_float(const std::string& k, float def) const {
  const Attribute* a = attr(k);
  if (!a) return def;
  if (a->kind == Attribute::Kind::kInt) return static_cast<float>(a->i);
  if (a->kind != Attribute::Kind::kFloat) throw Error(Describe() + ": attribute '" + k + "' must be a float");
  return a->f;
}

std::string Node::attr_string(const std::string& k, const std::string& def) const {
  const Attribute* a = attr(k);
  if (!a) return def;
  if (a->kind != Attribute::Kind::kString) throw Error(Describe() + ": attribute '" + k + "' must be a string");
  return a->s;
}

std::vector<int64_t> Node::attr_ints(const std::string& k, const std::vector<int64_t>& def) const {
  const Attribute* a = attr(k);
  if (!a) return def;
  if (a->kind != Attribute::Kind::kInts) throw Error(Describe() + ": attribute '" + k + "' must be a list of ints");
  return a->ints;
}

std::vector<std::string> Node::attr_strings(const std::string& k, const std::vector<std::string>& def) const {
  const Attribute* a = attr(k);
  if (!a) return def;
  if (a->kind != Attribute::Kind::kStrings)
    throw Error(Describe() + ": attribute '" + k + "' must be a list of strings");
  return a->strings;
}

std::vector<float> Node::attr_floats(const std::string& k, const std::vector<float>& def) const {
  const Attribute* a = attr(k);
  if (!a) return def;
  if (a->kind != Attribute::Kind::kFloats) throw Error(Describe() + ": attribute '" + k + "' must be a list of floats");
  return a->floats;
}

std::string Node::Describe() const {
  std::string d = "node '" + name + "' (" + (domain.empty() ? "" : domain + ".") + op_type;
  if (opset) d += ", opset " + std::to_string(opset);
  return d + ")";
}

Value* Graph::AddValue(const std::string& name) {
  if (!name.empty() && by_name_.count(name)) throw Error("value '" + name + "' is defined twice");
  values_.push_back(std::make_unique<Value>());
  Value* v = values_.back().get();
  v->name = name;
  if (!name.empty()) by_name_[name] = v;
  return v;
}

Value* Graph::FindValue(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Value* Graph::GetOrAddValue(const std::string& name) {
  Value* v = FindValue(name);
  return v ? v : AddValue(name);
}

std::string Graph::UniqueName(const std::string& prefix) {
  for (;;) {
    std::string n = prefix + "_" + std::to_string(unique_counter_++);
    if (!by_name_.count(n)) return n;
  }
}

Value* Graph::AddInitializer(const std::string& name, Tensor t) {
  Value* v = GetOrAddValue(name);
  v->dtype = t.dtype();
  v->shape = Shape::Static(t.dims());
  v->initializer = std::make_shared<Tensor>(std::move(t));
  return v;
}

Node* Graph::AddNode(const std::string& op_type, const std::vector<Value*>& inputs, const std::vector<Value*>& outputs,
                     const std::string& name) {
  nodes_.push_back(std::make_unique<Node>());
  Node* n = nodes_.back().get();
  n->op_type = op_type;
  n->name = name;
  n->opset = OpsetOf("");
  n->inputs = inputs;
  n->outputs = outputs;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]) inputs[i]->uses.push_back({n, static_cast<int>(i)});
  for (size_t i = 0; i < outputs.size(); ++i) {
    Value* o = outputs[i];
    if (!o) continue;
    if (o->producer)
      throw Error("value '" + o->name + "' is produced by two nodes ('" + o->producer->name + "' and '" + name + "')");
    o->producer = n;
    o->producer_output = static_cast<int>(i);
  }
  return n;
}

void Graph::MoveNodeBefore(Node* n, const Node* anchor) {
  auto find = [&](const Node* x) {
    return std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& p) { return p.get() == x; });
  };
  auto from = find(n);
  if (from == nodes_.end() || find(anchor) == nodes_.end()) throw Error("MoveNodeBefore: node not in this graph");
  if (n == anchor) return;
  std::unique_ptr<Node> owned = std::move(*from);
  nodes_.erase(from);
  nodes_.insert(find(anchor), std::move(owned));
}

void Graph::RemoveNode(Node* n) { RemoveNodes({n}); }

void Graph::DetachNode(Node* n) {
  for (Value* in : n->inputs) {
    if (!in) continue;
    auto& u = in->uses;
    u.erase(std::remove_if(u.begin(), u.end(), [&](const Use& x) { return x.node == n; }), u.end());
  }
  for (Value* o : n->outputs)
    if (o && o->producer == n) {
      o->producer = nullptr;
      o->producer_output = -1;
    }
}

void Graph::OrderNodes(const std::vector<const Node*>& order) {
  if (order.size() != nodes_.size()) throw Error("OrderNodes: the order does not list every node once");
  std::unordered_map<const Node*, size_t> at;
  for (size_t i = 0; i < order.size(); ++i) at[order[i]] = i;
  std::vector<std::unique_ptr<Node>> sorted(nodes_.size());
  for (auto& p : nodes_) {
    auto it = at.find(p.get());
    if (it == at.end() || sorted[it->second]) throw Error("OrderNodes: the order does not list every node once");
    sorted[it->second] = std::move(p);
  }
  nodes_ = std::move(sorted);
}

void Graph::RemoveNodes(const std::vector<Node*>& ns) {
  for (Node* n : ns) DetachNode(n);
  const std::unordered_set<const Node*> gone(ns.begin(), ns.end());
  nodes_.erase(std::remove_if(nodes_.begin(), nodes_.end(), [&](const auto& p) { return gone.count(p.get()) > 0; }),
               nodes_.end());
}

void Graph::SetInput(Node* n, int i, Value* v) {
  if (i >= static_cast<int>(n->inputs.size())) n->inputs.resize(i + 1, nullptr);
  if (Value* old = n->inputs[i]) {
    auto& u = old->uses;
    for (auto it = u.begin(); it != u.end(); ++it)
      if (it->node == n && it->input_index == i) {
        u.erase(it);
        break;
      }
  }
  n->inputs[i] = v;
  if (v) v->uses.push_back({n, i});
}

void Graph::ReplaceAllUses(Value* from, Value* to) {
  auto uses = from->uses;
  for (const Use& u : uses) SetInput(u.node, u.input_index, to);
  for (auto& o : outputs)
    if (o == from) o = to;
}

std::vector<Node*> Graph::TopologicalOrder() const {
  const size_t n = nodes_.size();
  std::unordered_map<const Node*, size_t> index;
  index.reserve(n);
  for (size_t i = 0; i < n; ++i) index[nodes_[i].get()] = i;
  // Edges producer -> consumer in compressed rows (one allocation, not one vector per node).
  std::vector<int> pending(n, 0);
  std::vector<size_t> first(n + 1, 0), producer_of;
  for (size_t i = 0; i < n; ++i)
    for (Value* in : nodes_[i]->inputs) {
      if (!in || !in->producer) continue;
      auto it = index.find(in->producer);
      if (it == index.end()) continue;
      producer_of.push_back(it->second);
      ++first[it->second + 1];
      ++pending[i];
    }
  for (size_t i = 0; i < n; ++i) first[i + 1] += first[i];
  std::vector<size_t> succ(producer_of.size()), fill(first.begin(), first.end() - 1);
  size_t e = 0;
  for (size_t i = 0; i < n; ++i)
    for (Value* in : nodes_[i]->inputs) {
      if (!in || !in->producer || !index.count(in->producer)) continue;
      succ[fill[producer_of[e++]]++] = i;
    }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<Node*> order;
  order.reserve(n);
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(nodes_[i].get());
    for (size_t k = first[i]; k < first[i + 1]; ++k)
      if (--pending[succ[k]] == 0) ready.push(succ[k]);
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (pending[i] > 0) throw Error("graph has a cycle through " + nodes_[i]->Describe());
  }
  return order;
}

int Graph::OpsetOf(const std::string& domain) const {
  auto it = opset_imports.find(domain);
  if (it == opset_imports.end() && domain == "ai.onnx") it = opset_imports.find("");
  return it == opset_imports.end() ? 0 : it->second;
}

std::vector<Value*> Graph::RealInputs() const {
  std::vector<Value*> r;
  for (Value* v : inputs)
    if (!v->is_initializer()) r.push_back(v);
  return r;
}

}  // namespace ot
