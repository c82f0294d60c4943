#include "passes/data_parallel.h"

#include <algorithm>
#include <map>
#include <string>

#include "graph/error.h"
#include "graph/graph.h"

namespace ot {

namespace {
// Bytes of a gradient: its shape must be static (a parameter's).
int64_t GradBytes(const Value* v) {
  int64_t n = static_cast<int64_t>(SizeOf(v->dtype == DataType::kUndefined ? DataType::kFloat32 : v->dtype));
  if (!v->shape.known_rank()) return n;
  for (const Dim& d : v->shape.dims()) n *= d.is_static() ? d.value : 1;
  return n;
}
}  // namespace

bool DataParallelPass::Run(Graph& g) {
  buckets_.clear();
  if (opts_.world <= 1 || grads_.empty()) return false;
  if (opts_.bucket_bytes <= 0) throw Error("--bucket-mb must be > 0");
  // The backward's order: each gradient's producer's place in the topological order (none: first).
  std::map<const Node*, size_t> pos;
  const std::vector<Node*> order = g.TopologicalOrder();
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i + 1;
  std::vector<size_t> idx(grads_.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  // Through the Identity nodes that name autodiff's results (appended last, in parameter order): the node that
  // computes the gradient says when the backward has it.
  auto at = [&](size_t i) -> size_t {
    const Value* v = grads_[i];
    while (v->producer && v->producer->op_type == "Identity" && v->producer->domain.empty() &&
           !v->producer->inputs.empty() && v->producer->inputs[0])
      v = v->producer->inputs[0];
    return v->producer ? pos[v->producer] : 0;
  };
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return at(a) < at(b); });
  // Buckets in that order, each at most bucket_bytes (a larger gradient alone).
  int64_t bytes = 0;
  for (size_t i : idx) {
    const int64_t b = GradBytes(grads_[i]);
    if (buckets_.empty() || bytes + b > opts_.bucket_bytes) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().push_back(i);
    bytes += b;
  }
  Value* previous = nullptr;  // the previous bucket's first mean: orders the collectives alike on every rank
  for (size_t k = 0; k < buckets_.size(); ++k) {
    std::vector<Value*> ins, outs;
    for (size_t i : buckets_[k]) {
      Value* gr = grads_[i];
      Value* m = g.AddValue(g.UniqueName(gr->name + ".mean"));
      m->dtype = gr->dtype;
      m->shape = gr->shape;
      ins.push_back(gr);
      outs.push_back(m);
    }
    const int64_t count = static_cast<int64_t>(ins.size());
    if (previous) ins.push_back(previous);
    previous = outs[0];
    Node* n = g.AddNode("AllReduce", ins, outs, g.UniqueName("data_parallel/AllReduce_" + std::to_string(k)));
    n->domain = kInternalDomain;
    n->opset = 1;
    n->attrs["world"] = Attribute::Int(opts_.world);
    n->attrs["count"] = Attribute::Int(count);
    for (size_t j = 0; j < buckets_[k].size(); ++j) {
      Value* gr = grads_[buckets_[k][j]];
      std::replace(g.outputs.begin(), g.outputs.end(), gr, outs[j]);  // autodiff made the gradients outputs
      grads_[buckets_[k][j]] = outs[j];
    }
  }
  return true;
}

}  // namespace ot
