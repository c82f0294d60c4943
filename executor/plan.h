// A Plan: one Graph compiled for concrete input shapes (and the values of shape-deciding inputs).
// Compile-time work: shape inference with concrete dims, folding of every node whose inputs are known
// (constants, initializers, Shape of a static tensor, and the integer arithmetic exporters put on top), a kernel
// per remaining node from the CPU kernel registry, and buffer offsets in one arena from passes/memory_plan
// (in-place reuse where a kernel allows it, each kernel's declared workspace placed for its step).
// Run-time work: kernels only, issued by a TBB flow graph as their inputs (and reused memory) become ready.
// Memory of one run: the arena (allocated once per plan), the state/constants/fed inputs (owned elsewhere), and
// the output tensors Run allocates -- except the next-state outputs written into their state's own storage
// (state_in_place), which Run returns as tensors sharing the state's buffer.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "executor/device.h"
#include "executor/kernel_event.h"
#include "executor/kernel_registry.h"
#include "executor/stream_assign.h"
#include "graph/graph.h"
#include "passes/memory_plan.h"

namespace ot {

class BatchStager;  // executor/batch_stager.h

// Values whose *values* some node needs when a plan is made (the registry's value_inputs), transitively through
// the producers that compute them, stopping at ops that read only shapes. Graph inputs among them enter the
// plan signature with their values.
std::vector<const Value*> ValuesNeededAtPlanTime(const Graph& g);

class Plan {
 public:
  // `inputs`: dtype and dims of every fed graph input; `known`: values of the fed inputs that decide shapes.
  // `state_in_place`: write a next-state output (Graph::update_bindings) straight into its state's storage when
  // the kernel that computes it allows it in place for that state as input (KernelInfo::inplace) and no kernel
  // reads the state after it; every other reader of the state runs before that kernel. A run then changes the
  // state itself (Run returns those outputs sharing the state's buffer): only for a caller that would copy the
  // outputs into the state anyway (the Trainer), never for one that runs a step to look at it.
  static std::unique_ptr<Plan> Compile(const Graph& g, const std::map<std::string, TensorDesc>& inputs,
                                       const std::map<std::string, const Tensor*>& known, uint64_t seed,
                                       bool state_in_place = false, std::shared_ptr<DeviceBackend> device = nullptr);
  ~Plan();
  // `run`: the run counter random kernels key on (KernelIO::run). `check_numerics`: after each kernel, scan its
  // float outputs; the first kernel (in plan order) that wrote a NaN or infinity is then first_nonfinite().
  std::vector<Tensor> Run(const std::map<std::string, Tensor>& feeds, uint64_t run = 0, bool check_numerics = false);
  // After a run with check_numerics: the node of the first kernel whose output was not finite, or null.
  const Node* first_nonfinite() const;
  // What that kernel saw, written when it was caught (its buffers are reused later): the precision it ran in, the
  // range of each float input (min, max, non-finite count) and how many outputs were NaN or infinite.
  std::string first_nonfinite_detail() const;

  // On a device (Compile's `device`): the state, constants, fed inputs and outputs have device copies, the arena is
  // device memory and the kernels are issued in plan order, each on the stream stream_schedule() gives it, with
  // events between streams (executor/stream_assign.h; DeviceOptions::streams). Results are copied to the host. The
  // state is uploaded before a run -- before every run, or with state_in_place only before the first run and after
  // MarkHostStateChanged(): the device copy is then the state, updated in place each step, and the host tensors are
  // brought up to date by DownloadState() (scalar state, step counters and the loss scale, after every run).
  bool on_device() const { return device_ != nullptr; }
  // Whether the last device run was a replay of the captured graph (for tests).
  bool replayed_graph() const { return last_run_replayed_; }
  // The streams of the kernels and the events between them (on a device; one stream with --streams 1). Runs that
  // watch kernels one at a time (profiling, tracing, --check-numerics) issue everything on stream 0 instead.
  const StreamSchedule& stream_schedule() const { return sched_; }
  void MarkHostStateChanged() { upload_state_ = true; }
  // On a device: which graph outputs Run copies to the host (by output index; empty: all). The rest are returned as
  // empty tensors.
  void set_host_outputs(std::vector<bool> wanted) { host_outputs_ = std::move(wanted); }
  void DownloadState();
  // On a device: batches staged ahead (executor/batch_stager.h) are taken from there when a run's feeds are one;
  // other feeds are uploaded by the run itself.
  void set_stager(std::shared_ptr<BatchStager> s) { stager_ = std::move(s); }

