#include "passes/shard_masters.h"

#include <algorithm>
#include <cstring>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "graph/ops/optimizer_layout.h"
#include "graph/ops/optimizer_shard.h"
#include "passes/optimizer_node.h"

namespace ot {

bool ShardMastersPass::Run(Graph& g) {
  Node* opt = FindOptimizerNode(g);
  if (!opt) return false;
  const OptimizerLayout l = OptimizerLayout::Of(*opt);
  if (!l.sharded() || l.m() == 0 || l.shard_master) return false;
  if (rank_ < 0 || rank_ >= l.shard_world)
    throw Error("shard_masters: rank " + std::to_string(rank_) + " of a world of " + std::to_string(l.shard_world));
  std::vector<Value*> params(l.n);
  std::vector<int64_t> numel(l.n);
  std::vector<std::string> names(l.n);
  for (int i = 0; i < l.n; ++i) {
    Value* p = opt->inputs[l.param_in(i)];
    if (!p || !p->initializer || p->initializer->dtype() != DataType::kFloat32)
      throw Error("shard_masters: parameter " + std::to_string(i) + " of " + opt->Describe() +
                  " is not a float32 initializer");
    params[i] = p;
    numel[i] = p->initializer->numel();
    names[i] = p->name;
  }
  const OptimizerShards shards(static_cast<int>(l.shard_world), l.shard_groups, numel);

  Tensor master(DataType::kFloat32, {shards.size()});
  for (const ShardSlice& s : shards.Slices(rank_))
    std::memcpy(master.data<float>() + s.at, params[s.param]->initializer->data<float>() + s.offset,
                static_cast<size_t>(s.len) * 4);
  Value* m = g.AddInitializer(FreshName(g, "optimizer.shard.master"), std::move(master));
  Value* m_next = g.AddValue(FreshName(g, m->name + ".next"));
  g.SetInput(opt, l.master_in(), m);
  InsertOutputs(opt, l.master_out(), {m_next});
  g.update_bindings.push_back({m, m_next});
  opt->attrs["shard_master"] = Attribute::Int(1);
  opt->attrs["master_names"] = Attribute::Strings(names);

  // Masters that only the update reads: gone from the step.
  for (int64_t i : l.half_params) {
    Value* p = params[static_cast<size_t>(i)];
    const bool others = std::any_of(p->uses.begin(), p->uses.end(), [&](const Use& u) { return u.node != opt; });
    if (others || std::count(g.outputs.begin(), g.outputs.end(), p)) continue;
    Value* next = opt->outputs[l.param_out(static_cast<int>(i))];
    g.SetInput(opt, l.param_in(static_cast<int>(i)), nullptr);
    if (next) {
      next->producer = nullptr;
      opt->outputs[l.param_out(static_cast<int>(i))] = nullptr;
      g.outputs.erase(std::remove(g.outputs.begin(), g.outputs.end(), next), g.outputs.end());
    }
    auto& b = g.update_bindings;
    b.erase(std::remove_if(b.begin(), b.end(), [&](const Graph::UpdateBinding& u) { return u.state == p; }), b.end());
    g.inputs.erase(std::remove(g.inputs.begin(), g.inputs.end(), p), g.inputs.end());
    p->initializer = nullptr;
  }
  InferNode(*opt);
  return true;
}

}  // namespace ot
