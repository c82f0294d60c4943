// Multi-stream issue of a device plan (executor/stream_assign.h, plan_device.cc) on the concurrent fake device of
// tests/executor/stream_device.h: its streams run interleaved in a seeded random order that honours only the events,
// so a missing event, a buffer reused across streams without a dependency, or a stream not joined before the results
// are read changes the numbers. Training on it with --streams 1, 2 and 4, for several interleaving seeds, must equal
// the CPU backend bit for bit; with graphs, the capture must hold every stream (joined before it ends) and the
// replays equal the CPU too.
#include "tests/executor/stream_device.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "executor/plan.h"
#include "tests/executor/example_data.h"
#include "tests/test_util.h"
#include "training/data_loader.h"
#include "training/trainer.h"

namespace ot {
namespace {
using namespace ot::examples;
using test::StreamDevice;

ExampleRun Train(const std::string& dir, const std::string& optimizer, int steps, std::shared_ptr<DeviceBackend> dev,
                 DataType half = DataType::kUndefined) {
  return TrainExample(dir, optimizer, steps, [&](TrainerOptions& o) {
    o.amp.half = half;
    o.device = dev;
    // A device's step keeps NCHW (the channels_last pass is the CPU's): so does the CPU reference, bit for bit.
    if (!dev) o.control.disabled.push_back("channels_last");
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

struct Case {
  std::string dir, optimizer;
  int steps;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.dir << " " << c.optimizer << " " << c.steps << " steps"; }

class StreamTraining : public ::testing::TestWithParam<Case> {};

// fp32 trajectories with 1, 2 and 4 streams and three interleavings each equal the CPU's; with more than one stream
// the kernels really were spread (else the test would prove nothing).
TEST_P(StreamTraining, EqualsTheCpuBitForBit) {
  const Case& c = GetParam();
  const ExampleRun cpu = Train(c.dir, c.optimizer, c.steps, nullptr);
  for (int streams : {1, 2, 4})
    for (uint64_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE("streams " + std::to_string(streams) + ", seed " + std::to_string(seed));
      auto dev = std::make_shared<StreamDevice>(seed, streams);
      ExpectSame(Train(c.dir, c.optimizer, c.steps, dev), cpu);
      int used = 0;
      for (int64_t k : dev->kernels_per_stream) used += k > 0;
      if (streams == 1)
        EXPECT_EQ(used, 1);
      else
        EXPECT_GE(used, 2) << "the plan issued everything on one stream";
      EXPECT_LE(used, streams);
    }
}

INSTANTIATE_TEST_SUITE_P(Examples, StreamTraining,
                         ::testing::Values(Case{"tiny_lm", "adam", 4}, Case{"digits_mlp", "adam", 4},
                                           Case{"fashion_cnn", "sgd", 3}),
                         [](const auto& info) { return info.param.dir + "_" + info.param.optimizer; });

// Mixed precision too (half copies, loss scaling, the finite check), on two streams.
TEST(StreamDevice, Fp16TrainingEqualsTheCpu) {
  const ExampleRun cpu = Train("tiny_lm", "adam", 4, nullptr, DataType::kFloat16);
  for (uint64_t seed : {5u, 6u}) {
    auto dev = std::make_shared<StreamDevice>(seed, 2);
    ExpectSame(Train("tiny_lm", "adam", 4, dev, DataType::kFloat16), cpu);
  }
}

// Graphs with several streams: run 3 is captured -- the other streams fork from stream 0 inside the capture and
// are joined back before it ends, so the capture succeeds and holds every kernel -- and runs 4.. replay it, with
// the interleaving of the branches drawn anew each replay.
TEST(StreamDevice, CapturedGraphsHoldEveryStreamAndReplayCorrectly) {
  const ExampleRun cpu = Train("tiny_lm", "adam", 6, nullptr);
  for (int streams : {2, 4}) {
    SCOPED_TRACE("streams " + std::to_string(streams));
    auto dev = std::make_shared<StreamDevice>(11, streams);
    dev->supports_graphs = true;
    ExpectSame(Train("tiny_lm", "adam", 6, dev), cpu);
    EXPECT_EQ(dev->captures, 1);
    EXPECT_EQ(dev->unjoined, 0);
    EXPECT_EQ(dev->replays, 4);
    EXPECT_EQ(dev->kernels_outside_capture, 0);
    int used = 0;
    for (int64_t k : dev->kernels_per_stream) used += k > 0;
    EXPECT_GE(used, 2);
  }
}

// The fake notices a missing order: on a device that ignores the events, the same training goes wrong (different
// numbers, or a kernel that fails on garbage) for some interleaving. This is what makes the tests above meaningful.
TEST(StreamDevice, WithoutEventsTheResultsDiffer) {
  const ExampleRun cpu = Train("digits_mlp", "adam", 3, nullptr);
  int differed = 0;
  for (uint64_t seed : {1u, 2u, 3u}) {
    auto dev = std::make_shared<StreamDevice>(seed, 4);
    dev->ignore_waits = true;
    try {
      const ExampleRun on = Train("digits_mlp", "adam", 3, dev);
      bool same = on.losses == cpu.losses;
      for (const auto& [name, t] : cpu.params) {
        const Tensor& o = on.params.at(name);
        same = same && o.nbytes() == t.nbytes() && std::memcmp(o.raw(), t.raw(), t.nbytes()) == 0;
      }
      differed += !same;
    } catch (const std::exception&) {
      ++differed;
    }
  }
  EXPECT_GT(differed, 0);
}

// Runs that watch each kernel (profiling, --check-numerics) issue everything on stream 0 -- a kernel's outputs are
// read or timed right after it -- and still equal the CPU.
TEST(StreamDevice, WatchedRunsIssueOnStreamZero) {
  const ExampleRun cpu = Train("digits_mlp", "adam", 3, nullptr);
  auto dev = std::make_shared<StreamDevice>(4, 4);
  const ExampleRun on = TrainExample("digits_mlp", "adam", 3, [&](TrainerOptions& o) {
    o.device = dev;
    o.profile = true;
    o.check_numerics = true;
  });
  ExpectSame(on, cpu);
  EXPECT_GT(dev->kernels_per_stream[0], 0);
  for (size_t s = 1; s < dev->kernels_per_stream.size(); ++s) EXPECT_EQ(dev->kernels_per_stream[s], 0);
}

// The schedule a plan made: deterministic for a plan, checked, and with --streams 1 a single stream.
TEST(StreamDevice, ThePlanSchedulesOverItsDependencies) {
  nlohmann::json ref = Reference("tiny_lm", "adam");
  const std::string path = kExamples + "tiny_lm/model.onnx";
  DataLoader data(TinyLmData(), ref["batch"], false, 0, path);
  const Arrays batch = data.Get(0, 0).arrays;
  auto schedule = [&](int streams) {
    TrainerOptions o = Options(ref, "adam");
    auto dev = std::make_shared<StreamDevice>(1, streams);
    o.device = dev;
    Trainer t(LoadModel(path), o);
    t.Step(batch);
    return dev->kernels_per_stream;
  };
  const auto one = schedule(1), two = schedule(2), two_again = schedule(2);
  EXPECT_GT(one[0], 0);
  for (size_t s = 1; s < one.size(); ++s) EXPECT_EQ(one[s], 0);
  EXPECT_GT(two[1], 0);
  EXPECT_EQ(two, two_again);
}

}  // namespace
}  // namespace ot
