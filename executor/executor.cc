#include "executor/executor.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "executor/plan.h"
#include "graph/error.h"
#include "graph/op_registry.h"

namespace ot {

namespace {
// Graph inputs whose values decide shapes somewhere.
std::vector<std::string> ShapeRelevantInputs(const Graph& g) {
  std::vector<const Value*> needed = ValuesNeededAtPlanTime(g);
  std::set<const Value*> seen(needed.begin(), needed.end());
  std::vector<std::string> r;
  for (const Value* v : g.inputs)
    if (seen.count(v)) r.push_back(v->name);
  return r;
}

}  // namespace

void CheckFeed(const Value* v, const Tensor& t) {
  if (v->dtype != DataType::kUndefined && v->dtype != t.dtype())
    throw Error("input '" + v->name + "' is " + DataTypeName(t.dtype()) + " but the model declares " +
                DataTypeName(v->dtype));
  if (!v->shape.known_rank()) return;
  bool ok = v->shape.rank() == t.rank();
  for (int i = 0; ok && i < t.rank(); ++i)
    if (v->shape[i].is_static() && v->shape[i].value != t.dims()[i]) ok = false;
  if (!ok)
    throw Error("input '" + v->name + "' has shape " + DimsToString(t.dims()) + " but the model declares " +
                v->shape.ToString());
}

Executor::Executor(const Graph& g, ExecutorOptions opts) : graph_(g), opts_(opts) {
  shape_relevant_inputs_ = ShapeRelevantInputs(g);
}

Executor::~Executor() = default;

std::vector<Tensor> Executor::Run(const std::map<std::string, Tensor>& feeds) {
  std::map<std::string, TensorDesc> descs;
  std::string sig;
  for (const auto& [name, t] : feeds) {
    const Value* v = graph_.FindValue(name);
    bool is_input = v && std::find(graph_.inputs.begin(), graph_.inputs.end(), v) != graph_.inputs.end();
    if (!is_input && !(v && v->is_initializer())) throw Error("'" + name + "' is not an input of the model");
    if (t.empty_tensor()) throw Error("input '" + name + "' is empty");
    CheckFeed(v, t);
    descs[name] = TensorDesc{t.dtype(), t.dims(), true};
    sig += name + ":" + DataTypeName(t.dtype()) + DimsToString(t.dims()) + ";";
  }
  for (const Value* v : graph_.RealInputs())
    if (!feeds.count(v->name)) throw Error("input '" + v->name + "' was not given");
  std::map<std::string, const Tensor*> known;
  for (const std::string& name : shape_relevant_inputs_) {
    auto it = feeds.find(name);
    if (it == feeds.end()) continue;
    known[name] = &it->second;
    sig += name + "=";
    const auto* b = static_cast<const uint8_t*>(it->second.raw());
    static const char* hex = "0123456789abcdef";
    for (size_t i = 0; i < it->second.nbytes(); ++i) {
      sig += hex[b[i] >> 4];
      sig += hex[b[i] & 15];
    }
    sig += ";";
  }
  auto it = plans_.find(sig);
  if (it == plans_.end()) {
    // Values in `known` point into this call's feeds: the plan copies what it keeps (folded constants are
    // owned by the plan; known feeds are only read while compiling).
    it = plans_.emplace(sig, Plan::Compile(graph_, descs, known, opts_.seed, opts_.state_in_place, opts_.device)).first;
    it->second->set_profiling(opts_.profile);
    it->second->set_tracing(opts_.trace);
    if (opts_.stager) it->second->set_stager(opts_.stager);
    if (!opts_.host_outputs.empty()) {
      std::vector<bool> wanted(graph_.outputs.size(), false);
      for (size_t i = 0; i < graph_.outputs.size(); ++i)
        wanted[i] = std::find(opts_.host_outputs.begin(), opts_.host_outputs.end(), graph_.outputs[i]->name) !=
                    opts_.host_outputs.end();
      it->second->set_host_outputs(std::move(wanted));
    }
  }
  if (last_ && last_ != it->second.get() && last_->on_device()) {
    // Another plan's device state is the newest: through the host into this plan's.
    last_->DownloadState();
    it->second->MarkHostStateChanged();
  }
  last_ = it->second.get();
  return last_->Run(feeds, runs_++, opts_.check_numerics);
}

const Node* Executor::first_nonfinite() const { return last_ ? last_->first_nonfinite() : nullptr; }
std::string Executor::first_nonfinite_detail() const { return last_ ? last_->first_nonfinite_detail() : ""; }

std::vector<OpTime> Executor::kernel_profile() const {
  std::map<std::string, OpTime> by_op;
  if (last_)
    for (const auto& k : last_->kernel_times()) {
      OpTime& t = by_op[k.op];
      t.op = k.op;
      ++t.kernels;
      t.ms += static_cast<double>(k.ns) * 1e-6;
      t.flops += k.flops;
    }
  std::vector<OpTime> r;
  for (auto& [op, t] : by_op) r.push_back(t);
  std::sort(r.begin(), r.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  return r;
}

std::vector<OpTime> Executor::node_profile() const {
  std::vector<OpTime> r;
  if (last_)
    for (const auto& k : last_->kernel_times()) r.push_back({k.op + " " + k.node, 1, static_cast<double>(k.ns) * 1e-6});
  std::sort(r.begin(), r.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  return r;
}

std::vector<KernelEvent> Executor::last_trace() const { return last_ ? last_->trace() : std::vector<KernelEvent>{}; }

void Executor::set_trace(bool on) {
  opts_.trace = on;
  for (auto& [sig, plan] : plans_) plan->set_tracing(on);
}

void Executor::ResetProfile() {
  for (auto& [sig, plan] : plans_) plan->reset_profile();
}

void Executor::SyncStateToHost() {
  if (last_) last_->DownloadState();
}

void Executor::StateChangedOnHost() {
  for (auto& [sig, plan] : plans_) plan->MarkHostStateChanged();
}

int64_t Executor::last_kernel_count() const { return last_ ? last_->kernel_count() : 0; }
int64_t Executor::last_arena_bytes() const { return last_ ? last_->arena_bytes() : 0; }
bool Executor::last_has_random_kernels() const { return last_ && last_->has_random_kernels(); }

}  // namespace ot
