// The device side of a Plan (Plan::on_device()): device copies of the buffers that live outside the arena, the
// state's upload and download, and a run: inputs copied to the device (stream 0), the kernels issued in plan order
// on their streams (executor/stream_assign.h) with events between them, the other streams joined back into stream
// 0, the next state that was not written in place copied into the device state, the results copied back, one
// synchronisation at the end. From the third run on, a device with graphs replays the run's kernels as one captured
// graph instead of issuing them one by one; the capture holds the fork and the join, so the graph keeps the
// streams' concurrency as its branches.
#include <algorithm>
#include <cstring>

#include "executor/batch_stager.h"
#include "executor/plan.h"
#include "graph/error.h"

namespace ot {

namespace {
// Scalar state (step counters, the loss scale and its counters, the learning rate) is copied back to the host after
// every run: the Trainer reads it each step. Small parameters are not (a LayerNorm's 64 weights are state too).
constexpr size_t kSmallState = 8;
// The run a plan's graph is captured at (see Plan::graph_).
constexpr int64_t kCaptureAtRun = 3;
// The cost estimate streams are assigned by, in microseconds of a current data-centre GPU: a launch, the bytes the
// kernel moves at memory speed and its counted flops (KernelInfo::flops, GEMMs) at a tensor-core rate; and the
// latency a cross-stream wait adds. Only their proportions matter: which branches are long enough to overlap.
constexpr double kLaunchUs = 3, kBytesPerUs = 2e6, kFlopsPerUs = 1e8, kEventUs = 2;
}  // namespace

// Called once per device plan (SetUpDevice). The dependency DAG is steps_' deps, which already hold every ordering
// the arena needs (plan.cc PlanArena: a step writing a region waits for every user of the region's earlier
// occupants, workspaces included; WriteStateInPlace: a state's readers before its in-place writer) -- the same
// edges that let the CPU's flow graph run kernels side by side -- so kernels on different streams never race for
// memory. The schedule is checked here (CheckSchedule): a plan never runs with a missing event.
void Plan::ScheduleStreams() {
  const int want = std::max(1, std::min(device_->options().streams, device_->MaxStreams()));
  std::vector<std::vector<int>> deps;
  std::vector<double> cost;
  deps.reserve(steps_.size());
  cost.reserve(steps_.size());
  for (const Step& st : steps_) {
    deps.push_back(st.deps);
    double bytes = 0;
    for (int b : st.in_bufs)
      if (b >= 0) bytes += static_cast<double>(bufs_[static_cast<size_t>(b)].desc.nbytes());
    for (int b : st.out_bufs)
      if (b >= 0) bytes += static_cast<double>(bufs_[static_cast<size_t>(b)].desc.nbytes());
    cost.push_back(kLaunchUs + bytes / kBytesPerUs + st.kernel.flops / kFlopsPerUs);
  }
  sched_ = AssignStreams(deps, cost, want, kEventUs);
  const std::string bad = CheckSchedule(deps, sched_);
  if (!bad.empty()) throw Error("internal error: the stream schedule misses an ordering: " + bad);
  if (sched_.streams <= 1) return;
  for (int e = 0; e < sched_.events; ++e) events_.push_back(device_->CreateEvent());
  fork_event_ = device_->CreateEvent();
  join_events_.assign(static_cast<size_t>(sched_.streams), nullptr);
  for (int s = 1; s < sched_.streams; ++s) join_events_[static_cast<size_t>(s)] = device_->CreateEvent();
}

void Plan::ReleaseDeviceEvents() {
  for (void* e : events_) device_->DestroyEvent(e);
  for (void* e : join_events_)
    if (e) device_->DestroyEvent(e);
  if (fork_event_) device_->DestroyEvent(fork_event_);
  events_.clear();
  join_events_.clear();
  fork_event_ = nullptr;
}

// The kernels of one run and the next-state copies. With several streams: fork (every stream waits for what stream
// 0 has queued: the uploads, and inside a capture this is how the other streams join it), each kernel after its
// waits on its own stream and followed by its event, then the join (stream 0 waits for every other stream's last
// work), so that what follows on stream 0 -- the next-state copies, which overwrite state any stream may read, the
// downloads, EndCapture -- comes after every kernel.
void Plan::IssueOnDevice() {
  std::vector<const void*> in;
  std::vector<void*> out;
  const bool multi = !issue_serial_ && sched_.streams > 1;
  if (multi) {
    device_->RecordEvent(fork_event_, 0);
    for (int s = 1; s < sched_.streams; ++s) device_->WaitEvent(s, fork_event_);
  }
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (multi)
      for (int w : sched_.waits[i])
        device_->WaitEvent(sched_.stream[i], events_[static_cast<size_t>(sched_.event[static_cast<size_t>(w)])]);
    RunStep(i, in, out);
    if (multi && sched_.event[i] >= 0)
      device_->RecordEvent(events_[static_cast<size_t>(sched_.event[i])], sched_.stream[i]);
  }
  if (multi)
    for (int s = 1; s < sched_.streams; ++s) {
      device_->RecordEvent(join_events_[static_cast<size_t>(s)], s);
      device_->WaitEvent(0, join_events_[static_cast<size_t>(s)]);
    }
  for (auto [x, ob] : state_copies_)
    device_->CopyOnDevice(dev_buf_[static_cast<size_t>(x)], BufferPtr(ob), bufs_[static_cast<size_t>(x)].desc.nbytes());
}

