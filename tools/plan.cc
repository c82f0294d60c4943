// `onnx-train plan MODEL --batch N [train options] [--json]`: the training step's planned peak memory and its split
// (training/memory_report.h), without running a step. The step graph is built as `train` builds it (same loss,
// freeze and optimizer options, the same graph outputs as the Trainer's executor), fused as `train` fuses it
// (--fuse, --memory-budget: the clusters, the bytes each saved and the merges refused are printed after the table)
// and compiled for batch N; a model that stores its step (training_info) is planned as stored.
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "executor/host_memory.h"
#include "graph/error.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "onnx_import/training_info.h"
#include "tools/commands.h"
#include "tools/train_cli.h"
#include "training/memory_report.h"
#include "training/pipeline.h"
#include "training/trainer.h"

namespace ot::tools {

namespace {

// What the report says it planned: the precision ("fp32", "fp16", "bf16") and the optimizer.
struct Setting {
  std::string precision, optimizer;
};

// From the options (bare --amp is bf16 on the CPU, DESIGN.md).
Setting FromOptions(const TrainOptions& o) {
  // plan --world-size N: one rank's step.
  const std::string opt =
      o.optimizer + (o.world_size > 1 ? (o.shard_optimizer ? ", sharded" : "") + std::string(", one rank of ") +
                                            std::to_string(o.world_size)
                                      : "");
  switch (MakeTrainerOptions(o, o.steps).amp.half) {
    case DataType::kFloat16:
      return {"fp16", opt};
    case DataType::kBFloat16:
      return {"bf16", opt};
    default:
      return {"fp32", opt};
  }
}

// From a stored step's OptimizerUpdate node (its kind, and the dtype of its half copies).
Setting FromStoredStep(const Graph& step) {
  Setting s{"fp32", "?"};
  for (const auto& n : step.nodes()) {
    if (n->op_type != "OptimizerUpdate") continue;
    s.optimizer = n->attr_string("kind", "?");
    if (!n->attr_ints("half_params").empty()) {
      const auto half = static_cast<DataType>(n->attr_int("half_dtype", 0));
      s.precision = half == DataType::kFloat16 ? "fp16" : half == DataType::kBFloat16 ? "bf16" : "fp32";
    }
  }
  return s;
}

std::string Size(int64_t b) {
  char buf[64];
  if (b >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.2f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

std::string Percent(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

void PrintTable(const PlanOptions& o, const Setting& set, const MemoryReport& r) {
  const TrainOptions& t = o.train;
  std::printf("memory plan of %s: batch %lld, %s, optimizer %s%s; %lld kernels, peak at %s\n\n", t.model.c_str(),
              static_cast<long long>(t.batch), set.precision.c_str(), set.optimizer.c_str(),
              t.grad_accum > 1 ? (", grad-accum " + std::to_string(t.grad_accum)).c_str() : "",
              static_cast<long long>(r.kernels), r.peak_node.empty() ? "the start" : r.peak_node.c_str());
  std::printf("%-26s %14s %12s %10s\n", "part", "bytes", "size", "% of peak");
  auto row = [&](const char* name, int64_t b) {
    std::printf("%-26s %14lld %12s %10s\n", name, static_cast<long long>(b), Size(b).c_str(),
                Percent(b, r.peak_bytes).c_str());
  };
  row("parameters", r.parameters);
  row("half copies", r.half_copies);
  row("optimizer state", r.optimizer_state);
  row("saved activations", r.saved_activations);
  row("gradients", r.gradients);
  row("transient", r.transient);
  row("  of which constants", r.constants);
  row("  of which step outputs", r.step_outputs);
  row("peak", r.peak_bytes);
  std::printf(
      "\nover the whole step: saved activations %s, arena %s (largest kernel workspace %s, in it); "
      "declared outside the plan: %s of library heap and result handles\n",
      Size(r.saved_activations_total).c_str(), Size(r.arena_bytes).c_str(), Size(r.workspace_bytes).c_str(),
      Size(r.heap_bytes).c_str());
  const int64_t available = AvailableHostMemory();
  if (available > 0 && r.arena_bytes > available)
    std::printf("does not fit: the arena needs %s, this machine has %s available (train and run refuse to start)\n",
                Size(r.arena_bytes).c_str(), Size(available).c_str());
  auto values = [](const char* title, const std::vector<SavedActivation>& list, bool part) {
    if (list.empty()) return;
    std::printf("\n%s:\n", title);
    std::printf("  %-40s %-24s %-9s %-20s %12s%s\n", "value", "op", "dtype", "shape", "size", part ? "  part" : "");
    for (const SavedActivation& s : list)
      std::printf("  %-40s %-24s %-9s %-20s %12s%s%s\n", s.name.c_str(), s.op.c_str(), DataTypeName(s.dtype).c_str(),
                  DimsToString(s.dims).c_str(), Size(s.bytes).c_str(), part ? "  " : "", part ? s.part.c_str() : "");
  };
  values("largest saved activations", r.largest, false);
  values("largest values live at the peak", r.live_at_peak, true);
}

void PrintJson(const PlanOptions& o, const Setting& set, const MemoryReport& r, const FusionReport& f) {
  nlohmann::json j;
  j["model"] = o.train.model;
  j["batch"] = o.train.batch;
  j["precision"] = set.precision;
  j["optimizer"] = set.optimizer;
  j["peak_bytes"] = r.peak_bytes;
  j["parameters"] = r.parameters;
  j["half_copies"] = r.half_copies;
  j["optimizer_state"] = r.optimizer_state;
  j["saved_activations"] = r.saved_activations;
  j["gradients"] = r.gradients;
  j["transient"] = r.transient;
  j["constants"] = r.constants;        // part of transient
  j["step_outputs"] = r.step_outputs;  // part of transient
  j["saved_activations_total"] = r.saved_activations_total;
  j["arena_bytes"] = r.arena_bytes;
  j["planned_peak_bytes"] = r.planned_peak_bytes;  // the memory plan's own liveness peak (resident included)
  j["workspace_bytes"] = r.workspace_bytes;
  j["heap_bytes"] = r.heap_bytes;
  j["available_bytes"] = AvailableHostMemory();  // this machine's now (0: unknown); train and run need arena_bytes
  j["kernels"] = r.kernels;
  j["peak_step"] = r.peak_step;
  j["peak_node"] = r.peak_node;
  nlohmann::json largest = nlohmann::json::array();
  for (const SavedActivation& s : r.largest)
    largest.push_back(
        {{"name", s.name}, {"op", s.op}, {"dtype", DataTypeName(s.dtype)}, {"shape", s.dims}, {"bytes", s.bytes}});
  j["largest"] = largest;
  nlohmann::json live = nlohmann::json::array();
  for (const SavedActivation& s : r.live_at_peak)
    live.push_back({{"name", s.name},
                    {"op", s.op},
                    {"dtype", DataTypeName(s.dtype)},
                    {"shape", s.dims},
                    {"bytes", s.bytes},
                    {"part", s.part}});
  j["live_at_peak"] = live;
  nlohmann::json fj;
  fj["mode"] = f.mode.empty() ? "off" : f.mode;
  fj["memory_budget"] = f.memory_budget;
  fj["budget_unreachable"] = f.budget_unreachable;
  fj["peak_before"] = f.peak_before;
  fj["peak_after"] = f.peak_after;
  fj["saved_bytes"] = f.saved_bytes;
  fj["fused_ops"] = f.fused_nodes;
  nlohmann::json clusters = nlohmann::json::array();
  for (const FusedCluster& c : f.clusters)
    clusters.push_back({{"kind", c.kind},
                        {"name", c.name},
                        {"ops", c.ops},
                        {"inputs", c.inputs},
                        {"outputs", c.outputs},
                        {"input_bytes", c.input_bytes},
                        {"output_bytes", c.output_bytes},
                        {"saved_bytes", c.saved_bytes}});
  fj["clusters"] = clusters;
  nlohmann::json refused = nlohmann::json::array();
  for (const RefusedMerge& m : f.refused)
    refused.push_back({{"producer", m.producer}, {"consumer", m.consumer}, {"reason", m.reason}});
  fj["refused"] = refused;
  j["fusion"] = fj;
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

int PlanMemoryReport(const PlanOptions& o) {
  const TrainOptions& t = o.train;
  std::unique_ptr<Graph> model = LoadCheckedModel(t.model), step;
  std::string loss;
  Setting set;
  if (!model->training_info.empty()) {
    // The model holds its step: planned as stored, as `train` would train it (tools/passes.cc StoredStepTrainer).
    StepOutputNames names;
    step = CombinedStepGraph(*model, &names, t.model);  // shares its state tensors with `model`
    StepGraphInfo info;
    info.loss = names.loss;
    info.grad_norm = names.grad_norm.empty() ? nullptr : step->FindValue(names.grad_norm);
    info.skipped = names.skipped.empty() ? nullptr : step->FindValue(names.skipped);
    AddTrainerOutputs(*step, info);
    set = FromStoredStep(*step);
  } else {
    step = std::move(model);
    StepGraphInfo info;
    try {
      info = BuildStep(*step, MakeStepOptions(t));
    } catch (const Error& e) {
      throw Error(t.model + ": " + e.what());
    }
    AddTrainerOutputs(*step, info);
    loss = info.loss;
    set = FromOptions(t);
  }
  std::map<std::string, Tensor> data;
  if (!t.data.empty())
    for (NamedTensor& a : ReadNpz(t.data)) data[a.name] = std::move(a.tensor);
  MemoryReport r;
  FusionReport fusion;
  try {
    const TrainerOptions to = MakeTrainerOptions(t, t.steps);
    if (to.fuse.mode != FuseMode::kOff) {
      BatchInputs in = InputsForBatch(*step, t.batch, t.data.empty() ? nullptr : &data, t.data);
      fusion = FuseForShapes(*step, to.fuse, in.descs, in.known(), to.control);
    }
    r = PlanMemory(*step, t.batch, t.data.empty() ? nullptr : &data, loss, t.data);
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(t.model + ": " + e.what());
  } catch (const Error& e) {
    throw Error(t.model + ": " + e.what());
  }
  if (o.json) {
    PrintJson(o, set, r, fusion);
  } else {
    PrintTable(o, set, r);
    if (!fusion.mode.empty()) std::printf("\n%s", FormatFusionReport(fusion).c_str());
  }
  return 0;
}

}  // namespace ot::tools
