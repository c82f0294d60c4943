// `onnx-train run MODEL --data IN.npz [-o OUT.npz]`: inference on the CPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "executor/executor.h"
#include "executor/plan.h"
#include "graph/error.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"
#include "training/pipeline.h"

namespace ot::tools {

void PrintOpProfile(const Executor& ex, double runs) {
  std::printf("%-28s %8s %12s %8s %10s\n", "op", "kernels", "ms/run", "share", "TFLOP/s");
  double total = 0, gemm_ms = 0, gemm_flops = 0;
  for (const OpTime& t : ex.kernel_profile()) total += t.ms;
  for (const OpTime& t : ex.kernel_profile()) {
    std::printf("%-28s %8lld %12.3f %7.1f%%", t.op.c_str(), static_cast<long long>(t.kernels), t.ms / runs,
                total > 0 ? 100.0 * t.ms / total : 0.0);
    // Counted operations per run over the time per run (the profile waits for each kernel, so this is the rate the
    // kernels themselves reached).
    if (t.flops > 0 && t.ms > 0) std::printf(" %10.3f", t.flops / (t.ms / runs * 1e-3) * 1e-12);
    std::printf("\n");
    if (t.flops > 0) {
      gemm_ms += t.ms / runs;
      gemm_flops += t.flops;
    }
  }
  if (gemm_flops > 0 && gemm_ms > 0)
    std::printf("GEMMs: %.3f ms/run, %.3f TFLOP/s\n", gemm_ms, gemm_flops / (gemm_ms * 1e-3) * 1e-12);
  std::printf("slowest kernels:\n");
  std::vector<OpTime> nodes = ex.node_profile();
  for (size_t i = 0; i < nodes.size() && i < 8; ++i)
    std::printf("  %-40s %12.3f ms/run\n", nodes[i].op.c_str(), nodes[i].ms / runs);
}

int Run(const RunOptions& o) {
  if (!o.output.empty()) CheckOutputFile("-o", o.output);
  std::unique_ptr<Graph> g = LoadCheckedModel(o.model);
  ExpandTrainingOps(*g);
  std::map<std::string, Tensor> feeds;
  std::string unused;  // arrays the model does not read: said once (a misspelt name shows up here)
  for (NamedTensor& nt : ReadNpz(o.data)) {
    const Value* v = g->FindValue(nt.name);
    if (!v || std::find(g->inputs.begin(), g->inputs.end(), v) == g->inputs.end()) {
      unused += (unused.empty() ? "" : ", ") + nt.name;
      continue;
    }
    feeds[nt.name] = std::move(nt.tensor);
  }
  if (!unused.empty())
    std::fprintf(stderr, "note: %s: arrays the model does not read: %s\n", o.data.c_str(), unused.c_str());
  for (const Value* v : g->RealInputs())
    if (!feeds.count(v->name))
      throw Error(o.data + ": no array for the model input '" + v->name + "'" +
                  (unused.empty() ? std::string() : " (arrays not read: " + unused + ")"));
  for (const auto& [name, t] : feeds) CheckFeed(g->FindValue(name), t);  // before fusion sizes anything for them
  // The forward as train runs it: the pattern fusions (as in every --fuse mode), then clusters sized for these
  // inputs' shapes.
  ForwardOptions fo;
  fo.fuse.mode = ParseFuseMode(o.fuse);
  fo.fuse.memory_budget = DefaultMemoryBudget();
  fo.passes.disabled = o.disable_pass;
  PrepareForward(*g, fo, feeds);
  ExecutorOptions eo;
  eo.profile = o.profile;
  Executor ex(*g, eo);
  std::vector<Tensor> outs;
  try {
    outs = ex.Run(feeds);
  } catch (const Error& e) {
    throw Error(o.model + ": " + e.what());
  }
  if (o.repeat > 1) {
    // --profile-ops with --repeat: the timed runs only, as train's profile starts at its second step (the first
    // run makes the plan, JITs oneDNN's kernels and starts TBB's threads: it made a 3 us GEMM read 1.4 ms per run).
    if (o.profile) ex.ResetProfile();
    std::vector<double> ms;
    for (int r = 0; r < o.repeat; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      outs = ex.Run(feeds);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("runs: %d  median: %.3f ms  best: %.3f ms  threads: %d  kernels: %lld  arena: %lld bytes\n", o.repeat,
                ms[ms.size() / 2], ms[0], ThreadCount(), static_cast<long long>(ex.last_kernel_count()),
                static_cast<long long>(ex.last_arena_bytes()));
  }
  if (o.profile) PrintOpProfile(ex, o.repeat > 1 ? o.repeat : 1);
  if (!o.output.empty()) {
    std::vector<NamedTensor> named;
    for (size_t i = 0; i < outs.size(); ++i) named.push_back({g->outputs[i]->name, outs[i]});
    WriteNpz(o.output, named);
    std::printf("wrote %zu outputs to %s\n", outs.size(), o.output.c_str());
    return 0;
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& t = outs[i];
    std::printf("%s: %s%s", g->outputs[i]->name.c_str(), DataTypeName(t.dtype()).c_str(),
                DimsToString(t.dims()).c_str());
    double sum = 0;
    for (int64_t k = 0; k < t.numel(); ++k) sum += t.GetDouble(k);
    std::printf(" sum=%.6g first=[", sum);
    for (int64_t k = 0; k < std::min<int64_t>(t.numel(), 6); ++k) std::printf(k ? ", %.6g" : "%.6g", t.GetDouble(k));
    std::printf(t.numel() > 6 ? ", ...]\n" : "]\n");
  }
  return 0;
}

}  // namespace ot::tools
