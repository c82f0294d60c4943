// The executor: compiles a Graph for concrete input shapes into a Plan (cached per input signature) and runs
// it on the CPU with a TBB flow graph.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/device.h"
#include "executor/kernel_event.h"
#include "executor/threads.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace ot {

class BatchStager;  // executor/batch_stager.h

struct ExecutorOptions {
  uint64_t seed = 0;            // random ops (Dropout in training mode) draw from this seed
  bool profile = false;         // time every kernel (see kernel_profile())
  bool check_numerics = false;  // scan every float output after its kernel (see first_nonfinite())
  bool trace = false;           // record when each kernel of a run ran (see last_trace())
  // Plan::Compile's state_in_place: next-state outputs written into the state's storage (a run changes the
  // graph's state itself; for a caller that copies the outputs into the state anyway, the Trainer).
  bool state_in_place = false;
  // Where plans run (executor/device.h): null = the CPU.
  std::shared_ptr<DeviceBackend> device;
  // On a device: the graph outputs the caller reads (by name); the others come back as empty tensors instead of
  // being copied to the host every run (a training step's model outputs). Empty: all.
  std::vector<std::string> host_outputs;
  // On a device: batches uploaded ahead on the copy stream (executor/batch_stager.h), which plans take when their
  // feeds are one. Null: every run uploads its own feeds.
  std::shared_ptr<BatchStager> stager;
};

// Time spent per op type over all runs so far, largest first.
struct OpTime {
  std::string op;
  int64_t kernels = 0;  // kernels of this op in the plan
  double ms = 0;
  double flops = 0;  // of one run of these kernels (KernelInfo::flops), 0 where not counted
};

class Plan;

// Throws Error naming the input when `t`'s dtype or static dims differ from what the graph declares for `v`.
void CheckFeed(const Value* v, const Tensor& t);

class Executor {
 public:
  explicit Executor(const Graph& g, ExecutorOptions opts = {});
  ~Executor();
  // Runs the graph on its inputs, by name (every real input must be given; an initializer may be overridden).
  // Returns the graph outputs in order.
  std::vector<Tensor> Run(const std::map<std::string, Tensor>& feeds);
  // Runs so far; random kernels (Dropout) key their draws on it. A resumed training run sets it back to the
  // value it had, so it draws the same numbers as the uninterrupted run.
  uint64_t run_counter() const { return runs_; }
  void set_run_counter(uint64_t n) { runs_ = n; }
  // ExecutorOptions::check_numerics: the first node (in plan order) that wrote a NaN or infinity in the last
  // run, or null.
  const Node* first_nonfinite() const;
  // Its precision, input ranges and non-finite output counts (Plan::first_nonfinite_detail).
  std::string first_nonfinite_detail() const;
  // Plan statistics of the last run (for `plan`/tests): kernels run per step and arena bytes.
  int64_t last_kernel_count() const;
  int64_t last_arena_bytes() const;
  // True when the last run drew random numbers (Dropout in training mode): its outputs are not reproducible
  // by another RNG.
  bool last_has_random_kernels() const;
  // With ExecutorOptions::profile: time per op type in the last plan, summed over its runs.
  std::vector<OpTime> kernel_profile() const;
  // The same per node (op = "Op node-name"), largest first.
  std::vector<OpTime> node_profile() const;
  // With ExecutorOptions::trace: the kernels of the last run, in plan order, with their start and end times.
  std::vector<KernelEvent> last_trace() const;
  void set_trace(bool on);
  // Forgets the kernel times so far (a profile without the first run's plan making, JIT and library set-up).
  void ResetProfile();
  // On a device with state_in_place the state lives on the device between runs: SyncStateToHost() brings the
  // graph's state tensors up to date (before reading, saving or evaluating them), StateChangedOnHost() makes the
  // next run upload them again (after the caller wrote them). Both do nothing on the CPU.
  void SyncStateToHost();
  void StateChangedOnHost();
  bool on_device() const { return opts_.device != nullptr; }

 private:
  const Graph& graph_;
  ExecutorOptions opts_;
  std::vector<std::string> shape_relevant_inputs_;  // inputs whose values enter the plan signature
  std::map<std::string, std::unique_ptr<Plan>> plans_;
  Plan* last_ = nullptr;
  uint64_t runs_ = 0;
};

}  // namespace ot
