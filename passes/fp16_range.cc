#include "passes/fp16_range.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {
constexpr double kHalfMax = 65504.0;
constexpr double kHalfMinNormal = 6.103515625e-05;            // 2^-14
constexpr double kHalfMinSubnormal = 5.9604644775390625e-08;  // 2^-24

std::string Num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}
}  // namespace

bool Fp16RangePass::Run(Graph& g) {
  changes_.clear();
  if (!(opts_.infinity > 0) || opts_.infinity > kHalfMax)
    throw Error("--fp16-infinity must be in (0, 65504], got " + Num(opts_.infinity));
  if (!(opts_.epsilon >= kHalfMinSubnormal) || opts_.epsilon > 1)
    throw Error("--fp16-epsilon must be in [2^-24, 1] (fp16 cannot hold a smaller positive number), got " +
                Num(opts_.epsilon));
  // Raised: what is below fp16's normal range and below the chosen floor (the default 1e-5 is itself a subnormal
  // that fp16 holds to 3 digits; 1e-12 would flush to zero).
  const double floor = std::min(kHalfMinNormal, opts_.epsilon);
  std::unordered_set<const Value*> state;
  for (const auto& b : g.update_bindings) state.insert(b.state);
  const OpRegistry& reg = OpRegistry::Global();
  bool changed = false;
  for (Node* n : g.TopologicalOrder()) {
    const bool is_cast = fuse::IsOp(n, "Cast");
    if (is_cast && n->attr_int("to", 0) == static_cast<int64_t>(DataType::kFloat16) && n->inputs[0]) {
      Value* c = n->inputs[0];
      const Tensor* t = nullptr;
      if (c->is_initializer() && !state.count(c))
        t = c->initializer.get();
      else if (c->producer && c->producer->op_type == "Constant" && c->producer->has_attr("value"))
        t = &c->producer->attr("value")->t;
      if (!t || !IsFloat(t->dtype()) || t->dtype() == DataType::kFloat16) continue;
      const int64_t count = t->numel();
      int64_t big = 0;
      bool tiny = false;
      for (int64_t i = 0; i < count; ++i) {
        const double v = t->GetDouble(i);
        if (std::isfinite(v) && std::fabs(v) > kHalfMax) ++big;
      }
      if (count == 1) {
        const double v = t->GetDouble(0);
        bool feeds_add = false;
        for (const Use& u : n->outputs[0]->uses)
          feeds_add = feeds_add || ((u.node->op_type == "Add" || u.node->op_type == "Sub") && u.node->domain.empty());
        tiny = v != 0 && std::fabs(v) < floor && feeds_add;
      }
      if (!big && !tiny) continue;
      Tensor fixed(t->dtype(), t->dims());
      for (int64_t i = 0; i < count; ++i) {
        double v = t->GetDouble(i);
        if (std::isfinite(v) && std::fabs(v) > kHalfMax)
          v = std::copysign(opts_.infinity, v);
        else if (tiny)
          v = std::copysign(opts_.epsilon, v);
        fixed.SetDouble(i, v);
      }
      Value* nv = g.AddInitializer(g.UniqueName(c->name + ".fp16_range"), std::move(fixed));
      g.SetInput(n, 0, nv);
      InferNode(*n);
      changed = true;
      if (big)
        changes_.push_back(n->Describe() + ": constant '" + c->name + "': " + std::to_string(big) +
                           " value(s) beyond the fp16 range -> +-" + Num(opts_.infinity));
      else
        changes_.push_back(n->Describe() + ": constant '" + c->name + "' " + Num(t->GetDouble(0)) +
                           " is below fp16's normal range -> " + Num(opts_.epsilon));
      continue;
    }
    // Epsilon attributes of fp16 nodes that compute in fp16.
    const Attribute* eps = n->attr("epsilon");
    if (!eps || eps->kind != Attribute::Kind::kFloat || !(eps->f < floor)) continue;
    bool f16 = false;
    for (const Value* v : n->inputs) f16 = f16 || (v && v->dtype == DataType::kFloat16);
    if (!f16) continue;
    const OpSchema* s = reg.Find(n->domain, n->op_type);
    if (s && s->amp_fp32_inside) continue;
    const double old = eps->f;
    n->attrs["epsilon"] = Attribute::Float(static_cast<float>(opts_.epsilon));
    changed = true;
    changes_.push_back(n->Describe() + ": epsilon " + Num(old) + " is below fp16's normal range -> " +
                       Num(opts_.epsilon));
  }
  return changed;
}

}  // namespace ot
