#include "passes/optimizer.h"

#include <algorithm>
#include <cmath>

#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/ops/optimizer_layout.h"
#include "graph/ops/optimizer_shard.h"
#include "kernel_common/optim_math.h"

namespace ot {

namespace {
int StatesPerParam(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd:
      return 0;
    case OptimizerKind::kMomentum:
    case OptimizerKind::kNesterov:
      return 1;
    default:
      return 2;
  }
}
}  // namespace

OptimizerKind ParseOptimizerKind(const std::string& s) {
  OptimizerKind k;
  if (OptimizerKindOf(s, &k)) return k;
  throw Error("--optimizer: unknown optimizer '" + s + "' (choose sgd, momentum, nesterov, adam, adamw or lamb)");
}

const char* OptimizerKindName(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kMomentum:
      return "momentum";
    case OptimizerKind::kNesterov:
      return "nesterov";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdamW:
      return "adamw";
    case OptimizerKind::kLamb:
      return "lamb";
  }
  return "?";
}

int ParseLrSchedule(const std::string& s) {
  if (s.empty() || s == "constant") return 0;
  if (s == "linear") return 1;
  if (s == "cosine") return 2;
  throw Error("unknown --lr-schedule '" + s + "' (choices: constant, linear, cosine)");
}

double ScheduledLr(const OptimizerOptions& o, int64_t done) {
  return o.lr * LrScheduleFactor(o.lr_schedule, done, o.warmup, o.total_steps);
}

double OptimizerOptions::Eps() const {
  if (eps) return *eps;
  return kind == OptimizerKind::kLamb ? 1e-6 : 1e-8;
}

double OptimizerOptions::WeightDecay() const {
  if (weight_decay) return *weight_decay;
  return kind == OptimizerKind::kAdamW || kind == OptimizerKind::kLamb ? 0.01 : 0.0;
}

