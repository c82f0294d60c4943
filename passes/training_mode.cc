#include "passes/training_mode.h"

#include <algorithm>

#include "graph/error.h"
#include "graph/op_registry.h"

namespace ot {

namespace {

void SetOutput(Node* n, int i, Value* v) {
  if (i >= static_cast<int>(n->outputs.size())) n->outputs.resize(i + 1, nullptr);
  n->outputs[i] = v;
  v->producer = n;
  v->producer_output = i;
}

// Drops BN output i (>= 1) for inference: it must not be consumed; it stops being a graph output.
void DropOutput(Graph& g, Node* n, int i) {
  Value* v = n->outputs[i];
  if (!v) return;
  if (!v->uses.empty())
    throw Error(n->Describe() + ": output '" + v->name + "' (training statistics) is used by " +
                v->uses.front().node->Describe() + ", so the node cannot be switched to inference mode");
  g.outputs.erase(std::remove(g.outputs.begin(), g.outputs.end(), v), g.outputs.end());
  v->producer = nullptr;
  v->producer_output = -1;
  n->outputs[i] = nullptr;
}

Value* BoolConstant(Graph& g, bool b) {
  const std::string name = b ? "training_mode.true" : "training_mode.false";
  if (Value* v = g.FindValue(name); v && v->initializer) return v;
  Tensor t(DataType::kBool, {});
  t.SetDouble(0, b ? 1 : 0);
  return g.AddInitializer(g.FindValue(name) ? g.UniqueName(name) : name, std::move(t));
}

bool IsBound(const Graph& g, const Value* state) {
  for (const auto& b : g.update_bindings)
    if (b.state == state) return true;
  return false;
}

bool BatchNormTraining(Graph& g, Node* n) {
  bool changed = false;
  if (n->opset >= 14) {
    changed = n->attr_int("training_mode", 0) != 1;
    n->attrs["training_mode"] = Attribute::Int(1);
  } else if (n->opset < 7) {
    changed = n->attr_int("is_test", 0) != 0;
    n->attrs["is_test"] = Attribute::Int(0);
  }
  if (n->opset < 6) return changed;  // opset 1-5: consumed_inputs era; statistics outputs left as they are
  for (int i = 1; i <= 2; ++i) {
    if (!n->has_output(i)) {
      Value* stat = n->inputs[i + 2];
      SetOutput(n, i, g.AddValue(g.UniqueName((stat ? stat->name : n->name) + ".next")));
      changed = true;
    }
    Value* state = n->inputs[i + 2];
    if (state && state->initializer && !IsBound(g, state)) {
      g.update_bindings.push_back({state, n->outputs[i]});
      changed = true;
    }
  }
  return changed;
}

bool BatchNormInference(Graph& g, Node* n) {
  bool changed = false;
  if (n->opset >= 14) {
    changed = n->attr_int("training_mode", 0) != 0;
    n->attrs["training_mode"] = Attribute::Int(0);
  } else if (n->opset < 7) {
    changed = n->attr_int("is_test", 0) != 1;
    n->attrs["is_test"] = Attribute::Int(1);
  }
  for (int i = 1; i < static_cast<int>(n->outputs.size()); ++i)
    if (n->outputs[i]) {
      DropOutput(g, n, i);
      changed = true;
    }
  n->outputs.resize(1);
  return changed;
}

bool DropoutMode(Graph& g, Node* n, bool training) {
  if (n->opset <= 6) {
    const int64_t want = training ? 0 : 1;
    const bool changed = n->attr_int("is_test", 0) != want;
    n->attrs["is_test"] = Attribute::Int(want);
    return changed;
  }
  if (n->opset < 12) return false;
  Value* cur = n->has_input(2) ? n->inputs[2] : nullptr;
  if (cur && cur->initializer && cur->initializer->numel() == 1 && (cur->initializer->GetDouble(0) != 0) == training)
    return false;
  if (!cur && !training) return false;
  if (!n->has_input(1) && training) {
    // The ratio is an optional input before training_mode; absent means 0.5, keep it that way.
    Tensor r(DataType::kFloat32, {});
    r.SetDouble(0, 0.5);
    g.SetInput(n, 1, g.AddInitializer(g.UniqueName(n->name + ".ratio"), std::move(r)));
  }
  g.SetInput(n, 2, BoolConstant(g, training));
  return true;
}

// A training-mode Dropout (opset >= 12) whose ratio is a constant 0 passes X through (Y = X, an all-true mask, a scale
// of 1): where nobody reads its mask it becomes an Identity, so neither its copy and mask nor its gradient's mask
// multiply run. Models exported with dropout switched off (p = 0) keep their Dropout nodes in training mode.
bool ZeroRatioDropoutToIdentity(Graph& g, Node* n) {
  if (n->opset < 12 || !n->has_input(1) || !n->has_input(2)) return false;
  auto scalar = [](const Value* v) -> const Tensor* {
    if (v->initializer && v->initializer->numel() == 1) return v->initializer.get();
    if (v->producer && v->producer->op_type == "Constant" && v->producer->attr("value") &&
        v->producer->attr("value")->t.numel() == 1)
      return &v->producer->attr("value")->t;
    return nullptr;
  };
  const Tensor* ratio = scalar(n->inputs[1]);
  const Tensor* mode = scalar(n->inputs[2]);
  if (!ratio || !mode || ratio->GetDouble(0) != 0 || mode->GetDouble(0) == 0) return false;
  if (n->has_output(1)) {
    Value* mask = n->outputs[1];
    if (!mask->uses.empty() || std::find(g.outputs.begin(), g.outputs.end(), mask) != g.outputs.end()) return false;
    mask->producer = nullptr;
    mask->producer_output = -1;
  }
  n->outputs.resize(1);
  for (int i = static_cast<int>(n->inputs.size()) - 1; i >= 1; --i) g.SetInput(n, i, nullptr);
  n->inputs.resize(1);
  n->op_type = "Identity";
  n->attrs.clear();
  return true;
}

}  // namespace

bool TrainingModePass::Run(Graph& g) {
  bool changed = false;
  for (Node* n : g.TopologicalOrder()) {
    if (!n->domain.empty() && n->domain != "ai.onnx") continue;
    if (n->op_type == "BatchNormalization")
      changed |= training_ ? BatchNormTraining(g, n) : BatchNormInference(g, n);
    else if (n->op_type == "Dropout")
      changed |= DropoutMode(g, n, training_) | (training_ && ZeroRatioDropoutToIdentity(g, n));
  }
  // New outputs get their types; the whole graph, since an imported model may not have been inferred yet.
  if (changed) InferShapes(g);
  return changed;
}

}  // namespace ot
