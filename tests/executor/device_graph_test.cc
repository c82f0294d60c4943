// Graph replay of a device plan's steady-state run (Plan::graph_, DeviceBackend::BeginCapture ... Replay), on a fake
// device that records like CUDA stream capture: while capturing, a kernel call or a device copy is stored with its
// arguments (the operand pointer tables copied, as a launch copies its parameters) instead of run, and a replay
// runs the stored calls in order. So the plan's side of CUDA graphs -- when it captures, that the captured run is
// then executed by a replay, that inputs and outputs stay outside the graph, the fallback when a capture fails, and
// the runs that must not be replayed -- is checked in CI without a GPU: training on it must equal the CPU backend
// bit for bit.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "tests/executor/example_data.h"
#include "tests/executor/host_device.h"
#include "tests/test_util.h"
#include "training/data_loader.h"
#include "training/trainer.h"

namespace ot {
namespace {
using namespace ot::examples;

class RecordingDevice final : public test::HostDevice {
 public:
  using Call = std::function<void()>;
  bool fail_capture = false;  // EndCapture reports a failed capture
  int captures = 0, replays = 0;
  int64_t direct_kernels = 0;  // kernel calls that ran when issued (not recorded)

  std::optional<KernelInfo> MakeKernel(const KernelContext& ctx) const override {
    std::optional<KernelInfo> k = HostDevice::MakeKernel(ctx);
    if (!k) return k;
    const size_t nin = std::max<size_t>(16, ctx.node.inputs.size()),
                 nout = std::max<size_t>(16, ctx.node.outputs.size());
    auto* self = const_cast<RecordingDevice*>(this);
    k->fn = [self, fn = std::move(k->fn), nin, nout](const KernelIO& io) {
      if (!self->capturing_) {
        ++self->direct_kernels;
        fn(io);
        return;
      }
      auto in = std::make_shared<std::vector<const void*>>(io.in, io.in + nin);
      auto out = std::make_shared<std::vector<void*>>(io.out, io.out + nout);
      self->recording_.push_back([fn, in, out, io] {
        KernelIO x = io;
        x.in = in->data();
        x.out = out->data();
        fn(x);
      });
    };
    return k;
  }
  void CopyToDevice(void* dst, const void* src, size_t n) override {
    EXPECT_FALSE(capturing_) << "a host-to-device copy inside the captured run";
    HostDevice::CopyToDevice(dst, src, n);
  }
  void CopyToHost(void* dst, const void* src, size_t n) override {
    EXPECT_FALSE(capturing_) << "a device-to-host copy inside the captured run";
    HostDevice::CopyToHost(dst, src, n);
  }
  void CopyOnDevice(void* dst, const void* src, size_t n) override {
    if (!capturing_) return HostDevice::CopyOnDevice(dst, src, n);
    recording_.push_back([=] {
      if (dst != src) std::memmove(dst, src, n);
    });
  }
  void Synchronize() override { EXPECT_FALSE(capturing_) << "a synchronisation inside the captured run"; }
  bool SupportsGraphs() const override { return true; }
  void BeginCapture() override {
    EXPECT_FALSE(capturing_);
    capturing_ = true;
    recording_.clear();
  }
  void* EndCapture() override {
    EXPECT_TRUE(capturing_);
    capturing_ = false;
    ++captures;
    if (fail_capture) return nullptr;
    return new std::vector<Call>(std::move(recording_));
  }
  void Replay(void* graph) override {
    ++replays;
    for (const Call& c : *static_cast<std::vector<Call>*>(graph)) c();
  }
  void ReleaseGraph(void* graph) override { delete static_cast<std::vector<Call>*>(graph); }

 private:
  bool capturing_ = false;
  std::vector<Call> recording_;
};

ExampleRun Train(const std::string& dir, DataType half, int steps, std::shared_ptr<DeviceBackend> dev,
                 bool profile = false) {
  return TrainExample(dir, "adam", steps, [&](TrainerOptions& o) {
    o.amp.half = half;
    o.device = dev;
    o.profile = profile;
  });
}

void ExpectSame(const ExampleRun& a, const ExampleRun& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t k = 0; k < a.losses.size(); ++k) EXPECT_EQ(a.losses[k], b.losses[k]) << "step " << k + 1;
  for (const auto& [name, t] : b.params) {
    SCOPED_TRACE(name);
    test::ExpectClose(a.params.at(name), t, 0, 0);
  }
}

// Runs 1 and 2 issue their kernels directly, run 3 is captured and replayed, runs 4.. are replays; the whole
// trajectory (fp16: loss scaling and half copies, state carried on the device between steps) equals the CPU's.
TEST(DeviceGraphs, ReplayedRunsEqualTheCpuBitForBit) {
  for (DataType half : {DataType::kUndefined, DataType::kFloat16}) {
    SCOPED_TRACE(half == DataType::kUndefined ? "fp32" : "fp16");
    const ExampleRun cpu = Train("tiny_lm", half, 6, nullptr);
    auto dev = std::make_shared<RecordingDevice>();
    const ExampleRun on = Train("tiny_lm", half, 6, dev);
    ExpectSame(on, cpu);
    EXPECT_EQ(dev->captures, 1);
    EXPECT_EQ(dev->replays, 4);
    ASSERT_GT(dev->direct_kernels, 0);
    EXPECT_EQ(dev->direct_kernels % 2, 0) << "only runs 1 and 2 issue kernels directly";
  }
}

// A capture that fails (something in the run cannot be recorded) leaves nothing half-done: that run and every later
// one run directly, with the same results, and the plan does not try again.
TEST(DeviceGraphs, AFailedCaptureRunsDirectly) {
  const ExampleRun cpu = Train("digits_mlp", DataType::kUndefined, 5, nullptr);
  auto dev = std::make_shared<RecordingDevice>();
  dev->fail_capture = true;
  const ExampleRun on = Train("digits_mlp", DataType::kUndefined, 5, dev);
  ExpectSame(on, cpu);
  EXPECT_EQ(dev->captures, 1);
  EXPECT_EQ(dev->replays, 0);
}

// No graph where the runs must differ or be observed one kernel at a time: with --no-cuda-graph (graphs off in the
// device options), and while profiling (each kernel is timed).
TEST(DeviceGraphs, NotUsedWhenDisabledOrProfiling) {
  const ExampleRun cpu = Train("digits_mlp", DataType::kUndefined, 4, nullptr);
  auto off = std::make_shared<RecordingDevice>();
  DeviceOptions o;
  o.graphs = false;
  off->set_options(o);
  ExpectSame(Train("digits_mlp", DataType::kUndefined, 4, off), cpu);
  EXPECT_EQ(off->captures + off->replays, 0);
  auto profiled = std::make_shared<RecordingDevice>();
  ExpectSame(Train("digits_mlp", DataType::kUndefined, 4, profiled, /*profile=*/true), cpu);
  EXPECT_EQ(profiled->captures + profiled->replays, 0);
}

}  // namespace
}  // namespace ot