bool OptimizerPass::Run(Graph& g) {
  if (params_.size() != grads_.size())
    throw Error("optimizer: " + std::to_string(params_.size()) + " parameters but " + std::to_string(grads_.size()) +
                " gradients");
  if (params_.empty()) return false;
  if (!(opts_.lr >= 0) || !std::isfinite(opts_.lr)) throw Error("--lr must be a finite number >= 0");
  if (!(opts_.clip_grad_norm >= 0)) throw Error("--clip-grad-norm must be >= 0");
  if (!(opts_.WeightDecay() >= 0)) throw Error("--weight-decay must be >= 0");
  if (opts_.accumulate < 1) throw Error("--grad-accum must be >= 1");
  if (opts_.warmup < 0) throw Error("--warmup must be >= 0");
  const int k = StatesPerParam(opts_.kind);
  const int n = static_cast<int>(params_.size());

  Tensor lr_t(DataType::kFloat64, {});
  lr_t.SetDouble(0, opts_.lr);
  lr_ = g.AddInitializer(g.FindValue("optimizer.lr") ? g.UniqueName("optimizer.lr") : "optimizer.lr", std::move(lr_t));
  step_ = g.AddInitializer(g.FindValue("optimizer.step") ? g.UniqueName("optimizer.step") : "optimizer.step",
                           Tensor(DataType::kInt64, {}));
  auto fresh = [&](const std::string& name) { return g.FindValue(name) ? g.UniqueName(name) : name; };

  static const char* kStateNames[2][2] = {{"momentum_buffer", ""}, {"exp_avg", "exp_avg_sq"}};
  std::vector<Value*> inputs = {lr_, step_};
  std::vector<Value*> states, outputs;
  for (Value* p : params_) {
    if (!p || !p->initializer)
      throw Error("optimizer: parameter '" + (p ? p->name : std::string("?")) + "' is not an initializer");
    inputs.push_back(p);
  }
  for (Value* gr : grads_) inputs.push_back(gr);
  const bool shard = opts_.shard && opts_.world > 1;
  std::vector<int64_t> shard_groups;
  if (shard) {
    if (opts_.kind == OptimizerKind::kLamb)
      throw Error(
          "--shard-optimizer: LAMB's trust ratio needs each parameter's whole update; choose another optimizer");
    std::vector<int64_t> numel;
    for (Value* p : params_) {
      if (p->initializer->dtype() != DataType::kFloat32)
        throw Error("--shard-optimizer: parameter '" + p->name + "' is " + DataTypeName(p->initializer->dtype()) +
                    "; a sharded optimizer updates float32 parameters");
      numel.push_back(p->initializer->numel());
    }
    std::vector<std::vector<size_t>> groups = opts_.shard_groups;
    if (groups.empty()) {
      groups.emplace_back();
      for (size_t i = 0; i < params_.size(); ++i) groups.back().push_back(i);
    }
    shard_groups = OptimizerShards::Encode(groups);
    const OptimizerShards shards(opts_.world, shard_groups, numel);  // validates the groups
    for (int j = 0; j < k; ++j) {
      Value* s = g.AddInitializer(fresh(std::string("optimizer.shard.") + kStateNames[k - 1][j]),
                                  Tensor(DataType::kFloat32, {shards.size()}));
      inputs.push_back(s);
      states.push_back(s);
    }
  }
  for (int j = 0; j < k && !shard; ++j)
    for (Value* p : params_) {
      Tensor z(p->initializer->dtype(), p->initializer->dims());
      Value* s = g.AddInitializer(fresh(p->name + "." + kStateNames[k - 1][j]), std::move(z));
      inputs.push_back(s);
      states.push_back(s);
    }
  for (Value* p : params_) outputs.push_back(g.AddValue(fresh(p->name + ".next")));
  for (Value* s : states) outputs.push_back(g.AddValue(fresh(s->name + ".next")));
  Value* step_next = g.AddValue(fresh("optimizer.step.next"));
  grad_norm_ = g.AddValue(fresh("grad_norm"));
  skipped_ = g.AddValue(fresh("skipped"));
  outputs.push_back(step_next);
  outputs.push_back(grad_norm_);
  outputs.push_back(skipped_);
  std::vector<Value*> accum_states;  // micro-step counter, then the gradient sums
  if (opts_.accumulate > 1) {
    accum_states.push_back(g.AddInitializer(fresh("optimizer.micro_step"), Tensor(DataType::kInt64, {})));
    for (Value* p : params_)
      accum_states.push_back(
          g.AddInitializer(fresh(p->name + ".grad_accum"), Tensor(p->initializer->dtype(), p->initializer->dims())));
    for (Value* s : accum_states) {
      inputs.push_back(s);
      outputs.push_back(g.AddValue(fresh(s->name + ".next")));
    }
  }

  node_ = g.AddNode("OptimizerUpdate", inputs, outputs, g.UniqueName("optimizer/OptimizerUpdate"));
  node_->domain = kInternalDomain;
  node_->opset = 1;
  node_->attrs["kind"] = Attribute::String(OptimizerKindName(opts_.kind));
  node_->attrs["num_params"] = Attribute::Int(n);
  if (opts_.accumulate > 1) node_->attrs["accumulate"] = Attribute::Int(opts_.accumulate);
  if (opts_.accumulate > 1 && opts_.world > 1) node_->attrs["world"] = Attribute::Int(opts_.world);
  if (shard) {
    node_->attrs["shard_world"] = Attribute::Int(opts_.world);
    node_->attrs["shard_groups"] = Attribute::Ints(shard_groups);
  }
  if (opts_.lr_schedule != 0 || opts_.warmup > 0) {
    node_->attrs["lr_schedule"] = Attribute::Int(opts_.lr_schedule);
    node_->attrs["warmup"] = Attribute::Int(opts_.warmup);
    node_->attrs["total_steps"] = Attribute::Int(opts_.total_steps);
  }
  Tensor hp(DataType::kFloat64, {6});
  const double hv[6] = {opts_.beta1,         opts_.beta2,    opts_.Eps(),
                        opts_.WeightDecay(), opts_.momentum, opts_.clip_grad_norm};
  for (int i = 0; i < 6; ++i) hp.SetDouble(i, hv[i]);
  node_->attrs["hyperparameters"] = Attribute::TensorValue(std::move(hp));
  InferNode(*node_);

  for (int i = 0; i < n; ++i) g.update_bindings.push_back({params_[i], outputs[i]});
  for (size_t j = 0; j < states.size(); ++j) g.update_bindings.push_back({states[j], outputs[n + j]});
  g.update_bindings.push_back({step_, step_next});
  for (size_t j = 0; j < accum_states.size(); ++j)
    g.update_bindings.push_back({accum_states[j], outputs[n + static_cast<int>(states.size()) + 3 + j]});

  // The gradients are consumed here; they stop being outputs.
  g.outputs.erase(std::remove_if(g.outputs.begin(), g.outputs.end(),
                                 [&](Value* v) { return std::find(grads_.begin(), grads_.end(), v) != grads_.end(); }),
                  g.outputs.end());
  g.outputs.push_back(grad_norm_);
  g.outputs.push_back(skipped_);
  return true;
}

}  // namespace ot
