// What the kernel folds (passes/fuse_pool_relu.h, passes/fuse_batch_norm.h, passes/fuse_residual_norm.h) share:
// their inputs (FoldPass), what they ask of the step's facts, and how they enter the fusion report (FoldReport): each
// fold as a cluster named after the node it went into (a later fold into the same node extends that entry), each
// refusal with its reason.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "passes/cluster_fusion.h"
#include "passes/pass.h"

namespace ot {

class FoldPass : public Pass {
 public:
  // `sizes`: the step's facts for the shapes it will run (training/fusion.h); `peak`: its planned peak (bytes), the
  // base of the budget check; `report`: receives the folds (clusters), refusals, saved bytes and fused node count.
  FoldPass(FuseOptions opts, const FusionSizes& sizes, int64_t peak, FusionReport* report)
      : opts_(std::move(opts)), sizes_(sizes), peak_(peak), report_(report) {}
  int64_t peak() const { return peak_; }  // the base plus the bytes the folds made live longer

 protected:
  FuseOptions opts_;
  const FusionSizes& sizes_;
  int64_t peak_;
  FusionReport* report_;
};

class FoldReport {
 public:
  // `what` prefixes each refusal ("batch norm: ...").
  FoldReport(const FusionSizes& sizes, FusionReport* report, std::string what)
      : sizes_(sizes), report_(report), what_(std::move(what)) {}

  const FusionSizes::Facts* facts(const Value* v) const {
    auto it = v ? sizes_.values.find(v) : sizes_.values.end();
    return it == sizes_.values.end() ? nullptr : &it->second;
  }
  int64_t bytes(const Value* v) const {
    const FusionSizes::Facts* f = facts(v);
    return f ? NumElements(f->dims.dims) * static_cast<int64_t>(SizeOf(f->dims.dtype)) : 0;
  }
  bool kernel(const Node* n) const { return n && sizes_.kernels.count(n) > 0; }
  static std::string Label(const Node* n) { return n->op_type + " " + n->name; }

  // `ops`: the receiving node first ("BatchNormGrad name"), then what went into it. fused_nodes counts the nodes
  // replaced: both for a node's first fold, one for each later fold into it.
  void Record(const Node* at, std::vector<std::string> ops, int64_t saved) {
    FusedCluster fc;
    fc.kind = "fold";
    fc.name = at->name;
    fc.ops = std::move(ops);
    for (const Value* v : at->inputs)
      if (v) {
        ++fc.inputs;
        fc.input_bytes += bytes(v);
      }
    for (const Value* v : at->outputs)
      if (v) {
        ++fc.outputs;
        fc.output_bytes += bytes(v);
      }
    fc.saved_bytes = saved;
    report_->saved_bytes += saved;
    for (FusedCluster& c : report_->clusters)
      if (c.name == fc.name) {
        c.ops.insert(c.ops.end(), fc.ops.begin() + 1, fc.ops.end());
        c.inputs = fc.inputs, c.outputs = fc.outputs, c.input_bytes = fc.input_bytes, c.output_bytes = fc.output_bytes;
        c.saved_bytes += saved;
        report_->fused_nodes += 1;
        return;
      }
    report_->fused_nodes += 2;
    report_->clusters.push_back(std::move(fc));
  }

  void Refuse(const Node* a, const Node* b, const std::string& why) {
    report_->refused.push_back({a->name, b->name, what_ + ": " + why});
  }

 private:
  const FusionSizes& sizes_;
  FusionReport* report_;
  std::string what_;
};

}  // namespace ot
