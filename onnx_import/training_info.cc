#include "onnx_import/training_info.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "graph/error.h"

namespace ot {

namespace {

bool Contains(const std::vector<Value*>& vs, const Value* v) { return std::find(vs.begin(), vs.end(), v) != vs.end(); }

void SetMetadata(Graph& g, const std::string& key, const std::string& value) {
  for (auto& kv : g.metadata_props)
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  g.metadata_props.emplace_back(key, value);
}

// Copies `n` into `dst` with its operands mapped by `map`.
template <typename Map>
Node* CopyNode(Graph& dst, const Node& n, Map&& map) {
  std::vector<Value*> ins, outs;
  for (const Value* v : n.inputs) ins.push_back(v ? map(v) : nullptr);
  for (const Value* v : n.outputs) outs.push_back(v ? map(v) : nullptr);
  Node* c = dst.AddNode(n.op_type, ins, outs, n.name);
  c->domain = n.domain;
  c->opset = n.opset;
  c->doc_string = n.doc_string;
  c->attrs = n.attrs;
  return c;
}

}  // namespace

std::string MetadataValue(const Graph& g, const std::string& key) {
  for (const auto& kv : g.metadata_props)
    if (kv.first == key) return kv.second;
  return "";
}

StepOutputNames AttachStepGraph(Graph& model, const Graph& step, const StepOutputNames& names) {
  auto alg = std::make_unique<Graph>();
  alg->name = step.name.empty() ? "training_step" : step.name + "_step";
  alg->ir_version = model.ir_version;
  alg->opset_imports = step.opset_imports;
  std::map<const Value*, Value*> vm;
  auto taken = [&](const std::string& n) { return model.FindValue(n) || step.FindValue(n) || alg->FindValue(n); };
  for (const auto& up : step.values()) {
    const Value* v = up.get();
    Value* nv = nullptr;
    if (v->is_initializer()) {
      // A state or constant of the step: the main graph's initializer of that name (added when missing).
      Value* mv = model.FindValue(v->name);
      if (!mv) {
        mv = model.AddInitializer(v->name, *v->initializer);
        mv->initializer = v->initializer;  // the same tensor, not a copy
      } else if (!mv->is_initializer()) {
        throw Error("step graph: initializer '" + v->name + "' has the name of a main-graph value that is not one");
      }
      nv = alg->AddValue(v->name);
      nv->initializer = mv->initializer;
    } else if (!v->producer && model.FindValue(v->name)) {
      nv = alg->AddValue(v->name);  // a main-graph input: referenced, not declared again
    } else {
      std::string name = v->name;
      if (name.empty() || model.FindValue(name)) {
        std::string base = (name.empty() ? "value" : name) + "__step";
        name = base;
        for (int k = 1; taken(name); ++k) name = base + std::to_string(k);
      }
      nv = alg->AddValue(name);
      if (!v->producer && Contains(step.inputs, v)) alg->inputs.push_back(nv);
    }
    nv->dtype = v->dtype;
    nv->shape = v->shape;
    vm[v] = nv;
  }
  auto map = [&](const Value* v) { return vm.at(v); };
  for (const Node* n : step.TopologicalOrder()) CopyNode(*alg, *n, map);
  for (const Value* v : step.outputs) alg->outputs.push_back(map(v));
  for (const auto& b : step.update_bindings) {
    if (!b.state->is_initializer())
      throw Error("step graph: the state '" + b.state->name + "' of an update binding is not an initializer");
    Value* next = map(b.next);
    if (!Contains(alg->outputs, next)) alg->outputs.push_back(next);  // ONNX: bound values are outputs
    alg->update_bindings.push_back({map(b.state), next});
  }
  StepOutputNames out;
  auto rename = [&](const std::string& n, const char* key) {
    if (n.empty()) return std::string();
    const Value* v = step.FindValue(n);
    if (!v) throw Error("step graph: its " + std::string(key) + " output '" + n + "' is not a value of it");
    Value* nv = map(v);
    if (!Contains(alg->outputs, nv)) alg->outputs.push_back(nv);
    SetMetadata(model, key, nv->name);
    return nv->name;
  };
  out.loss = rename(names.loss, kLossKey);
  out.grad_norm = rename(names.grad_norm, kGradNormKey);
  out.skipped = rename(names.skipped, kSkippedKey);
  for (auto [n, key, dst] : {std::tuple{&names.lr, kLrKey, &out.lr}, std::tuple{&names.step, kStepKey, &out.step}}) {
    if (n->empty()) continue;
    const Value* v = model.FindValue(*n);
    if (!v || !v->is_initializer())
      throw Error("step graph: its " + std::string(key) + " state '" + *n + "' is not an initializer");
    SetMetadata(model, key, *n);
    *dst = *n;
  }
  for (const auto& [d, v] : alg->opset_imports)
    if (!model.opset_imports.count(d)) model.opset_imports[d] = v;
  for (const auto& n : alg->nodes()) {
    const std::string d = n->domain == "ai.onnx" ? "" : n->domain;
    if (!model.opset_imports.count(d)) model.opset_imports[d] = n->opset > 0 ? n->opset : 1;
  }
  model.training_info.clear();
  Graph::TrainingInfo ti;
  ti.algorithm = std::move(alg);
  model.training_info.push_back(std::move(ti));
  return out;
}

std::unique_ptr<Graph> CombinedStepGraph(const Graph& model, StepOutputNames* names, const std::string& what) {
  if (model.training_info.empty()) throw Error(what + ": the model has no training_info");
  if (model.training_info.size() > 1)
    throw UnsupportedError(what + ": the model has " + std::to_string(model.training_info.size()) +
                           " training_info entries; only one is supported");
  const Graph::TrainingInfo& ti = model.training_info[0];
  if (!ti.algorithm || ti.algorithm->nodes().empty()) throw Error(what + ": training_info[0] has no algorithm graph");
  if (ti.initialization && !ti.initialization->nodes().empty())
    throw UnsupportedError(what +
                           ": training_info[0].initialization is not supported (the initializers are used as "
                           "they are)");
  const Graph& alg = *ti.algorithm;
  auto g = std::make_unique<Graph>();
  g->name = model.name;
  g->ir_version = model.ir_version;
  g->opset_imports = model.opset_imports;
  for (const auto& [d, v] : alg.opset_imports)
    if (!g->opset_imports.count(d)) g->opset_imports[d] = v;
  // Both graphs' values by name: the algorithm's references to the main graph become the main graph's values.
  auto import_values = [&](const Graph& src) {
    std::map<const Value*, Value*> vm;
    for (const auto& up : src.values()) {
      const Value* v = up.get();
      Value* nv = v->name.empty() ? g->AddValue("") : g->GetOrAddValue(v->name);
      if (nv->dtype == DataType::kUndefined) nv->dtype = v->dtype;
      if (!nv->shape.known_rank()) nv->shape = v->shape;
      if (v->initializer && !nv->initializer) nv->initializer = v->initializer;  // shared with `model`
      vm[v] = nv;
    }
    return vm;
  };
  const auto mm = import_values(model);
  for (const Value* v : model.inputs) g->inputs.push_back(mm.at(v));
  for (const Node* n : model.TopologicalOrder()) CopyNode(*g, *n, [&](const Value* v) { return mm.at(v); });
  const auto am = import_values(alg);
  for (const Value* v : alg.inputs)
    if (!Contains(g->inputs, am.at(v))) g->inputs.push_back(am.at(v));
  for (const Node* n : alg.TopologicalOrder()) CopyNode(*g, *n, [&](const Value* v) { return am.at(v); });
  for (const Value* v : alg.outputs) g->outputs.push_back(am.at(v));
  for (const auto& b : alg.update_bindings) {
    Value* next = am.at(b.next);
    if (!Contains(g->outputs, next)) g->outputs.push_back(next);
    g->update_bindings.push_back({am.at(b.state), next});
  }
  if (g->update_bindings.empty()) throw Error(what + ": training_info[0] has no update_binding (nothing to train)");
  if (names) {
    names->loss = MetadataValue(model, kLossKey);
    names->grad_norm = MetadataValue(model, kGradNormKey);
    names->skipped = MetadataValue(model, kSkippedKey);
    names->lr = MetadataValue(model, kLrKey);
    names->step = MetadataValue(model, kStepKey);
    for (const std::string* n : {&names->loss, &names->grad_norm, &names->skipped, &names->lr, &names->step})
      if (!n->empty() && !g->FindValue(*n))
        throw Error(what + ": metadata names the step output '" + *n + "', which the training step does not have");
  }
  return g;
}

}  // namespace ot
