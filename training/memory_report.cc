#include "training/memory_report.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/ops/optimizer_layout.h"

namespace ot {

namespace {

bool IsHalf(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

enum class Part { kParameters, kHalfCopies, kOptimizerState, kSaved, kGradients, kConstants, kStepOutputs, kTransient };

// What the step graph says about its values, independent of the plan.
struct StepRoles {
  std::unordered_set<const Value*> params, grads, half_copies, optimizer_inputs;
  std::unordered_set<const Value*> state;
  std::unordered_set<const Node*> backward;
};

StepRoles AnalyzeStep(const Graph& g, const std::vector<Plan::StepView>& steps, const std::string& loss) {
  StepRoles r;
  for (const auto& b : g.update_bindings) r.state.insert(b.state);

  const Node* opt = nullptr;
  for (const auto& n : g.nodes())
    if (n->op_type == "OptimizerUpdate" && n->domain == kInternalDomain) {
      if (opt)
        throw Error("memory report: the step has two OptimizerUpdate nodes ('" + opt->name + "', '" + n->name + "')");
      opt = n.get();
    }
  if (opt) {
    const OptimizerLayout layout = OptimizerLayout::Of(*opt);
    for (int i = 0; i < layout.n; ++i) {
      if (opt->has_input(layout.param_in(i))) r.params.insert(opt->inputs[layout.param_in(i)]);
      if (opt->has_input(layout.grad_in(i))) r.grads.insert(opt->inputs[layout.grad_in(i)]);
    }
    // autodiff names each gradient by an Identity at the end of the backward (and AMP casts gradients to
    // fp32): the value a gradient rule computed, and the partial gradients summed into it, are gradient memory
    // too, live from the rule's kernel on.
    std::vector<const Value*> stack(r.grads.begin(), r.grads.end());
    while (!stack.empty()) {
      const Node* p = stack.back()->producer;
      stack.pop_back();
      if (!p || !p->domain.empty() || (p->op_type != "Identity" && p->op_type != "Cast" && p->op_type != "Sum"))
        continue;
      for (const Value* in : p->inputs)
        if (in && !in->initializer && r.grads.insert(in).second) stack.push_back(in);
    }
    // Initializers the update reads that are not parameters (lr when no schedule binds it): optimizer state.
    for (const Value* v : opt->inputs)
      if (v && v->initializer && !r.params.count(v)) r.optimizer_inputs.insert(v);
    // The half copies' next values (attribute half_params: master weights), where the layout puts them.
    std::unordered_set<const Value*> half_next;
    for (int j = 0; layout.k >= 0 && j < layout.m(); ++j)
      if (opt->has_output(layout.half_out(j))) half_next.insert(opt->outputs[layout.half_out(j)]);
    for (const auto& b : g.update_bindings)
      if (half_next.count(b.next)) r.half_copies.insert(b.state);
  }
  for (const Value* s : r.state)
    if (IsHalf(s->dtype) && !r.params.count(s)) r.half_copies.insert(s);

  // Backward: reachable through consumers from the loss-gradient seed, the optimizer excluded.
  std::vector<const Value*> stack;
  const std::string prefix = loss.empty() ? "" : loss + "_grad_seed_";
  for (const auto& v : g.values()) {
    if (!v->initializer) continue;
    const bool match = loss.empty() ? v->name.find("_grad_seed_") != std::string::npos
                                    : v->name.compare(0, prefix.size(), prefix) == 0;
    if (match) stack.push_back(v.get());
  }
  if (stack.empty())
    throw Error("memory report: the step graph has no loss-gradient seed (an initializer '" +
                (loss.empty() ? std::string("*") : loss) + "_grad_seed_N' made by autodiff)");
  std::unordered_set<const Node*> backward;
  std::unordered_set<const Value*> seen;
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second) continue;
    for (const Use& u : v->uses) {
      if (u.node == opt || !backward.insert(u.node).second) continue;
      for (const Value* o : u.node->outputs)
        if (o) stack.push_back(o);
    }
  }
  // Nodes that a gradient rule added to compute from forward values alone (a Transpose of a weight or an
  // activation, the pieces of Gelu's derivative, AMP's Casts for fp32 backward ops) are not reachable from the
  // seed but exist only for the backward. Where the plan runs one once the backward has begun, it is backward:
  // what it reads from the forward is what the step keeps. Where it runs before (during the forward), its output
  // is what is kept, so it stays forward and its output counts as saved. So: a kernel at or after the first
  // seed-reachable kernel, all of whose outputs are read only by backward nodes (and are no graph output), is
  // backward. Consumers come later in plan order, so one pass in reverse order reaches the fixpoint.
  std::unordered_set<const Value*> graph_outputs(g.outputs.begin(), g.outputs.end());
  size_t first = steps.size();
  for (size_t i = 0; i < steps.size() && first == steps.size(); ++i)
    if (backward.count(steps[i].node)) first = i;
  for (size_t i = steps.size(); i-- > first;) {
    const Node* n = steps[i].node;
    if (n == opt || backward.count(n)) continue;
    bool only_backward = true, used = false;
    for (const Value* o : n->outputs) {
      if (!o) continue;
      if (graph_outputs.count(o)) only_backward = false;
      for (const Use& u : o->uses) {
        used = true;
        if (!backward.count(u.node)) only_backward = false;
      }
    }
    if (only_backward && used) backward.insert(n);
  }
  r.backward = std::move(backward);
  return r;
}

// Saved: the runtime values a backward kernel of the plan reads that the backward does not compute -- forward
// values and fed data. Taken from the plan's kernels, not the graph's nodes: a backward node that the plan folded
// (a Shape of a static value) or one that reads no data keeps nothing alive.
std::unordered_set<const Value*> SavedValues(const Graph& g, const StepRoles& roles,
                                             const std::vector<Plan::BufferView>& bufs,
                                             const std::vector<Plan::StepView>& steps) {
  const OpRegistry& reg = OpRegistry::Global();
  std::unordered_set<const Value*> saved;
  for (const Plan::StepView& st : steps) {
    if (!roles.backward.count(st.node)) continue;
    const OpSchema* schema = reg.Find(st.node->domain, st.node->op_type);
    if (schema && !schema->reads_input_data) continue;
    for (int b : st.in_bufs) {
      if (b < 0 || bufs[static_cast<size_t>(b)].kind == Plan::BufferKind::kConst) continue;
      const Value* v = g.FindValue(bufs[static_cast<size_t>(b)].name);
      if (!v || v->initializer || (v->producer && roles.backward.count(v->producer))) continue;
      saved.insert(v);
    }
  }
  return saved;
}

}  // namespace

