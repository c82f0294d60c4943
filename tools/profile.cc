// `train --profile FILE`: one training step as a Chrome trace (chrome://tracing, ui.perfetto.dev). One complete
// ("X") event per kernel on the thread that ran it: name = op type, category = its precision, args = node, op,
// precision, operand shapes, bytes read and written, and for a fused cluster the ops it replaced. The trace's
// otherData sums the step by category -- Casts, fused clusters, GEMM/conv, the rest -- so a user sees what AMP's
// casts cost and what fusion took over.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "executor/kernel_event.h"
#include "graph/error.h"
#include "tools/commands.h"

namespace ot::tools {
namespace {

std::string Dims(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

std::string Operand(const TensorDesc& t) { return DataTypeName(t.dtype) + Dims(t.dims); }

// The precision a kernel ran in: its narrowest floating output (a Cast to bf16 ran "bfloat16"); "int" when it
// wrote no float, as shape arithmetic.
std::string Precision(const KernelEvent& e) {
  DataType best = DataType::kUndefined;
  for (const auto& list : {e.outputs, e.inputs}) {
    for (const TensorDesc& t : list)
      if (IsFloat(t.dtype) && (best == DataType::kUndefined || SizeOf(t.dtype) < SizeOf(best))) best = t.dtype;
    if (best != DataType::kUndefined) break;
  }
  return best == DataType::kUndefined ? "int" : DataTypeName(best);
}

// The category of the step summary.
std::string Kind(const Node& n) {
  static const std::set<std::string> gemm = {"MatMul",        "Gemm",   "MatMulBias",     "MatMulTrans",
                                             "GemmSum",       "Conv",   "ConvGradData",   "ConvGradWeight",
                                             "ConvTranspose", "Einsum", "MatMulEpilogue", "ConvEpilogue"};
  if (n.op_type == "Cast") return "casts";
  if (n.op_type == "FusedElementwise") return "fused clusters";
  if (gemm.count(n.op_type)) return "GEMM/conv";
  return "other";
}

}  // namespace

std::string WriteProfileTrace(const std::string& path, const std::vector<KernelEvent>& events, int64_t step,
                              const std::string& precision, const std::string& fuse,
                              const std::vector<dist::CollectiveTiming>& comm) {
  nlohmann::json trace = nlohmann::json::array();
  std::set<int> threads;
  std::map<std::string, double> by_kind;
  std::map<std::string, int> count_kind;
  int64_t end_ns = 0;
  for (const KernelEvent& e : events) {
    if (!e.node) continue;
    const Node& n = *e.node;
    const std::string prec = Precision(e);
    nlohmann::json args = {{"node", n.name},
                           {"op", n.domain.empty() ? n.op_type : n.domain + "." + n.op_type},
                           {"precision", prec},
                           {"bytes_read", e.bytes_in},
                           {"bytes_written", e.bytes_out},
                           {"bytes", e.bytes_in + e.bytes_out}};
    nlohmann::json ins = nlohmann::json::array(), outs = nlohmann::json::array();
    for (const TensorDesc& t : e.inputs) ins.push_back(Operand(t));
    for (const TensorDesc& t : e.outputs) outs.push_back(Operand(t));
    args["inputs"] = ins;
    args["outputs"] = outs;
    if (const Attribute* a = n.attr("fused_ops")) args["fused_ops"] = a->strings;
    const double dur_us = static_cast<double>(e.end_ns - e.start_ns) * 1e-3;
    trace.push_back({{"name", n.op_type},
                     {"cat", prec},
                     {"ph", "X"},
                     {"ts", static_cast<double>(e.start_ns) * 1e-3},
                     {"dur", dur_us},
                     {"pid", 1},
                     {"tid", e.thread},
                     {"args", args}});
    threads.insert(e.thread);
    by_kind[Kind(n)] += dur_us * 1e-3;
    ++count_kind[Kind(n)];
    end_ns = std::max(end_ns, e.end_ns);
  }
  // The communication lane: bucket k's all-reduce from its issue to its completion, placed after the k-th
  // AllReduceStart kernel (the buckets start in order).
  constexpr int kCommLane = 1000;
  std::vector<const KernelEvent*> starts;
  for (const KernelEvent& e : events)
    if (e.node && e.node->op_type == "AllReduceStart") starts.push_back(&e);
  std::sort(starts.begin(), starts.end(),
            [](const KernelEvent* a, const KernelEvent* b) { return a->start_ns < b->start_ns; });
  for (size_t k = 0; k < starts.size() && k < comm.size(); ++k) {
    const int64_t t0 = starts[k]->end_ns + comm[k].issued_ns, t1 = starts[k]->end_ns + comm[k].done_ns;
    trace.push_back({{"name", "all-reduce"},
                     {"cat", "communication"},
                     {"ph", "X"},
                     {"ts", static_cast<double>(t0) * 1e-3},
                     {"dur", static_cast<double>(t1 - t0) * 1e-3},
                     {"pid", 1},
                     {"tid", kCommLane},
                     {"args", {{"bucket", k}, {"node", starts[k]->node->name}}}});
    end_ns = std::max(end_ns, t1);
  }
  if (!starts.empty() && !comm.empty())
    trace.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", 1},
                     {"tid", kCommLane},
                     {"args", {{"name", "communication (MPI, its own thread)"}}}});
  trace.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "onnx-train step"}}}});
  for (int t : threads)
    trace.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", 1},
                     {"tid", t},
                     {"args", {{"name", "worker " + std::to_string(t)}}}});
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [k, ms] : by_kind) kinds[k] = {{"kernels", count_kind[k]}, {"ms", ms}};
  nlohmann::json doc = {{"traceEvents", trace},
                        {"displayTimeUnit", "ms"},
                        {"otherData",
                         {{"step", step},
                          {"precision", precision},
                          {"fuse", fuse},
                          {"kernels", events.size()},
                          {"step_ms", static_cast<double>(end_ns) * 1e-6},
                          {"kernel_ms_by_kind", kinds}}}};
  std::ofstream f(path);
  if (!f) throw Error("--profile: cannot write '" + path + "'");
  f << doc.dump(1) << "\n";
  f.close();
  if (!f) throw Error("--profile: writing '" + path + "' failed");
  char buf[512];
  std::snprintf(buf, sizeof buf, "profile of step %lld: %s (%zu kernels, %.2f ms", static_cast<long long>(step),
                path.c_str(), events.size(), static_cast<double>(end_ns) * 1e-6);
  std::string s = buf;
  for (const auto& [k, ms] : by_kind) {
    std::snprintf(buf, sizeof buf, "; %s %.2f ms", k.c_str(), ms);
    s += buf;
  }
  return s + ")";
}

}  // namespace ot::tools