  int64_t kernel_count() const { return static_cast<int64_t>(steps_.size()); }
  int64_t arena_bytes() const { return static_cast<int64_t>(arena_size_); }
  // The memory plan the arena follows (passes/memory_plan.h), over buffer_views() and step_views() in order:
  // resident_bytes counts the state, constants and fed inputs the steps read and the output tensors Run
  // allocates (peak_live_bytes = resident + the arena's live peak, workspaces included).
  const MemoryPlan& memory_plan() const { return mplan_; }
  // Bytes of the output tensors Run allocates each run (part of memory_plan().resident_bytes).
  int64_t output_bytes() const { return output_bytes_; }
  // Heap a run allocates beyond the plan's buffers, declared rather than placed: the libraries' own allocations
  // (KernelInfo::heap_bytes; the largest of the exclusive kernels, which run one at a time, plus every other
  // kernel's) and the handles of the returned tensors (their dims, control blocks, allocator rounding).
  int64_t heap_bytes() const { return heap_bytes_; }
  // Per step: the workspace bytes its kernel declared.
  int64_t workspace_bytes(int step) const {
    return static_cast<int64_t>(steps_[static_cast<size_t>(step)].kernel.workspace_bytes);
  }
  // Graph output indices written into their state's storage (Compile's state_in_place).
  const std::vector<int>& outputs_in_state() const { return outputs_in_state_; }
  int64_t folded_count() const { return folded_; }
  // True when a kernel draws random numbers (Dropout in training mode).
  bool has_random_kernels() const { return random_; }
  // Per-kernel wall time, accumulated over runs while profiling is on: (node description, ns, runs).
  void set_profiling(bool on) { profiling_ = on; }
  void reset_profile() {
    for (size_t i = 0; i < steps_.size(); ++i) step_ns_[i] = 0;
  }
  struct KernelTime {
    std::string node;
    std::string op;
    int64_t ns = 0;
    double flops = 0;  // per call (KernelInfo::flops)
  };
  std::vector<KernelTime> kernel_times() const;
  // With tracing on, every run records when each kernel started and ended and on which thread; trace() gives the
  // last run's events in plan order (the data of `--profile`'s Chrome trace).
  void set_tracing(bool on) { tracing_ = on; }
  std::vector<KernelEvent> trace() const;

  // Read-only view of the compiled plan, for reports (training/memory_report.h). Every buffer with its storage
  // and lifetime: kArena values live from the step that writes them (def_step) to the last step that reads them
  // (last_step) at `offset` in the arena; kConst (state read from its initializer at run time, or a constant of
  // the plan), kInput (fed) and kOutput (written into the caller's output tensor) are not in the arena, and for
  // them def_step is -1 unless a step writes them. Indices into buffer_views() are those of StepView's lists.
  enum class BufferKind { kArena, kConst, kInput, kOutput };
  struct BufferView {
    std::string name;  // the graph value
    TensorDesc desc;
    BufferKind kind = BufferKind::kArena;
    int64_t offset = 0;  // kArena only
    int def_step = -1, last_step = -1;
    int shares = -1;        // kArena: the buffer whose memory it took in place (MemoryPlan::shares)
    bool in_state = false;  // kOutput written into its state's storage: no bytes of its own
  };
  struct StepView {
    const Node* node = nullptr;
    std::vector<int> in_bufs, out_bufs;        // -1 = absent
    int64_t workspace = 0;                     // KernelInfo::workspace_bytes
    std::vector<std::pair<int, int>> inplace;  // KernelInfo::inplace (output index, input index)
    std::vector<std::pair<int, int>> views;    // KernelInfo::views (output index, input index)
  };
  std::vector<BufferView> buffer_views() const;
  // The kernels in plan order (the order liveness is measured in).
  std::vector<StepView> step_views() const;
  // The ordering the arena's reuse needs, checked over the plan's dependencies (transitively): every step that writes
  // arena bytes -- an output, or its workspace -- runs after every earlier step (plan order) that read or wrote
  // those bytes as another value, and an output written in place runs after every earlier reader of the memory it
  // takes over (its input and the views of it). Returns the first violation, described, or "". Quadratic in the
  // kernels (for debug builds and the tests: Compile calls it where passes are verified).
  std::string CheckMemoryOrder() const;

 private:
  enum class BufKind { kArena, kConst, kInput, kOutput };
  struct Buffer {
    BufKind kind = BufKind::kArena;
    TensorDesc desc;
    std::string name;
    size_t offset = 0;                 // kArena
    const Tensor* constant = nullptr;  // kConst
    int io_index = -1;                 // kInput: index into input_names_; kOutput: graph output index
    int def_step = -1, last_step = -1;
    int state_buf = -1;  // kOutput written into this kConst state buffer's storage (state_in_place)
  };
  struct Step {
    const Node* node = nullptr;
    KernelInfo kernel;
    std::vector<int> in_bufs, out_bufs;  // -1 = absent
    std::vector<int> deps;               // steps that must finish first
    int64_t workspace_offset = -1;       // in the arena; -1: no workspace
  };
  struct FlowGraph;
  class Compiler;  // the state of one Compile (plan.cc)
  friend class Compiler;