void Plan::SetUpDevice(const Graph& g) {
  auto alloc = [&](size_t n, const std::string& what) {
    void* q = device_->Alloc(n, what);
    dev_allocs_.push_back(q);
    return static_cast<uint8_t*>(q);
  };
  CheckArenaFits(device_->FreeMemory(), device_->name());  // before anything is allocated on the device
  dev_arena_ = alloc(arena_size_, "the step's arena");
  dev_buf_.assign(bufs_.size(), nullptr);
  for (size_t b = 0; b < bufs_.size(); ++b) {
    const Buffer& B = bufs_[b];
    const size_t n = B.desc.nbytes();
    switch (B.kind) {
      case BufKind::kArena:
        break;
      case BufKind::kConst:
        dev_buf_[b] = alloc(n, "constant '" + B.name + "'");
        device_->CopyToDevice(dev_buf_[b], B.constant->raw(), n);  // state again before the first run
        break;
      case BufKind::kInput:
        dev_buf_[b] = alloc(n, "input '" + B.name + "'");
        break;
      case BufKind::kOutput:
        if (B.state_buf < 0) dev_buf_[b] = alloc(n, "output '" + B.name + "'");
        break;
    }
  }
  for (size_t b = 0; b < bufs_.size(); ++b)
    if (bufs_[b].kind == BufKind::kOutput && bufs_[b].state_buf >= 0)
      dev_buf_[b] = dev_buf_[static_cast<size_t>(bufs_[b].state_buf)];
  // With state_in_place the device state is the state: a next state that was not written in place (a half copy,
  // which the update writes with no input of its own) is copied into it after the run, and Run returns the host
  // state tensor for it, as for one written in place.
  if (state_in_place_) {
    for (const auto& bind : g.update_bindings) {
      int x = -1;
      for (int s : state_bufs_)
        if (bufs_[static_cast<size_t>(s)].constant == bind.state->initializer.get()) x = s;
      int oi = -1;
      for (size_t i = 0; i < g.outputs.size() && oi < 0; ++i)
        if (g.outputs[i] == bind.next) oi = static_cast<int>(i);
      if (x < 0 || oi < 0) continue;
      const int ob = output_bufs_[static_cast<size_t>(oi)];
      if (bufs_[static_cast<size_t>(ob)].state_buf == x) continue;
      if (bufs_[static_cast<size_t>(ob)].desc.nbytes() != bufs_[static_cast<size_t>(x)].desc.nbytes())
        throw Error("state '" + bind.state->name + "' changes size in the step");
      state_copies_.push_back({x, ob});
    }
  }
  ScheduleStreams();
  device_->Synchronize();
}

void Plan::DownloadState() {
  if (!device_ || !state_in_place_ || upload_state_) return;  // the host already holds the state
  for (int x : state_bufs_) {
    const Buffer& B = bufs_[static_cast<size_t>(x)];
    device_->CopyToHost(const_cast<void*>(B.constant->raw()), dev_buf_[static_cast<size_t>(x)], B.desc.nbytes());
  }
  device_->Synchronize();
}

