#include "graph/printer.h"

#include <algorithm>
#include <sstream>

namespace ot {

namespace {
std::string Type(const Value* v) { return DataTypeName(v->dtype) + v->shape.ToString(); }
}  // namespace

std::string PrintGraph(const Graph& g) {
  std::ostringstream s;
  s << "graph " << (g.name.empty() ? "main" : g.name) << " (opsets:";
  for (const auto& [d, v] : g.opset_imports) s << " " << (d.empty() ? "ai.onnx" : d) << "=" << v;
  s << ")\n";
  for (const Value* v : g.inputs)
    s << "  input %" << v->name << ": " << Type(v) << (v->is_initializer() ? " (initializer)" : "") << "\n";
  for (const auto& v : g.values())
    if (v->is_initializer() && std::find(g.inputs.begin(), g.inputs.end(), v.get()) == g.inputs.end())
      s << "  init %" << v->name << ": " << Type(v.get()) << "\n";
  for (const Node* n : g.TopologicalOrder()) {
    s << "  ";
    bool first = true;
    for (const Value* o : n->outputs) {
      s << (first ? "" : ", ");
      first = false;
      if (o)
        s << "%" << o->name << ": " << Type(o);
      else
        s << "_";
    }
    s << " = " << (n->domain.empty() ? "" : n->domain + ".") << n->op_type << "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      s << (i ? ", " : "");
      s << (n->inputs[i] ? "%" + n->inputs[i]->name : std::string("_"));
    }
    s << ")";
    if (!n->attrs.empty()) {
      s << " {";
      bool f = true;
      for (const auto& [k, a] : n->attrs) {
        s << (f ? "" : ", ") << k << "=" << a.ToString();
        f = false;
      }
      s << "}";
    }
    if (!n->name.empty()) s << "   # " << n->name;
    s << "\n";
  }
  s << "  return";
  for (size_t i = 0; i < g.outputs.size(); ++i) s << (i ? ", %" : " %") << g.outputs[i]->name;
  s << "\n";
  return s.str();
}

}  // namespace ot
