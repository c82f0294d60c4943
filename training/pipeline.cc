#include "training/pipeline.h"

#include <algorithm>

#include "executor/plan.h"
#include "passes/gradient_op.h"
#include "passes/training_mode.h"

namespace ot {

std::vector<std::string> PipelinePassNames() {
  std::vector<std::string> r = StepPassNames();
  const std::vector<std::string> fusion = FusionPassNames();
  r.insert(r.end(), fusion.begin(), fusion.end());
  r.push_back("fusion");
  return r;
}

StepGraphInfo BuildStep(Graph& g, const StepOptions& o) { return BuildStepGraph(g, o); }

void ToInferenceMode(Graph& g) { TrainingModePass(false).Run(g); }

void ExpandTrainingOps(Graph& g) { ExpandGradientOps(g); }

FusionReport PrepareForward(Graph& g, const ForwardOptions& o, const std::map<std::string, Tensor>& feeds) {
  CheckDisabledPasses(o.passes.disabled);
  auto disabled = [&](const char* pass) {
    return std::find(o.passes.disabled.begin(), o.passes.disabled.end(), pass) != o.passes.disabled.end();
  };
  if (o.pattern_fusion && !disabled("pattern_fusion")) RunPatternFusion(g, false);
  FuseOptions fuse = o.fuse;
  if (disabled("fusion")) fuse.mode = FuseMode::kOff;
  if (fuse.mode == FuseMode::kOff) return FusionReport();
  std::map<std::string, TensorDesc> descs;
  std::map<std::string, const Tensor*> known;
  for (const auto& [name, t] : feeds) descs[name] = TensorDesc{t.dtype(), t.dims(), true};
  for (const Value* v : ValuesNeededAtPlanTime(g))
    if (auto it = feeds.find(v->name); it != feeds.end()) known[v->name] = &it->second;
  return FuseForShapes(g, fuse, descs, known, o.passes);
}

}  // namespace ot
