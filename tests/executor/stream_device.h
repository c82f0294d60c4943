// A fake device with real concurrent streams, for the multi-stream issue (executor/stream_assign.h, plan_device.cc)
// and the batch stager (executor/batch_stager.h) without a GPU. Like HostDevice, its memory is host memory and its
// kernels are the CPU's -- but nothing runs when it is issued: kernels, copies, event records and event waits are
// queued on their stream, and they run only when the host waits (Synchronize, SynchronizeEvent), in an order drawn
// from a seeded generator among every stream whose head may run: a record always may, a wait once the record it
// waits for has run (CUDA's semantics: the latest record issued before the wait; none issued: nothing to wait
// for). So any ordering the plan does not express with events -- a missing wait, a buffer reused on another stream
// without a dependency, a copy reading a staging buffer after the host rewrote it -- changes the numbers or trips a
// check here, and different seeds try different interleavings.
//
// Graphs: BeginCapture captures stream 0; another stream joins the capture by waiting for an event recorded on a
// captured stream during the capture (an event recorded before the capture is an error, as in CUDA); captured work
// is stored, not run. EndCapture fails (returns null, counts `unjoined`) when a captured stream other than 0 was not
// joined back: its last captured work must be a record that stream 0 then waited for. Replay issues the stored work
// again in its order (the same dependencies as at capture). Work on a stream that is not in the capture runs live,
// as CUDA does for other threads' streams; a kernel issued that way while capturing is counted
// (`kernels_outside_capture`): the plan must not do it.
#pragma once
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "tests/executor/host_device.h"

namespace ot::test {

class StreamDevice : public HostDevice {
 public:
  static constexpr int kStreams = 9;  // 8 for kernels and a copy stream (CopyStream() = 8), like the CUDA backend

  explicit StreamDevice(uint64_t seed, int streams = 4) : rng_(seed) {
    DeviceOptions o;
    o.streams = streams;
    set_options(o);
  }
  ~StreamDevice() override {
    for (auto* g : graphs_) delete g;
  }

  // Counters and knobs for tests.
  int captures = 0, replays = 0, unjoined = 0;
  int64_t kernels_run = 0, kernels_outside_capture = 0, staging_overwrites = 0, copy_stream_copies = 0;
  int64_t stream0_uploads = 0;  // bytes copied host to device on stream 0
  std::array<int64_t, kStreams> kernels_per_stream{};
  bool supports_graphs = false;
  bool ignore_waits = false;  // a device that does not honour events (to show the checks would notice)
  int eager_stream = -1;      // a stream that runs whenever it can (an adversarial order: it races ahead)

  std::string name() const override { return "stream-fake"; }
  int MaxStreams() const override { return kStreams - 1; }
  int CopyStream() const override { return kStreams - 1; }
  void* stream() override { return StreamHandle(0); }
  void* StreamHandle(int s) override { return &tags_[static_cast<size_t>(s)]; }

  std::optional<KernelInfo> MakeKernel(const KernelContext& ctx) const override {
    std::optional<KernelInfo> k = HostDevice::MakeKernel(ctx);
    if (!k) return k;
    const size_t nin = std::max<size_t>(16, ctx.node.inputs.size()),
                 nout = std::max<size_t>(16, ctx.node.outputs.size());
    auto* self = const_cast<StreamDevice*>(this);
    // A launch copies its arguments: the operand tables are the plan's scratch vectors, reused by the next step.
    k->fn = [self, fn = std::move(k->fn), nin, nout](const KernelIO& io) {
      auto in = std::make_shared<std::vector<const void*>>(io.in, io.in + nin);
      auto out = std::make_shared<std::vector<void*>>(io.out, io.out + nout);
      const int s = self->StreamOf(io.stream);
      self->Enqueue(
          s, Op::kWork, nullptr,
          [self, s, fn, in, out, io] {
            KernelIO x = io;
            x.in = in->data();
            x.out = out->data();
            ++self->kernels_run;
            ++self->kernels_per_stream[static_cast<size_t>(s)];
            fn(x);
          },
          /*kernel=*/true);
    };
    return k;
  }