  Plan() = default;
  void PlanArena();
  void WriteStateInPlace(const Graph& g);
  void BuildFlowGraph();
  void RunStep(size_t i, std::vector<const void*>& in, std::vector<void*>& out);
  uint8_t* BufferPtr(int b) const;
  // executor/plan_device.cc
  void SetUpDevice(const Graph& g);
  void RunOnDevice(const std::map<std::string, Tensor>& feeds, std::vector<Tensor>& results);
  void ScheduleStreams();
  void IssueOnDevice();
  void ReleaseDeviceEvents();
  void NoteNonFinite(size_t i, const std::vector<const void*>& in);

  std::vector<Buffer> bufs_;
  std::vector<Step> steps_;
  std::vector<std::string> input_names_;
  std::vector<int> output_bufs_;  // per graph output
  std::vector<std::shared_ptr<Tensor>> owned_;
  size_t arena_size_ = 0;
  MemoryPlan mplan_;
  int64_t output_bytes_ = 0;
  int64_t heap_bytes_ = 0;
  std::vector<int> outputs_in_state_;
  std::shared_ptr<uint8_t> arena_;
  // Allocates the arena before the first run, after checking it fits in the memory available (an error naming the
  // largest buffers otherwise).
  void EnsureArena();
  // Throws Error naming the largest values when the arena needs more than `available` bytes of `where` (0: unknown).
  void CheckArenaFits(int64_t available, const std::string& where) const;
  int64_t folded_ = 0;
  bool random_ = false;

  // Per-run pointer tables.
  std::vector<const void*> input_ptrs_;
  std::vector<void*> output_ptrs_;
  std::unique_ptr<FlowGraph> flow_;
  bool profiling_ = false;
  std::unique_ptr<std::atomic<int64_t>[]> step_ns_;
  bool tracing_ = false;
  struct TraceSlot {
    int64_t start = 0, end = 0;
    int thread = 0;
  };
  std::vector<TraceSlot> trace_;  // per step, written by that step only
  std::chrono::steady_clock::time_point run_start_;
  uint64_t run_ = 0;
  bool check_numerics_ = false;
  std::atomic<int64_t> first_nonfinite_{-1};
  mutable std::mutex detail_mu_;
  std::map<int64_t, std::string> nonfinite_detail_;  // by step; the smallest is the first
  std::exception_ptr error_;
  std::mutex error_mu_;

  // Device plans (see on_device()).
  std::shared_ptr<DeviceBackend> device_;
  std::vector<void*> dev_allocs_;  // freed with the plan
  uint8_t* dev_arena_ = nullptr;
  std::vector<uint8_t*> dev_buf_;                  // per buffer: its device copy (kConst, kInput, kOutput)
  std::vector<int> state_bufs_;                    // kConst buffers that are training state
  std::vector<std::pair<int, int>> state_copies_;  // (state buffer, output buffer): next state not written in place
  bool state_in_place_ = false;
  bool upload_state_ = true;
  std::vector<bool> host_outputs_;
  // The steady-state run as a device graph (DeviceBackend::BeginCapture): captured at the third run (the first two
  // make the kernels' one-time set-up -- NVRTC modules, GEMM algorithms, descriptor blocks -- which cannot be
  // recorded), replayed after that. Never with profiling, tracing, numerics checks or random kernels (their runs
  // differ from one another); graph_failed_ after a capture that failed: the plan runs directly from then on.
  void* graph_ = nullptr;
  bool graph_failed_ = false;
  int64_t device_runs_ = 0;
  bool last_run_replayed_ = false;
  std::vector<const std::function<void()>*> after_run_;  // steps' KernelInfo::after_run, in plan order
  // Multi-stream issue (ScheduleStreams): the schedule over steps_' deps, its events (one per recording step),
  // the fork event (recorded on stream 0 after the run's uploads, waited for by every other stream before its
  // first kernel) and per stream s > 0 its join event (recorded after its last kernel, waited for by stream 0
  // before the next-state copies and the downloads). issue_serial_: this run issues everything on stream 0.
  StreamSchedule sched_;
  std::vector<void*> events_;
  void* fork_event_ = nullptr;
  std::vector<void*> join_events_;
  bool issue_serial_ = false;
  std::shared_ptr<BatchStager> stager_;
};

}  // namespace ot
