#include "passes/loss_scaling.h"

#include <cmath>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "graph/ops/optimizer_layout.h"
#include "passes/optimizer_node.h"

namespace ot {

namespace {

// Option errors name the command-line flag that sets the value.
void Validate(const LossScaleOptions& o) {
  if (o.mode == LossScaleMode::kAuto) throw Error("loss-scaling: the mode 'auto' was not resolved (ResolveLossScale)");
  if (!(o.init > 0) || !std::isfinite(o.init) || o.init > 3.4e38)
    throw Error("--loss-scale-init / --loss-scale: the scale must be a finite float32 number > 0");
  if (!(o.factor >= 1) || !std::isfinite(o.factor)) throw Error("--loss-scale-factor must be a finite number >= 1");
  if (!(o.backoff > 0 && o.backoff <= 1)) throw Error("--loss-scale-backoff must be in (0, 1]");
  if (o.growth_interval < 1) throw Error("--loss-scale-growth-interval must be >= 1");
  if (o.overflows < 1) throw Error("--loss-scale-overflows must be >= 1");
  if (!(o.min_scale > 0) || !std::isfinite(o.min_scale)) throw Error("the minimum loss scale must be > 0");
}

}  // namespace

const char* LossScaleModeName(LossScaleMode m) {
  switch (m) {
    case LossScaleMode::kAuto:
      return "auto";
    case LossScaleMode::kNone:
      return "none";
    case LossScaleMode::kStatic:
      return "static";
    case LossScaleMode::kDynamic:
      return "dynamic";
  }
  return "?";
}

LossScaleMode ResolveLossScale(LossScaleMode m, DataType half) {
  if (m != LossScaleMode::kAuto) return m;
  return half == DataType::kFloat16 ? LossScaleMode::kDynamic : LossScaleMode::kNone;
}

bool LossScalingPass::Run(Graph& g) {
  Validate(opts_);
  if (opts_.mode == LossScaleMode::kNone) return false;
  Node* opt = FindOptimizerNode(g);
  if (!opt) throw Error("loss-scaling: the graph has no OptimizerUpdate node (run it on a step graph)");
  const OptimizerLayout l = OptimizerLayout::Of(*opt);
  if (l.scaling()) return false;  // scaled already
  if (l.k < 0) throw Error(opt->Describe() + ": unknown optimizer kind");
  if (!seed_ || g.FindValue(seed_->name) != seed_)
    throw Error("loss-scaling: the loss gradient seed is not a value of this graph");
  if (!IsFloat(seed_->dtype)) throw Error("loss-scaling: the loss gradient seed '" + seed_->name + "' is not float");
  if (static_cast<int>(opt->inputs.size()) != l.num_inputs() ||
      static_cast<int>(opt->outputs.size()) != l.num_outputs())
    throw Error("loss-scaling: " + opt->Describe() + " has operands its attributes do not describe");

  Tensor s(DataType::kFloat32, {});
  s.SetDouble(0, opts_.init);
  scale_ = g.AddInitializer(FreshName(g, "loss_scale"), std::move(s));
  Value* good = g.AddInitializer(FreshName(g, "loss_scale.good_steps"), Tensor(DataType::kInt64, {}));
  Value* bad = g.AddInitializer(FreshName(g, "loss_scale.bad_steps"), Tensor(DataType::kInt64, {}));

  // seed -> Mul(seed, S): the seed's consumers (the first backward node) read the scaled seed.
  Value* factor = scale_;
  if (seed_->dtype != DataType::kFloat32) {
    factor = g.AddValue(g.UniqueName("loss_scale.cast"));
    Node* c = g.AddNode("Cast", {scale_}, {factor}, g.UniqueName("loss_scaling/Cast"));
    c->attrs["to"] = Attribute::Int(static_cast<int64_t>(seed_->dtype));
    InferNode(*c);
  }
  Value* scaled = g.AddValue(g.UniqueName(seed_->name + ".scaled"));
  g.ReplaceAllUses(seed_, scaled);
  Node* mul = g.AddNode("Mul", {seed_, factor}, {scaled}, g.UniqueName("loss_scaling/Mul"));
  InferNode(*mul);

  opt->attrs["loss_scaling"] = Attribute::String(LossScaleModeName(opts_.mode));
  opt->attrs["growth_factor"] = Attribute::Float(static_cast<float>(opts_.factor));
  opt->attrs["backoff_factor"] = Attribute::Float(static_cast<float>(opts_.backoff));
  opt->attrs["growth_interval"] = Attribute::Int(opts_.growth_interval);
  opt->attrs["overflows_to_backoff"] = Attribute::Int(opts_.overflows);
  opt->attrs["min_scale"] = Attribute::Float(static_cast<float>(opts_.min_scale));
  // Inputs: appended (the scale group is the last input group). Outputs: after the half copies, before stats.
  const int in_pos = l.scale_in();
  g.SetInput(opt, in_pos, scale_);
  g.SetInput(opt, in_pos + 1, good);
  g.SetInput(opt, in_pos + 2, bad);
  scale_next_ = g.AddValue(FreshName(g, scale_->name + ".next"));
  Value* good_next = g.AddValue(FreshName(g, good->name + ".next"));
  Value* bad_next = g.AddValue(FreshName(g, bad->name + ".next"));
  InsertOutputs(opt, l.scale_out(), {scale_next_, good_next, bad_next});
  InferNode(*opt);
  g.update_bindings.push_back({scale_, scale_next_});
  g.update_bindings.push_back({good, good_next});
  g.update_bindings.push_back({bad, bad_next});
  return true;
}

bool EnableOptimizerStats(Graph& g) {
  Node* opt = FindOptimizerNode(g);
  if (!opt) return false;
  const OptimizerLayout l = OptimizerLayout::Of(*opt);
  if (l.stats) return false;
  Value* norm = g.AddValue(FreshName(g, "param_norm"));
  Value* zeros = g.AddValue(FreshName(g, "zero_grad_fraction"));
  InsertOutputs(opt, l.param_norm_out(), {norm, zeros});  // before the master shard, if any
  opt->attrs["stats"] = Attribute::Int(1);
  InferNode(*opt);
  g.outputs.push_back(norm);
  g.outputs.push_back(zeros);
  return true;
}

}  // namespace ot