  void CopyToDevice(void* dst, const void* src, size_t n) override { CopyToDeviceOn(0, dst, src, n); }
  void CopyToDeviceOn(int s, void* dst, const void* src, size_t n) override {
    std::lock_guard<std::recursive_mutex> l(mu_);
    to_device += n;
    if (s == CopyStream()) ++copy_stream_copies;
    if (s == 0) stream0_uploads += static_cast<int64_t>(n);
    // The host memory must hold the same bytes when the copy runs as when it was issued.
    auto snap =
        std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(src), static_cast<const uint8_t*>(src) + n);
    Enqueue(s, Op::kWork, nullptr, [this, dst, src, n, snap] {
      if (n && std::memcmp(snap->data(), src, n) != 0) {
        ++staging_overwrites;
        ADD_FAILURE() << "host memory of a copy to the device changed before the copy ran";
      }
      std::memcpy(dst, src, n);
    });
  }
  void CopyToHost(void* dst, const void* src, size_t n) override {
    std::lock_guard<std::recursive_mutex> l(mu_);
    to_host += n;
    Enqueue(0, Op::kWork, nullptr, [dst, src, n] { std::memcpy(dst, src, n); });
  }
  void CopyOnDevice(void* dst, const void* src, size_t n) override { CopyOnDeviceOn(0, dst, src, n); }
  void CopyOnDeviceOn(int s, void* dst, const void* src, size_t n) override {
    Enqueue(s, Op::kWork, nullptr, [dst, src, n] {
      if (dst != src) std::memmove(dst, src, n);
    });
  }

  void* CreateEvent() override { return new Event(); }
  void DestroyEvent(void* e) override { delete static_cast<Event*>(e); }
  void RecordEvent(void* e, int s) override { Enqueue(s, Op::kRecord, static_cast<Event*>(e), nullptr); }
  void WaitEvent(int s, void* e) override { Enqueue(s, Op::kWait, static_cast<Event*>(e), nullptr); }

  void Synchronize() override {
    std::lock_guard<std::recursive_mutex> l(mu_);
    EXPECT_FALSE(capturing_) << "a synchronisation inside the captured run";
    Drain([] { return false; });
  }
  void SynchronizeEvent(void* e) override {
    std::lock_guard<std::recursive_mutex> l(mu_);
    Event* ev = static_cast<Event*>(e);
    const int64_t target = ev->issued;
    // Only the work the record depends on runs (the record's stream, and the streams of records it waits for):
    // the host must not rely on anything else having finished, so nothing else is run for it.
    std::vector<bool> only(kStreams, false);
    if (ev->done < target) only[static_cast<size_t>(StreamRecording(ev, target))] = true;
    Drain([ev, target] { return ev->done >= target; }, &only);
  }

  bool SupportsGraphs() const override { return supports_graphs; }
  void BeginCapture() override {
    std::lock_guard<std::recursive_mutex> l(mu_);
    EXPECT_FALSE(capturing_);
    capturing_ = true;
    captured_.fill(false);
    captured_[0] = true;
    recording_ = new Graph();
  }
  void* EndCapture() override {
    std::lock_guard<std::recursive_mutex> l(mu_);
    EXPECT_TRUE(capturing_);
    capturing_ = false;
    ++captures;
    std::unique_ptr<Graph> g(recording_);
    recording_ = nullptr;
    for (int s = 1; s < kStreams; ++s) {
      if (!captured_[static_cast<size_t>(s)]) continue;
      // Joined: the stream's last captured op is a record that stream 0 waited for afterwards.
      int last = -1;
      for (size_t i = 0; i < g->ops.size(); ++i)
        if (g->ops[i].stream == s) last = static_cast<int>(i);
      bool joined = false;
      if (last >= 0 && g->ops[static_cast<size_t>(last)].kind == Op::kRecord)
        for (size_t i = static_cast<size_t>(last) + 1; i < g->ops.size(); ++i)
          if (g->ops[i].stream == 0 && g->ops[i].kind == Op::kWait &&
              g->ops[i].event == g->ops[static_cast<size_t>(last)].event)
            joined = true;
      if (!joined) {
        ++unjoined;
        return nullptr;
      }
    }
    graphs_.push_back(g.get());
    return g.release();
  }
  void Replay(void* graph) override {
    std::lock_guard<std::recursive_mutex> l(mu_);
    ++replays;
    for (const Op& op : static_cast<Graph*>(graph)->ops) Enqueue(op.stream, op.kind, op.event, op.work, op.kernel);
  }
  void ReleaseGraph(void* graph) override {
    std::lock_guard<std::recursive_mutex> l(mu_);
    graphs_.erase(std::remove(graphs_.begin(), graphs_.end(), static_cast<Graph*>(graph)), graphs_.end());
    delete static_cast<Graph*>(graph);
  }

 private:
  struct Event {
    int64_t issued = 0;       // records issued
    int64_t done = 0;         // the latest record that has run
    bool in_capture = false;  // its latest record was issued inside the current capture
  };
  struct Op {
    enum Kind { kWork, kRecord, kWait } kind = kWork;
    int stream = 0;
    Event* event = nullptr;
    int64_t target = 0;  // kRecord: its record number; kWait: the record it waits for
    std::function<void()> work;
    bool kernel = false;
  };
  struct Graph {
    std::vector<Op> ops;  // issue order; records and waits get their numbers when replayed
  };

