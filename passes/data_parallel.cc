#include "passes/data_parallel.h"

#include <algorithm>
#include <map>
#include <string>

#include "graph/error.h"
#include "graph/graph.h"

namespace ot {

namespace {

// Data movement that autodiff appends to a gradient after the node that computes it (a weight used through a
// Transpose gets its gradient transposed back; Identity names it): emitted when autodiff reaches the forward's
// Transpose -- at the graph's start, so at the backward's end -- they would run last, holding every bucket back.
bool Movement(const Node* n) {
  static const char* kOps[] = {"Identity", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast"};
  if (!n->domain.empty()) return false;
  for (const char* op : kOps)
    if (n->op_type == op) return true;
  return false;
}

// Moves each gradient's trailing data-movement nodes to just after the last producer of their inputs in the node
// list (the tie-break of the executor's order, which one thread follows), so a gradient is ready when the node that
// computes it has run.
void PullGradientsForward(Graph& g, const std::vector<Value*>& grads) {
  for (Value* gr : grads) {
    std::vector<Node*> chain;  // from the gradient back towards its computation
    for (Value* v = gr; v->producer && Movement(v->producer) && !v->producer->inputs.empty() && v->producer->inputs[0];
         v = v->producer->inputs[0])
      chain.push_back(v->producer);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      Node* n = *it;
      const auto& nodes = g.nodes();
      std::map<const Node*, size_t> at;
      for (size_t i = 0; i < nodes.size(); ++i) at[nodes[i].get()] = i;
      size_t after = 0;  // one past the last input's producer
      for (const Value* in : n->inputs)
        if (in && in->producer) after = std::max(after, at[in->producer] + 1);
      if (after < at[n] && after < nodes.size()) g.MoveNodeBefore(n, nodes[after].get());
    }
  }
}

}  // namespace

bool DataParallelPass::Run(Graph& g) {
  buckets_.clear();
  if ((opts_.world <= 1 && !opts_.even_alone) || grads_.empty()) return false;
  if (opts_.bucket_bytes <= 0) throw Error("--bucket-mb must be > 0");
  if (params_.size() != grads_.size())
    throw Error("data_parallel: " + std::to_string(params_.size()) + " parameters but " +
                std::to_string(grads_.size()) + " gradients");
  for (const Value* p : params_)
    if (!p || !p->initializer) throw Error("data_parallel: a parameter is not an initializer");
  // A gradient has its parameter's dtype and dims.
  auto bytes_of = [&](size_t i) { return static_cast<int64_t>(params_[i]->initializer->nbytes()); };
  PullGradientsForward(g, grads_);
  // The backward's order: each gradient's producer's place in the topological order (none: first), through the
  // Identity nodes that name autodiff's results (appended last, in parameter order): the node that computes the
  // gradient says when the backward has it.
  std::map<const Node*, size_t> pos;
  const std::vector<Node*> order = g.TopologicalOrder();
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i + 1;
  auto computed = [](Value* v) {
    while (v->producer && v->producer->op_type == "Identity" && v->producer->domain.empty() &&
           !v->producer->inputs.empty() && v->producer->inputs[0])
      v = v->producer->inputs[0];
    return v;
  };
  auto at = [&](size_t i) -> size_t {
    const Value* v = computed(grads_[i]);
    return v->producer ? pos[v->producer] : 0;
  };
  std::vector<size_t> idx(grads_.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return at(a) < at(b); });
  // Buckets in that order, each at most bucket_bytes (a larger gradient alone).
  int64_t bytes = 0;
  for (size_t i : idx) {
    const int64_t b = bytes_of(i);
    if (buckets_.empty() || bytes + b > opts_.bucket_bytes) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().push_back(i);
    bytes += b;
  }
  // One AllReduceStart per bucket, reading the gradients as computed (before autodiff's
  // naming Identity nodes) and placed in the node list just after the last of them: the executor's order (the
  // topological order with ties in list order, which one thread follows) starts each bucket as soon as the backward
  // has it. Then one AllReduceWait per bucket, each after the last start (so the waits never hold the backward up),
  // at the end of the list.
  std::vector<Value*> started;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    std::vector<Value*> ins;
    size_t last = 0;
    for (size_t i : buckets_[k]) {
      ins.push_back(computed(grads_[i]));
      last = std::max(last, at(i));
    }
    Value* bucket = g.AddValue(g.UniqueName("data_parallel/bucket_" + std::to_string(k)));
    Node* n =
        g.AddNode("AllReduceStart", ins, {bucket}, g.UniqueName("data_parallel/AllReduceStart_" + std::to_string(k)));
    n->domain = kInternalDomain;
    n->opset = 1;
    n->attrs["world"] = Attribute::Int(opts_.world);
    n->attrs["count"] = Attribute::Int(static_cast<int64_t>(buckets_[k].size()));
    if (opts_.shard_optimizer) n->attrs["scatter"] = Attribute::Int(1);
    if (last < order.size()) g.MoveNodeBefore(n, order[last]);  // order[last]: the node after the last producer
    started.push_back(bucket);
  }
  // Every collective of the step -- the buckets' starts, --sync-batchnorm's sums -- reads the one before it in the
  // topological order (not as data): every rank issues them in that order.
  std::vector<Node*> collectives;
  for (Node* n : g.TopologicalOrder())
    if (n->domain == kInternalDomain && (n->op_type == "AllReduceStart" || n->op_type == "AllReduceSum"))
      collectives.push_back(n);
  for (size_t i = 1; i < collectives.size(); ++i)
    g.SetInput(collectives[i], static_cast<int>(collectives[i]->inputs.size()), collectives[i - 1]->outputs[0]);
  for (size_t k = 0; k < buckets_.size(); ++k) {
    std::vector<Value*> ins = {started[k]}, outs;
    if (k + 1 < buckets_.size()) ins.push_back(started.back());
    std::vector<int64_t> ranks, dims;
    for (size_t i : buckets_[k]) {
      Value* gr = grads_[i];
      const Tensor& p = *params_[i]->initializer;
      Value* m = g.AddValue(g.UniqueName(gr->name + ".mean"));
      m->dtype = p.dtype();
      m->shape = Shape::Static(p.dims());
      outs.push_back(m);
      const std::vector<int64_t>& d = p.dims();
      ranks.push_back(static_cast<int64_t>(d.size()));
      dims.insert(dims.end(), d.begin(), d.end());
    }
    Node* n = g.AddNode("AllReduceWait", ins, outs, g.UniqueName("data_parallel/AllReduceWait_" + std::to_string(k)));
    n->domain = kInternalDomain;
    n->opset = 1;
    n->attrs["world"] = Attribute::Int(opts_.world);
    n->attrs["ranks"] = Attribute::Ints(ranks);
    n->attrs["dims"] = Attribute::Ints(dims);
    if (opts_.shard_optimizer) n->attrs["scatter"] = Attribute::Int(1);
    for (size_t j = 0; j < buckets_[k].size(); ++j) {
      Value* gr = grads_[buckets_[k][j]];
      std::replace(g.outputs.begin(), g.outputs.end(), gr, outs[j]);  // autodiff made the gradients outputs
      grads_[buckets_[k][j]] = outs[j];
    }
  }
  return true;
}

}  // namespace ot
