#include "training/fusion.h"

#include <unistd.h>

#include <cctype>
#include <cmath>

#include "executor/plan.h"
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
  s.planned_peak = plan.memory_plan().peak_live_bytes;
  return s;
}

namespace {

// Answers the fusion passes with plans compiled for the step's input shapes.
class PlanSizer : public StepSizer {
 public:
  PlanSizer(const std::map<std::string, TensorDesc>& inputs, const std::map<std::string, const Tensor*>& known)
      : inputs_(inputs), known_(known) {}
  FusionSizes Measure(const Graph& g) override {
    return SizesFromPlan(g, *Plan::Compile(g, inputs_, known_, 0, /*state_in_place=*/true));
  }

 private:
  const std::map<std::string, TensorDesc>& inputs_;
  const std::map<std::string, const Tensor*>& known_;
};

}  // namespace

FusionReport FuseForShapes(Graph& g, const FuseOptions& opts, const std::map<std::string, TensorDesc>& inputs,
                           const std::map<std::string, const Tensor*>& known, const PipelineControl& control) {
  PlanSizer sizer(inputs, known);
  return RunFusionStage(g, opts, sizer, control);
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
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KB")
    mult = 1e3;
  else if (unit == "KIB")
    mult = 1024.0;
  else if (unit == "M" || unit == "MB")
    mult = 1e6;
  else if (unit == "MIB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB")
    mult = 1e9;
  else if (unit == "GIB")
    mult = 1024.0 * 1024 * 1024;
  else
    throw Error("--memory-budget: unknown unit in '" + text + "' (B, K, M, G, KiB, MiB, GiB)");
  if (!(v > 0) || !std::isfinite(v)) throw Error("--memory-budget: '" + text + "' must be a positive size");
  return static_cast<int64_t>(std::llround(v * mult));
}

}  // namespace ot