MemoryReport ReportMemory(const Graph& step, const Plan& plan, const std::string& loss) {
  const std::vector<Plan::BufferView> bufs = plan.buffer_views();
  const std::vector<Plan::StepView> steps = plan.step_views();
  const StepRoles roles = AnalyzeStep(step, steps, loss);
  const std::unordered_set<const Value*> saved_values = SavedValues(step, roles, bufs, steps);
  const int ns = static_cast<int>(steps.size());

  MemoryReport r;
  r.arena_bytes = plan.arena_bytes();
  r.kernels = ns;
  const MemoryPlan& mp = plan.memory_plan();
  r.planned_peak_bytes = mp.peak_live_bytes;
  r.planned_peak_step = mp.peak_step;
  r.resident_bytes = mp.resident_bytes;
  r.inplace_saved_bytes = mp.inplace_saved_bytes;
  for (int k = 0; k < ns; ++k) {
    r.workspace_bytes = std::max(r.workspace_bytes, plan.workspace_bytes(k));
    r.workspace_total += plan.workspace_bytes(k);
  }
  r.heap_bytes = plan.heap_bytes();
  constexpr int kParts = 8;
  // Bytes resident for the whole step, and per step the change of the live bytes (+ at def, - after last).
  int64_t resident[kParts] = {};
  std::vector<std::array<int64_t, kParts>> delta(static_cast<size_t>(ns) + 1, std::array<int64_t, kParts>{});
  std::vector<SavedActivation> saved;
  std::vector<Part> part_of(bufs.size(), Part::kTransient);
  auto alive = [&](const Plan::BufferView& b, int s) {  // the lifetime rule of the header comment
    if (b.def_step < 0) return true;
    if (b.in_state) return false;
    const int first = b.shares >= 0 ? b.def_step + 1 : b.def_step;
    return first <= s && (b.kind == Plan::BufferKind::kOutput || s <= std::max(b.def_step, b.last_step));
  };

  for (size_t bi = 0; bi < bufs.size(); ++bi) {
    const Plan::BufferView& b = bufs[bi];
    const Value* v = step.FindValue(b.name);
    // A next state written into its state's storage has no bytes of its own (the state is counted).
    const int64_t bytes = b.in_state ? 0 : static_cast<int64_t>(b.desc.nbytes());
    Part part = Part::kTransient;
    const bool stored = b.kind == Plan::BufferKind::kConst;
    if (stored) {
      if (v && roles.params.count(v))
        part = Part::kParameters;
      else if (v && roles.half_copies.count(v))
        part = Part::kHalfCopies;
      else if (v && (roles.state.count(v) || roles.optimizer_inputs.count(v)))
        part = Part::kOptimizerState;
      else
        part = Part::kConstants;
    } else if (v && roles.grads.count(v)) {
      part = Part::kGradients;
    } else if (v && saved_values.count(v)) {
      part = Part::kSaved;
    } else if (b.kind == Plan::BufferKind::kOutput) {
      part = Part::kStepOutputs;
    }
    if (part == Part::kSaved) {
      r.saved_activations_total += bytes;
      saved.push_back({b.name, v && v->producer ? v->producer->op_type : std::string("input"), b.desc.dtype,
                       b.desc.dims, bytes, ""});
    }
    part_of[bi] = part;
    const int p = static_cast<int>(part);
    // Lifetimes: not written by a kernel (state, constants, fed data): the whole step.
    if (b.def_step < 0 || ns == 0) {
      resident[p] += bytes;
      continue;
    }
    const int last = b.kind == Plan::BufferKind::kOutput ? ns - 1 : std::max(b.def_step, b.last_step);
    // Written in place over an input that dies at this step: the same memory, counted once (from the next step).
    const int first = b.shares >= 0 ? b.def_step + 1 : b.def_step;
    if (first > last) continue;
    delta[static_cast<size_t>(first)][p] += bytes;
    delta[static_cast<size_t>(last) + 1][p] -= bytes;
  }
  // A kernel's workspace: transient memory of its own step.
  for (int k = 0; k < ns; ++k) {
    const int64_t ws = (plan.workspace_bytes(k) + kPlanAlign - 1) / kPlanAlign * kPlanAlign;
    delta[static_cast<size_t>(k)][static_cast<int>(Part::kTransient)] += ws;
    delta[static_cast<size_t>(k) + 1][static_cast<int>(Part::kTransient)] -= ws;
  }

  // The peak: the first step with the most live bytes.
  std::array<int64_t, kParts> live{}, at_peak{};
  int64_t peak = -1;
  for (int s = 0; s < ns; ++s) {
    int64_t total = 0;
    for (int p = 0; p < kParts; ++p) {
      live[p] += delta[static_cast<size_t>(s)][p];
      total += live[p];
    }
    if (total > peak) {
      peak = total;
      at_peak = live;
      r.peak_step = s;
    }
  }
  for (int p = 0; p < kParts; ++p) at_peak[p] += resident[p];
  if (r.peak_step >= 0) r.peak_node = steps[static_cast<size_t>(r.peak_step)].node->Describe();
  auto part = [&](Part p) { return at_peak[static_cast<int>(p)]; };
  r.parameters = part(Part::kParameters);
  r.half_copies = part(Part::kHalfCopies);
  r.optimizer_state = part(Part::kOptimizerState);
  r.saved_activations = part(Part::kSaved);
  r.gradients = part(Part::kGradients);
  r.constants = part(Part::kConstants);
  r.step_outputs = part(Part::kStepOutputs);
  r.transient = r.constants + r.step_outputs + part(Part::kTransient);
  r.peak_bytes = r.parameters + r.half_copies + r.optimizer_state + r.saved_activations + r.gradients + r.transient;

  auto by_bytes = [](const SavedActivation& a, const SavedActivation& b) { return a.bytes > b.bytes; };
  std::stable_sort(saved.begin(), saved.end(), by_bytes);
  if (saved.size() > 10) saved.resize(10);
  r.largest = std::move(saved);

  static const char* const kPartNames[kParts] = {"parameters", "half_copies", "optimizer_state", "saved_activations",
                                                 "gradients",  "transient",   "transient",       "transient"};
  for (size_t bi = 0; bi < bufs.size(); ++bi) {
    const Plan::BufferView& b = bufs[bi];
    if (r.peak_step >= 0 && !alive(b, r.peak_step)) continue;
    const Value* v = step.FindValue(b.name);
    r.live_at_peak.push_back(
        {b.name, v && v->producer ? v->producer->op_type : std::string(v && v->initializer ? "initializer" : "input"),
         b.desc.dtype, b.desc.dims, static_cast<int64_t>(b.desc.nbytes()), kPartNames[static_cast<int>(part_of[bi])]});
  }
  std::stable_sort(r.live_at_peak.begin(), r.live_at_peak.end(), by_bytes);
  if (r.live_at_peak.size() > 10) r.live_at_peak.resize(10);
  return r;
}

