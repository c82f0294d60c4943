#include "graph/verifier.h"

#include <set>

#include "graph/error.h"

namespace ot {

void VerifyGraph(const Graph& g) {
  std::set<const Node*> nodes;
  for (const auto& n : g.nodes()) nodes.insert(n.get());
  std::set<const Value*> inputs(g.inputs.begin(), g.inputs.end());
  for (const auto& n : g.nodes()) {
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const Value* v = n->inputs[i];
      if (!v) continue;
      if (!v->producer && !v->is_initializer() && !inputs.count(v))
        throw Error(n->Describe() + ": input '" + v->name + "' is not defined by any node, input or initializer");
      if (v->producer && !nodes.count(v->producer))
        throw Error(n->Describe() + ": input '" + v->name + "' is produced by a node that is not in the graph");
      bool found = false;
      for (const Use& u : v->uses)
        if (u.node == n.get() && u.input_index == static_cast<int>(i)) found = true;
      if (!found) throw Error(n->Describe() + ": input '" + v->name + "' does not list this node among its uses");
    }
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      const Value* v = n->outputs[i];
      if (!v) continue;
      if (v->producer != n.get() || v->producer_output != static_cast<int>(i))
        throw Error(n->Describe() + ": output '" + v->name + "' does not name this node as its producer");
      if (v->is_initializer()) throw Error(n->Describe() + ": output '" + v->name + "' is also an initializer");
    }
  }
  for (const Value* v : g.outputs) {
    if (!v) throw Error("graph output is null");
    if (!v->producer && !v->is_initializer() && !inputs.count(v))
      throw Error("graph output '" + v->name + "' is not defined by any node, input or initializer");
  }
  (void)g.TopologicalOrder();  // throws on a cycle
}

}  // namespace ot