void Plan::RunOnDevice(const std::map<std::string, Tensor>& feeds, std::vector<Tensor>& results) {
  if (upload_state_ || !state_in_place_) {
    for (int x : state_bufs_) {
      const Buffer& B = bufs_[static_cast<size_t>(x)];
      device_->CopyToDevice(dev_buf_[static_cast<size_t>(x)], B.constant->raw(), B.desc.nbytes());
    }
    upload_state_ = false;
  }
  // The fed inputs: from a batch staged ahead on the copy stream when the feeds are one (stream 0 waits for its
  // upload and copies it over on the device), else uploaded here on stream 0.
  std::vector<BatchStager::Input> staged;
  for (size_t b = 0; b < bufs_.size(); ++b) {
    const Buffer& B = bufs_[b];
    if (B.kind != BufKind::kInput) continue;
    auto it = feeds.find(input_names_[static_cast<size_t>(B.io_index)]);
    if (it == feeds.end()) throw Error("input '" + B.name + "' was not given");
    if (it->second.nbytes() != B.desc.nbytes()) throw Error("input '" + B.name + "' changed size");
    staged.push_back({input_names_[static_cast<size_t>(B.io_index)], dev_buf_[b], B.desc.nbytes()});
  }
  if (!stager_ || !stager_->Consume(feeds, staged))
    for (const auto& in : staged) device_->CopyToDevice(in.device, feeds.at(in.name).raw(), in.bytes);
  if (tracing_) {
    trace_.assign(steps_.size(), TraceSlot{});
    run_start_ = std::chrono::steady_clock::now();
  } else {
    trace_.clear();
  }
  // The kernels and the next-state copies: issued one by one, or the captured graph of them replayed. Runs that
  // watch each kernel (a synchronisation after it, its outputs read on stream 0) issue everything on stream 0.
  issue_serial_ = tracing_ || profiling_ || check_numerics_;
  auto issue = [&] { IssueOnDevice(); };
  ++device_runs_;
  last_run_replayed_ = false;
  const bool graphs = device_->options().graphs && device_->SupportsGraphs() && !graph_failed_ && !tracing_ &&
                      !profiling_ && !check_numerics_ && !random_;
  if (graphs && !graph_ && device_runs_ >= kCaptureAtRun) {
    // Record this run. The inputs were copied above, the outputs are copied below: both stay outside the graph,
    // which reads and writes only the fixed device buffers. A kernel that throws while recording ends the capture
    // (nothing recorded has run) and rethrows as it would have in a direct run.
    device_->BeginCapture();
    try {
      issue();
    } catch (...) {
      if (void* g = device_->EndCapture()) device_->ReleaseGraph(g);
      graph_failed_ = true;
      throw;
    }
    graph_ = device_->EndCapture();
    if (!graph_) {
      graph_failed_ = true;  // something could not be recorded: run directly, now and from now on
      issue();
    }
  } else if (!graphs || !graph_) {
    issue();
  }
  if (graphs && graph_) {
    device_->Replay(graph_);
    last_run_replayed_ = true;
  }
  for (size_t i = 0; i < output_bufs_.size(); ++i) {
    const int b = output_bufs_[i];
    const Buffer& B = bufs_[static_cast<size_t>(b)];
    int state = B.kind == BufKind::kOutput && B.io_index == static_cast<int>(i) ? B.state_buf : -1;
    for (auto [x, ob] : state_copies_)
      if (ob == b) state = x;
    if (state >= 0) {
      // The next state, in the device state now (written in place, or copied above): the result is the host state
      // tensor, brought up to date by DownloadState -- no copy of the parameters to the host each step.
      results[i] = *bufs_[static_cast<size_t>(state)].constant;
      continue;
    }
    if (!host_outputs_.empty() && !host_outputs_[i]) continue;  // not read by the caller: stays empty
    results[i] = Tensor(B.desc.dtype, B.desc.dims);
    device_->CopyToHost(results[i].raw(), BufferPtr(b), B.desc.nbytes());
  }
  if (state_in_place_)
    for (int x : state_bufs_) {
      const Buffer& B = bufs_[static_cast<size_t>(x)];
      if (B.desc.nbytes() <= kSmallState)
        device_->CopyToHost(const_cast<void*>(B.constant->raw()), dev_buf_[static_cast<size_t>(x)], B.desc.nbytes());
    }
  device_->Synchronize();
  for (const auto* f : after_run_) (*f)();
}

}  // namespace ot