std::map<std::string, const Tensor*> BatchInputs::known() const {
  std::map<std::string, const Tensor*> k;
  for (const auto& [name, t] : values) k[name] = &t;
  return k;
}

BatchInputs InputsForBatch(const Graph& step, int64_t batch, const std::map<std::string, Tensor>* data,
                           const std::string& data_name) {
  if (batch < 1) throw Error("the batch size must be >= 1 (got " + std::to_string(batch) + ")");
  std::set<const Value*> deciding;
  for (const Value* v : ValuesNeededAtPlanTime(step)) deciding.insert(v);
  BatchInputs r;
  for (const Value* v : step.RealInputs()) {
    const Tensor* array = nullptr;
    if (data) {
      auto it = data->find(v->name);
      if (it != data->end()) array = &it->second;
    }
    if (v->dtype == DataType::kUndefined && !array)
      throw Error("input '" + v->name + "' has no declared dtype; give --data with an array '" + v->name + "'");
    if (!v->shape.known_rank() && !array)
      throw Error("input '" + v->name + "' has no declared shape; give --data with an array '" + v->name + "'");
    TensorDesc d;
    d.present = true;
    d.dtype = v->dtype != DataType::kUndefined ? v->dtype : array->dtype();
    const int rank = v->shape.known_rank() ? v->shape.rank() : array->rank();
    if (array && array->rank() != rank)
      throw Error(data_name + ": array '" + v->name + "' has rank " + std::to_string(array->rank()) + " but input '" +
                  v->name + "' is " + v->shape.ToString());
    for (int i = 0; i < rank; ++i) {
      const Dim dim = v->shape.known_rank() ? v->shape[i] : Dim();
      if (i == 0) {
        // Axis 0 is the batch; a model exported with a fixed batch takes only that batch (as `train` does).
        if (dim.is_static() && dim.value != batch)
          throw Error("input '" + v->name + "' has a static batch dim " + std::to_string(dim.value) + " (shape " +
                      v->shape.ToString() + "), not --batch " + std::to_string(batch));
        d.dims.push_back(batch);
      } else if (dim.is_static()) {
        d.dims.push_back(dim.value);
      } else if (array) {
        d.dims.push_back(array->dims()[i]);
      } else {
        throw Error("input '" + v->name + "' dim " + std::to_string(i) + " ('" +
                    (dim.symbol.empty() ? std::string("?") : dim.symbol) + "', shape " + v->shape.ToString() +
                    ") is symbolic and not the batch axis: give --data FILE.npz to take its size from the data");
      }
    }
    if (deciding.count(v)) {
      // Its value decides shapes: the first `batch` rows of the data (rank 0: the value itself).
      if (!array)
        throw Error("input '" + v->name + "' decides shapes by its value: give --data with an array '" + v->name + "'");
      if (rank == 0) {
        r.values[v->name] = *array;
      } else {
        if (array->dims()[0] < batch)
          throw Error(data_name + ": array '" + v->name + "' has " + std::to_string(array->dims()[0]) +
                      " rows, fewer than --batch " + std::to_string(batch));
        std::vector<int64_t> dims = array->dims();
        dims[0] = batch;
        Tensor t(array->dtype(), dims);
        const size_t row = array->nbytes() / static_cast<size_t>(array->dims()[0]);
        if (row) std::memcpy(t.raw(), array->raw(), row * static_cast<size_t>(batch));
        r.values[v->name] = std::move(t);
      }
    }
    r.descs[v->name] = std::move(d);
  }
  return r;
}

void AddTrainerOutputs(Graph& step, const StepGraphInfo& info) {
  auto add = [&](Value* v) {
    if (v && std::find(step.outputs.begin(), step.outputs.end(), v) == step.outputs.end()) step.outputs.push_back(v);
  };
  add(step.FindValue(info.loss));
  add(info.grad_norm);
  add(info.skipped);
  for (const auto& b : step.update_bindings) add(b.next);
}

MemoryReport PlanMemory(const Graph& step, int64_t batch, const std::map<std::string, Tensor>* data,
                        const std::string& loss, const std::string& data_name) {
  const BatchInputs in = InputsForBatch(step, batch, data, data_name);
  std::unique_ptr<Plan> plan = Plan::Compile(step, in.descs, in.known(), 0, /*state_in_place=*/true);
  return ReportMemory(step, *plan, loss);
}

}  // namespace ot
