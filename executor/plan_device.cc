// The device side of a Plan (Plan::on_device()): device copies of the buffers that live outside the arena, the
// state's upload and download, and a run: inputs copied to the device, the kernels issued in plan order on the
// device's stream, the next state that was not written in place copied into the device state, the results copied
// back, one synchronisation at the end. From the third run on, a device with graphs replays the run's kernels as one
// captured graph instead of issuing them one by one.
#include <cstring>

#include "executor/plan.h"
#include "graph/error.h"

namespace ot {

namespace {
// Scalar state (step counters, the loss scale and its counters, the learning rate) is copied back to the host after
// every run: the Trainer reads it each step. Small parameters are not (a LayerNorm's 64 weights are state too).
constexpr size_t kSmallState = 8;
// The run a plan's graph is captured at (see Plan::graph_).
constexpr int64_t kCaptureAtRun = 3;
}  // namespace

void Plan::SetUpDevice(const Graph& g) {
  auto alloc = [&](size_t n, const std::string& what) {
    void* q = device_->Alloc(n, what);
    dev_allocs_.push_back(q);
    return static_cast<uint8_t*>(q);
  };
  dev_arena_ = alloc(arena_size_, "the step's arena");
  dev_buf_.assign(bufs_.size(), nullptr);
  for (size_t b = 0; b < bufs_.size(); ++b) {
    const Buffer& B = bufs_[b];
    const size_t n = B.desc.nbytes();
    switch (B.kind) {
      case BufKind::kArena: break;
      case BufKind::kConst:
        dev_buf_[b] = alloc(n, "constant '" + B.name + "'");
        device_->CopyToDevice(dev_buf_[b], B.constant->raw(), n);  // state again before the first run
        break;
      case BufKind::kInput: dev_buf_[b] = alloc(n, "input '" + B.name + "'"); break;
      case BufKind::kOutput:
        if (B.state_buf < 0) dev_buf_[b] = alloc(n, "output '" + B.name + "'");
        break;
    }
  }
  for (size_t b = 0; b < bufs_.size(); ++b)
    if (bufs_[b].kind == BufKind::kOutput && bufs_[b].state_buf >= 0) dev_buf_[b] = dev_buf_[static_cast<size_t>(bufs_[b].state_buf)];
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
  for (size_t b = 0; b < bufs_.size(); ++b) {
    const Buffer& B = bufs_[b];
    if (B.kind != BufKind::kInput) continue;
    auto it = feeds.find(input_names_[static_cast<size_t>(B.io_index)]);
    if (it == feeds.end()) throw Error("input '" + B.name + "' was not given");
    if (it->second.nbytes() != B.desc.nbytes()) throw Error("input '" + B.name + "' changed size");
    device_->CopyToDevice(dev_buf_[b], it->second.raw(), B.desc.nbytes());
  }
  if (tracing_) {
    trace_.assign(steps_.size(), TraceSlot{});
    run_start_ = std::chrono::steady_clock::now();
  } else {
    trace_.clear();
  }
  // The kernels and the next-state copies: issued one by one, or the captured graph of them replayed.
  auto issue = [&] {
    std::vector<const void*> in;
    std::vector<void*> out;
    for (size_t i = 0; i < steps_.size(); ++i) RunStep(i, in, out);
    for (auto [x, ob] : state_copies_)
      device_->CopyOnDevice(dev_buf_[static_cast<size_t>(x)], BufferPtr(ob),
                            bufs_[static_cast<size_t>(x)].desc.nbytes());
  };
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
