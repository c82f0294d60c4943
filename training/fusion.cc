#include "training/fusion.h"

#include <unistd.h>

#include <cctype>
#include <cmath>

#include "executor/plan.h"
#include "passes/fuse_batch_norm.h"
#include "passes/fuse_pool_relu.h"
#include "passes/fuse_epilogue.h"
#include "passes/fuse_residual_norm.h"
#include "passes/rematerialize.h"
#include "graph/error.h"

namespace ot {

FusionSizes SizesFromPlan(const Graph& g, const Plan& plan) {
  FusionSizes s;
  const std::vector<Plan::BufferView> bufs = plan.buffer_views();
  for (const Plan::BufferView& b : bufs) {
    const Value* v = g.FindValue(b.name);
    if (!v) continue;
    FusionSizes::Facts f;
    f.dims.dtype = b.desc.dtype;
    f.dims.dims = b.desc.dims;
    // The plan counts the output tensors Run allocates as resident (Plan::memory_plan()), as the sizing does.
    f.resident = b.kind != Plan::BufferKind::kArena;
    f.output = b.kind == Plan::BufferKind::kOutput;
    f.in_state = b.in_state;
    s.values[v] = f;
  }
  for (const Value* v : g.outputs)
    if (auto it = s.values.find(v); it != s.values.end()) it->second.output = true;
  for (const Plan::StepView& st : plan.step_views()) {
    FusionSizes::KernelFacts k;
    k.workspace = st.workspace;
    k.inplace = st.inplace;
    k.views = st.views;
    s.kernels[st.node] = k;
  }
  return s;
}

FusionReport FuseForShapes(Graph& g, const FuseOptions& opts, const std::map<std::string, TensorDesc>& inputs,
                           const std::map<std::string, const Tensor*>& known) {
  ClusterFusionPass pass(opts, FusionSizes());
  if (opts.mode == FuseMode::kOff) {
    pass.Run(g);
    return pass.report();
  }
  std::unique_ptr<Plan> plan = Plan::Compile(g, inputs, known, 0, /*state_in_place=*/true);
  // Kernel folds first (they take Relu, ReluGrad and the residual sums, which clusters would otherwise claim; the
  // pool fold before the batch-norm folds, which would also take a ReluGrad), then the clusters are sized on the plan
  // of the folded step.
  FusionReport folds;
  bool folded = false;
  const int64_t unfused_peak = plan->memory_plan().peak_live_bytes;
  if (opts.kernel_folds) {
    const FusionSizes sizes0 = SizesFromPlan(g, *plan);
    PoolReluFoldPass pool(opts, sizes0, unfused_peak, &folds);
    folded = pool.Run(g);
    BatchNormFoldPass bn(opts, sizes0, pool.peak(), &folds);
    folded = bn.Run(g) || folded;
    folded = ResidualNormFoldPass(opts, sizes0, bn.peak(), &folds).Run(g) || folded;
    if (folded) plan = Plan::Compile(g, inputs, known, 0, /*state_in_place=*/true);
  }
  const FusionSizes sizes = SizesFromPlan(g, *plan);
  plan.reset();
  ClusterFusionPass fuse(opts, sizes);
  fuse.Run(g);
  FusionReport report = fuse.report();
  report.clusters.insert(report.clusters.begin(), folds.clusters.begin(), folds.clusters.end());
  report.refused.insert(report.refused.end(), folds.refused.begin(), folds.refused.end());
  report.saved_bytes += folds.saved_bytes;
  report.fused_nodes += folds.fused_nodes;
  if (folded) report.peak_before = unfused_peak;
  // Under a budget the fused step does not meet, recompute cheap saved values (before the epilogues take the
  // elementwise ops they would copy into GEMMs).
  if (opts.memory_budget > 0 && report.peak_after > opts.memory_budget)
    RematerializePass(opts.memory_budget, sizes, &report).Run(g);
  if (opts.mode == FuseMode::kFull && opts.epilogues) EpiloguePass(opts, sizes, &report).Run(g);
  // The passes price with a model of the plan (conservative where epilogues hold inputs longer); the peak reported
  // is the plan the executor will make of the result.
  if (report.clusters.size() + report.rematerialized.size() > 0 || opts.memory_budget > 0 || folded) {
    report.peak_after = Plan::Compile(g, inputs, known, 0, /*state_in_place=*/true)->memory_plan().peak_live_bytes;
    if (opts.memory_budget > 0) report.budget_unreachable = report.peak_after > opts.memory_budget;
  }
  return report;
}

int64_t DefaultMemoryBudget() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

int64_t ParseByteSize(const std::string& text) {
  size_t i = 0;
  double v = 0;
  try {
    v = std::stod(text, &i);
  } catch (...) {
    throw Error("--memory-budget: '" + text + "' is not a size (e.g. 512M, 2G, 1.5GB, 1000000)");
  }
  std::string unit;
  for (; i < text.size(); ++i)
    if (!std::isspace(static_cast<unsigned char>(text[i]))) unit += static_cast<char>(std::toupper(text[i]));
  double mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB") mult = 1e3;
  else if (unit == "KIB") mult = 1024.0;
  else if (unit == "M" || unit == "MB") mult = 1e6;
  else if (unit == "MIB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB") mult = 1e9;
  else if (unit == "GIB") mult = 1024.0 * 1024 * 1024;
  else throw Error("--memory-budget: unknown unit in '" + text + "' (B, K, M, G, KiB, MiB, GiB)");
  if (!(v > 0) || !std::isfinite(v)) throw Error("--memory-budget: '" + text + "' must be a positive size");
  return static_cast<int64_t>(std::llround(v * mult));
}

}  // namespace ot
