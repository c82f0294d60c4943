#include "passes/optimizer_node.h"

#include "graph/error.h"
#include "graph/graph.h"

namespace ot {

Node* FindOptimizerNode(const Graph& g) {
  Node* found = nullptr;
  for (const auto& n : g.nodes()) {
    if (n->op_type != "OptimizerUpdate" || n->domain != kInternalDomain) continue;
    if (found)
      throw Error("the step graph has two OptimizerUpdate nodes ('" + found->name + "' and '" + n->name +
                  "'); one node updates every parameter");
    found = n.get();
  }
  return found;
}

void InsertOutputs(Node* n, int pos, const std::vector<Value*>& vs) {
  if (pos < 0 || pos > static_cast<int>(n->outputs.size()))
    throw Error(n->Describe() + ": output position " + std::to_string(pos) + " is out of range");
  for (Value* v : vs)
    if (v->producer) throw Error("value '" + v->name + "' already has a producer ('" + v->producer->name + "')");
  n->outputs.insert(n->outputs.begin() + pos, vs.begin(), vs.end());
  for (size_t i = pos; i < n->outputs.size(); ++i)
    if (Value* o = n->outputs[i]) {
      o->producer = n;
      o->producer_output = static_cast<int>(i);
    }
}

std::string FreshName(Graph& g, const std::string& name) { return g.FindValue(name) ? g.UniqueName(name) : name; }

Value* BoundState(const Graph& g, const Value* next) {
  for (const auto& ub : g.update_bindings)
    if (ub.next == next) return ub.state;
  return nullptr;
}

}  // namespace ot