  int StreamOf(void* handle) const {
    const auto* p = static_cast<const char*>(handle);
    const ptrdiff_t s = p - tags_.data();
    if (s < 0 || s >= kStreams) {
      ADD_FAILURE() << "a kernel issued on a stream this device never gave out";
      return 0;
    }
    return static_cast<int>(s);
  }

  void Enqueue(int s, Op::Kind kind, Event* ev, std::function<void()> work, bool kernel = false) {
    std::lock_guard<std::recursive_mutex> l(mu_);
    if (s < 0 || s >= kStreams) {
      ADD_FAILURE() << "no stream " << s;
      return;
    }
    Op op{kind, s, ev, 0, std::move(work), kernel};
    if (capturing_ && kind == Op::kWait && ev->in_capture) captured_[static_cast<size_t>(s)] = true;  // joins
    if (capturing_ && captured_[static_cast<size_t>(s)]) {
      if (kind == Op::kRecord) ev->in_capture = true;
      if (kind == Op::kWait && !ev->in_capture)
        ADD_FAILURE() << "a captured stream waits for an event recorded outside the capture";
      recording_->ops.push_back(std::move(op));
      return;
    }
    if (capturing_ && kernel) ++kernels_outside_capture;
    if (kind == Op::kRecord) {
      op.target = ++ev->issued;
      ev->in_capture = false;
    }
    if (kind == Op::kWait) op.target = ev->issued;
    queues_[static_cast<size_t>(s)].push_back(std::move(op));
  }

  bool Runnable(const Op& op) const { return op.kind != Op::kWait || ignore_waits || op.event->done >= op.target; }

  // The stream holding the queued record `target` of `e` (-1: none).
  int StreamRecording(const Event* e, int64_t target) const {
    for (int s = 0; s < kStreams; ++s)
      for (const Op& op : queues_[static_cast<size_t>(s)])
        if (op.kind == Op::kRecord && op.event == e && op.target == target) return s;
    return -1;
  }

  // Runs queued work, a random runnable stream head at a time, until `enough` or every queue is empty. `only`: the
  // streams that may run, grown by the streams of the records their heads wait for.
  void Drain(const std::function<bool()>& enough, std::vector<bool>* only = nullptr) {
    while (!enough()) {
      std::vector<int> ready;
      bool any = false;
      for (int s = 0; s < kStreams; ++s) {
        const auto& q = queues_[static_cast<size_t>(s)];
        if (q.empty() || (only && !(*only)[static_cast<size_t>(s)])) continue;
        any = true;
        if (Runnable(q.front())) {
          ready.push_back(s);
        } else if (only) {
          const int t = StreamRecording(q.front().event, q.front().target);
          if (t >= 0 && !(*only)[static_cast<size_t>(t)]) {
            (*only)[static_cast<size_t>(t)] = true;
            ready.clear();
            any = true;
            s = -1;  // look again with the stream added
            continue;
          }
        }
      }
      if (!any) return;
      if (ready.empty()) {
        ADD_FAILURE() << "deadlock: every stream waits for an event that is never recorded";
        for (auto& q : queues_) q.clear();
        return;
      }
      int s = ready[static_cast<size_t>(rng_() % ready.size())];
      if (std::find(ready.begin(), ready.end(), eager_stream) != ready.end()) s = eager_stream;
      Op op = std::move(queues_[static_cast<size_t>(s)].front());
      queues_[static_cast<size_t>(s)].pop_front();
      if (op.kind == Op::kRecord) op.event->done = std::max(op.event->done, op.target);
      // Isolated: a CPU kernel's parallel loop must not pick up another task (the data loader's, which may issue
      // work here) on this thread.
      // A failed kernel leaves nothing queued behind it (a CUDA error ends the context's work too).
      if (op.kind == Op::kWork) {
        try {
          tbb::this_task_arena::isolate([&] { op.work(); });
        } catch (...) {
          for (auto& q : queues_) q.clear();
          throw;
        }
      }
    }
  }

  std::recursive_mutex mu_;
  std::mt19937_64 rng_;
  std::array<char, kStreams> tags_{};
  std::array<std::deque<Op>, kStreams> queues_;
  bool capturing_ = false;
  std::array<bool, kStreams> captured_{};
  Graph* recording_ = nullptr;
  std::vector<Graph*> graphs_;  // alive (freed with the device if a plan did not release them)
};

}  // namespace ot::test
