#include "training/sharded_state.h"

#include <cstring>
#include <map>

#include "dist/comm.h"
#include "graph/error.h"
#include "graph/ops/optimizer_layout.h"
#include "passes/optimizer_node.h"

namespace ot {

ShardedState::ShardedState(const Graph& step) {
  for (const auto& n : step.nodes()) {
    if (n->op_type != "OptimizerUpdate" || n->domain != kInternalDomain) continue;
    const OptimizerLayout l = OptimizerLayout::Of(*n);
    if (!l.sharded() || (l.k <= 0 && !l.shard_master)) return;
    const std::vector<std::string> names = n->attr_strings("master_names");
    std::map<int64_t, const Value*> half;  // parameter -> its half copy (state)
    for (int j = 0; j < l.m(); ++j)
      if (n->has_output(l.half_out(j))) half[l.half_params[j]] = BoundState(step, n->outputs[l.half_out(j)]);
    std::vector<int64_t> numel;
    for (int i = 0; i < l.n; ++i) {
      const Value* p = n->inputs[l.param_in(i)];
      Param q;
      if (p && p->initializer) {
        q.name = p->name;
        q.dims = p->initializer->dims();
      } else {  // only in the master shard: its half copy has its shape
        const Value* h = half.count(i) ? half[i] : nullptr;
        if (!h || !h->initializer || static_cast<int>(names.size()) != l.n)
          throw Error(n->Describe() + ": parameter " + std::to_string(i) + " has neither a value nor a half copy");
        q.name = names[static_cast<size_t>(i)];
        q.dims = h->initializer->dims();
        q.whole = false;
      }
      int64_t e = 1;
      for (int64_t d : q.dims) e *= d;
      numel.push_back(e);
      params_.push_back(std::move(q));
    }
    shards_ = OptimizerShards(static_cast<int>(l.shard_world), l.shard_groups, numel);
    const std::string prefix = "optimizer.shard.";
    for (int j = 0; j < l.k; ++j) {
      const Value* s = n->inputs[l.state_in(j, 0)];
      std::string suffix = s->name.rfind(prefix, 0) == 0 ? s->name.substr(prefix.size()) : s->name;
      states_.push_back({s, suffix});
    }
    if (l.shard_master) {
      master_ = n->inputs[l.master_in()];
      states_.push_back({master_, ""});
    }
  }
}

std::vector<std::pair<std::string, std::vector<int64_t>>> ShardedState::ShardOnlyParams() const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> r;
  for (const Param& p : params_)
    if (!p.whole) r.push_back({p.name, p.dims});
  return r;
}

const ShardedState::State* ShardedState::Find(const Value* v) const {
  for (const State& s : states_)
    if (s.value == v) return &s;
  return nullptr;
}

bool ShardedState::Has(const Value* state) const { return Find(state) != nullptr; }

std::vector<std::string> ShardedState::Names(const Value* state) const {
  std::vector<std::string> r;
  if (const State* s = Find(state))
    for (const Param& p : params_) r.push_back(Name(p, *s));
  return r;
}

std::vector<std::pair<std::string, Tensor>> ShardedState::Gather(const Value* state) const {
  const State* st = Find(state);
  if (!st) throw Error("'" + state->name + "' is not a sharded state");
  dist::Comm& world = dist::World();
  const int W = shards_.world(), rank = world.rank();
  if (world.size() != W)
    throw Error("the optimizer is sharded over " + std::to_string(W) + " ranks, this job has " +
                std::to_string(world.size()));
  const int64_t S = shards_.size();
  std::vector<float> blocks(static_cast<size_t>(S * W));
  std::memcpy(blocks.data() + rank * S, st->value->initializer->data<float>(), static_cast<size_t>(S) * 4);
  world.AllGatherBlocks(blocks.data(), S);
  // Per parameter; for the master weights only those without a state of their own.
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<int> at(params_.size(), -1);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (st->suffix.empty() && params_[i].whole) continue;
    at[i] = static_cast<int>(out.size());
    out.emplace_back(Name(params_[i], *st), Tensor(DataType::kFloat32, params_[i].dims));
  }
  for (int q = 0; q < W; ++q)
    for (const ShardSlice& s : shards_.Slices(q))
      if (at[static_cast<size_t>(s.param)] >= 0)
        std::memcpy(out[static_cast<size_t>(at[static_cast<size_t>(s.param)])].second.data<float>() + s.offset,
                    blocks.data() + q * S + s.at, static_cast<size_t>(s.len) * 4);
  return out;
}

std::string ShardedState::Scatter(const Value* state, const std::map<std::string, Tensor>& arrays,
                                  Tensor* shard) const {
  const State* st = Find(state);
  if (!st) return "'" + state->name + "' is not a sharded state";
  const std::vector<std::string> names = Names(state);
  for (size_t i = 0; i < params_.size(); ++i) {
    auto it = arrays.find(names[i]);
    if (it == arrays.end()) return "no array '" + names[i] + "'";
    const Tensor& t = it->second;
    if (t.dtype() != DataType::kFloat32 || t.dims() != params_[i].dims)
      return "array '" + names[i] + "' is " + DataTypeName(t.dtype()) + DimsToString(t.dims()) +
             ", the state is float32" + DimsToString(params_[i].dims);
  }
  *shard = Tensor(DataType::kFloat32, {shards_.size()});
  for (const ShardSlice& s : shards_.Slices(dist::World().rank()))
    std::memcpy(shard->data<float>() + s.at, arrays.at(names[static_cast<size_t>(s.param)]).data<float>() + s.offset,
                static_cast<size_t>(s.len) * 4);
  return "";
}

}  // namespace ot
