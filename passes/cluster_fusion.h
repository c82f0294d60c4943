// Cluster fusion (DESIGN.md "cluster fusion"; XLA's auto-clustering by edge contraction, sized like its fusion
// merger): groups of elementwise ops and row reductions of the step graph become one FusedElementwise node each
// (graph/ops/fused.cc), whose program (kernel_common/cluster_program.h) one kernel runs in a single pass.
//
// Rewrite. Every node that runs as a kernel and whose op has a cluster lowering (graph/ops/fuse_table.cc) starts
// as a cluster of its own. Consumers are visited in topological order; each edge from a producer cluster into the
// consumer's cluster is contracted when all of these hold, else the merge is refused and the reason recorded:
//   no cycle     no path leaves the producer cluster and re-enters the consumer's through another cluster, or
//                through nodes that are no kernels (a Shape folded at plan time and the size arithmetic after it:
//                after the rewrite they read the fused node);
//   program      the union builds one program (passes/cluster_program_builder.h): one domain, reductions over the
//                same trailing axes, float/bool values;
//   outputs      lite: at most one value leaves the cluster; full: any number (multi-output clusters);
//   kernel limit inputs + outputs <= limits.operands (64: a CUDA kernel's parameter budget), and the program's
//                estimated CUDA registers per thread and shared memory per block within limits (cluster_resources.h);
//   pays         the merged program touches at most (1 + margin) x the bytes the two programs touched
//                (BuiltCluster::work_bytes): a producer whose result is broadcast into a larger domain would be
//                recomputed per element and is refused;
//   memory       the planned peak of the step with the merge (passes/memory_plan.h LivenessPeak over the order
//                the executor will use: fusion keeps every cluster input alive until the fused kernel runs, and
//                moves its outputs to that point) stays within memory_budget, or does not grow.
// Clusters of one node stay as they were. A fused node takes the place of its first member in the node list, so
// the executor's order is the one the sizing priced.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "passes/cluster_program_builder.h"
#include "passes/pass.h"

namespace ot {

// --fuse: off; lite (elementwise ops and row reductions, one output per cluster); full (also several outputs, and
// GEMM / convolution epilogues).
enum class FuseMode { kOff, kLite, kFull };

// Parses "off"/"lite"/"full" (the one place a mode string is read); throws Error naming --fuse and the value.
FuseMode ParseFuseMode(const std::string& s);
const char* FuseModeName(FuseMode m);

struct FuseOptions {
  FuseMode mode = FuseMode::kLite;
  int64_t memory_budget = 0;  // bytes; <= 0: no limit
  // What one fused kernel may take (kernel_common/cluster_resources.h estimates a program's CUDA cost): inputs +
  // outputs (a CUDA kernel's parameter budget), registers per thread (more spills, or halves occupancy below 25% on
  // a 64K-register SM) and shared memory per block.
  struct KernelLimits {
    int operands = 64;
    int registers = 128;
    int64_t shared_bytes = 48 << 10;
    // Ops per cluster: a longer program gains nothing more (its loads and stores are already one each), and the
    // bound keeps fusion linear in the graph (each merge rebuilds the cluster's program).
    int nodes = 64;
  } limits;
  double margin = 0.1;    // a merge may touch this much more than its parts
  bool epilogues = true;  // full: also fold clusters into GEMM and conv epilogues (passes/fuse_epilogue.h)
  // lite, full: fold ReluGrad into max pooling's gradient, Relu and bias sums into batch norm, residual sums into
  // layer norm (passes/fuse_pool_relu.h, passes/fuse_batch_norm.h, passes/fuse_residual_norm.h): CPU kernels
  bool kernel_folds = true;
};

// What the runtime knows of a step for the shapes it will run (passes/fusion_stage.h StepSizer; training/fusion.h
// fills it from a compiled plan): dims and storage of every value a kernel touches, which nodes run as kernels, in
// what order, what each kernel declares (workspace, in-place pairs), and the planned peak.
struct FusionSizes {
  struct Facts {
    ValueDims dims;
    bool resident = false;  // state, parameters, fed inputs, constants: live for the whole step
    bool output = false;    // a graph output: lives to the end of the step once written
    bool in_state = false;  // a next state written into its state's own storage: no bytes of its own
  };
  std::map<const Value*, Facts> values;
  struct KernelFacts {
    int64_t workspace = 0;
    std::vector<std::pair<int, int>> inplace;  // (output index, input index)
    std::vector<std::pair<int, int>> views;    // (output index, input index): the output is the input's bytes
  };
  std::map<const Node*, KernelFacts> kernels;  // nodes that run as kernels (the others are folded constants)
  int64_t planned_peak = 0;                    // the runtime's planned peak of the step (bytes)
};

struct FusedCluster {
  // "cluster": a FusedElementwise node (or, under full, an epilogue); "fold": ops taken into a norm kernel
  // (passes/fold_report.h), named after the norm node, its outputs those of the norm.
  std::string kind = "cluster";
  std::string name;              // the FusedElementwise node
  std::vector<std::string> ops;  // "Op node-name" of each member
  int inputs = 0, outputs = 0;
  int64_t input_bytes = 0, output_bytes = 0;
  int64_t saved_bytes = 0;  // bytes of the values it keeps internal, each written once and read once
  std::string program;      // text form
};

struct RefusedMerge {
  std::string producer, consumer;  // a node of each side
  std::string reason;
};

struct FusionReport {
  std::string mode;  // FuseModeName of the fusion that ran; empty when none did
  int64_t memory_budget = 0;
  int64_t peak_before = 0, peak_after = 0;  // planned liveness peaks (LivenessPeak), bytes
  int64_t saved_bytes = 0;                  // sum over clusters
  // The budget is below the unfused step's planned peak and what fusion and rematerialization reached (executor/
  // fusion.h: from the final plan); only merges that do not raise the peak were made.
  bool budget_unreachable = false;
  int fused_nodes = 0;  // nodes replaced
  std::vector<FusedCluster> clusters;
  std::vector<RefusedMerge> refused;
  std::vector<std::string> rematerialized;  // values recomputed to meet the budget (passes/rematerialize.h)
};

class ClusterFusionPass : public Pass {
 public:
  ClusterFusionPass(FuseOptions opts, const FusionSizes& sizes) : opts_(std::move(opts)), sizes_(sizes) {}
  std::string name() const override { return "cluster_fusion"; }
  bool Run(Graph& g) override;
  const FusionReport& report() const { return report_; }

 private:
  FuseOptions opts_;
  const FusionSizes& sizes_;
  FusionReport report_;
};

// Human-readable report (`onnx-train plan --fuse`, `passes --fuse`).
std::string FormatFusionReport(const FusionReport& r, int max_refused = 20);

}  // namespace ot
