// The memory report of a compiled training step (`onnx-train plan`, DESIGN.md "memory plan"): the planned peak
// bytes of one step and what they hold, from the Plan's buffers and their lifetimes -- nothing runs.
//
// Liveness model (the plan's, in plan order): state, constants and fed inputs are resident for the whole step;
// an arena value lives from the kernel that writes it to the last kernel that reads it; a graph output (the next
// values of the state, the loss...) lives from the kernel that writes it to the end of the step (Plan::Run writes
// it into the caller's tensor, which the Trainer then copies into the state). The peak is the kernel at which the
// live bytes are largest; the report splits exactly those bytes (the parts sum to peak_bytes):
//   parameters        trained parameters (the fp32 masters under AMP): the OptimizerUpdate node's params
//   half_copies       state bound to the OptimizerUpdate's half-copy outputs (attribute half_params), and any
//                     other fp16/bf16 state that is not a trained parameter
//   optimizer_state   all other state (moments, step, micro-step and gradient sums, loss scale, BN running
//                     statistics) and the constants only the optimizer reads (the learning rate)
//   saved_activations values the forward computes -- or that are fed as data -- and a backward kernel reads
//   gradients         the OptimizerUpdate node's gradient inputs, and the values they copy (through autodiff's
//                     Identity that names each gradient, a Cast, a Sum of partial gradients)
//   transient         everything else live at the peak; of which `constants` (frozen weights, folded constants)
//                     and `step_outputs` (graph outputs: next state, loss) are given on their own too.
// Backward nodes are those reachable through consumers from the loss-gradient seed (the initializer
// "<loss>_grad_seed_N" that passes/autodiff.cc adds), stopping at the OptimizerUpdate node, and the kernels that
// the plan runs after the backward has begun whose outputs only backward nodes read (a gradient rule's Transpose
// of a forward value); the rest is forward. So a value counts as saved when the plan keeps it from the forward
// for the backward: a backward-only Cast that runs during the forward makes its output the saved value.
// Sizes are the values' bytes (dtype size x elements); arena_bytes is the plan's arena (aligned offsets, best
// fit, in-place reuse, workspaces), so it is at least the liveness peak of the arena values less what in-place
// reuse saved at that step.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/plan.h"
#include "graph/graph.h"
#include "passes/step_graph.h"

namespace ot {

struct SavedActivation {
  std::string name;
  std::string op;  // the producing node's op type; "input" for fed data
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;
  int64_t bytes = 0;
  std::string part;  // live_at_peak: the part of the report it counts in ("saved_activations", "transient"...)
};

struct MemoryReport {
  int64_t peak_bytes = 0;
  int peak_step = -1;     // the plan step at the peak (-1: the plan has no kernels)
  std::string peak_node;  // its node, described
  int64_t parameters = 0, half_copies = 0, optimizer_state = 0, saved_activations = 0, gradients = 0, transient = 0;
  int64_t constants = 0, step_outputs = 0;  // parts of `transient`
  // Over the whole step, not only at the peak.
  int64_t saved_activations_total = 0;  // bytes of every saved value
  int64_t arena_bytes = 0;
  int64_t kernels = 0;
  // The allocator's view (Plan::memory_plan(), passes/memory_plan.h): what a run of the plan holds at its peak --
  // resident bytes (state, constants, fed inputs, the output tensors Run allocates) plus the arena's live bytes,
  // with in-place outputs sharing their input's memory and each kernel's workspace live during its step, every
  // arena size rounded up to 64 bytes. The parts above split the values' liveness instead (an in-place pair counts
  // twice at its step, workspaces not at all), so planned_peak_bytes may differ from peak_bytes either way.
  int64_t planned_peak_bytes = 0;
  int planned_peak_step = -1;
  int64_t resident_bytes = 0;   // of planned_peak_bytes
  int64_t workspace_bytes = 0;  // the largest workspace any one kernel declared
  int64_t workspace_total = 0;  // summed over the kernels (each is live during its own step only)
  int64_t heap_bytes = 0;       // declared outside the arena: library allocations, returned handles (Plan::heap_bytes)
  int64_t inplace_saved_bytes = 0;            // bytes of the outputs that took their input's memory
  std::vector<SavedActivation> largest;       // the 10 largest saved values, largest first
  std::vector<SavedActivation> live_at_peak;  // the 10 largest values live at the peak, largest first
};

// The report of `plan`, compiled from `step` (the same graph object). `loss`: the loss value's name (its seed is
// "<loss>_grad_seed_N"); empty: any "*_grad_seed_N" initializer. Throws Error when the step has no seed.
MemoryReport ReportMemory(const Graph& step, const Plan& plan, const std::string& loss = "");

// The concrete inputs of `step` for batch `batch`: axis 0 of every fed input (not of scalars) is the batch; other
// symbolic dims come from `data` (its array of the same name; axis 0 ignored). Inputs whose values decide shapes
// take the first `batch` rows of their array. Errors name the input and dim that cannot be resolved (`data_name`,
// e.g. the .npz path, names the data in messages).
struct BatchInputs {
  std::map<std::string, TensorDesc> descs;
  std::map<std::string, Tensor> values;  // shape-deciding inputs only
  std::map<std::string, const Tensor*> known() const;
};
BatchInputs InputsForBatch(const Graph& step, int64_t batch, const std::map<std::string, Tensor>* data = nullptr,
                           const std::string& data_name = "the data");

// The graph outputs the Trainer gives a step before compiling it (Trainer::MakeExecutor: the loss, grad_norm,
// skipped and the next value of every state), so a plan of `step` is the plan `train` runs.
void AddTrainerOutputs(Graph& step, const StepGraphInfo& info);

// InputsForBatch + Plan::Compile + ReportMemory.
MemoryReport PlanMemory(const Graph& step, int64_t batch, const std::map<std::string, Tensor>* data = nullptr,
                        const std::string& loss = "", const std::string& data_name = "the data");

}  // namespace ot
