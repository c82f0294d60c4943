// Pinned, double-buffered batch uploads (executor/batch_stager.h) on the concurrent fake device of
// tests/executor/stream_device.h, whose copies run only when the host waits and which checks, when a copy runs, that
// its host memory still holds what it held when the copy was issued: a pinned slot rewritten too early fails here.
#include "executor/batch_stager.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "tests/executor/example_data.h"
#include "tests/executor/stream_device.h"
#include "tests/test_util.h"
#include "training/data_loader.h"
#include "training/trainer.h"

namespace ot {
namespace {
using namespace ot::examples;
using test::StreamDevice;

std::map<std::string, Tensor> RandomBatch(std::mt19937_64& rng, int64_t rows) {
  Tensor x(DataType::kFloat32, {rows, 7}), y(DataType::kInt64, {rows});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(rng() % 1000) / 7.0f;
  for (int64_t i = 0; i < y.numel(); ++i) y.data<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
  return {{"x", x}, {"y", y}};
}

// Batches staged back to back, with nothing run in between: the third reuses the first's pinned slot and must wait
// for the first's upload; each run that consumes a batch gets its bytes. A batch of another size reallocates its
// slot (after its consumer).
TEST(BatchStager, NeverRewritesAPinnedSlotBeforeItsCopyRan) {
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    auto dev = std::make_shared<StreamDevice>(seed);
    if (seed % 2 == 0) dev->eager_stream = dev->CopyStream();  // uploads race ahead of the runs that take them
    std::mt19937_64 rng(seed);
    BatchStager st(dev);
    void* dx = dev->Alloc(64 * 7 * 4, "x");
    void* dy = dev->Alloc(64 * 8, "y");
    auto check = [&](const std::map<std::string, Tensor>& batch, const std::string& what) {
      std::vector<uint8_t> got_x(batch.at("x").nbytes()), got_y(batch.at("y").nbytes());
      dev->CopyToHost(got_x.data(), dx, got_x.size());
      dev->CopyToHost(got_y.data(), dy, got_y.size());
      dev->Synchronize();
      EXPECT_EQ(std::memcmp(got_x.data(), batch.at("x").raw(), got_x.size()), 0) << what;
      EXPECT_EQ(std::memcmp(got_y.data(), batch.at("y").raw(), got_y.size()), 0) << what;
    };
    auto inputs = [&](const std::map<std::string, Tensor>& batch) {
      return std::vector<BatchStager::Input>{{"x", dx, batch.at("x").nbytes()}, {"y", dy, batch.at("y").nbytes()}};
    };
    // Four staged with nothing run in between: the third and fourth rewrite the pinned slots of the first two,
    // whose uploads are still queued.
    std::vector<std::map<std::string, Tensor>> ahead;
    for (int k = 0; k < 4; ++k) {
      ahead.push_back(RandomBatch(rng, 32));
      st.Stage(ahead.back());
    }
    EXPECT_FALSE(st.Consume(ahead[0], inputs(ahead[0]))) << "a replaced batch was taken";
    ASSERT_TRUE(st.Consume(ahead[3], inputs(ahead[3])));
    check(ahead[3], "the fourth batch");
    ASSERT_TRUE(st.Consume(ahead[2], inputs(ahead[2])));
    check(ahead[2], "the third batch");
    // A batch taken by a run that has not run yet: the upload of the batch two later into the same device buffers
    // waits for the run's copy of them.
    const auto taken = RandomBatch(rng, 32);
    st.Stage(taken);
    ASSERT_TRUE(st.Consume(taken, inputs(taken)));
    st.Stage(RandomBatch(rng, 32));
    st.Stage(RandomBatch(rng, 32));
    check(taken, "a batch whose slot was restaged before its run ran");
    for (int k = 0; k < 7; ++k) {
      const int64_t rows = k == 4 ? 64 : 32;
      const auto batch = RandomBatch(rng, rows);
      st.Stage(batch);
      if (k % 2 == 1) continue;  // this one is never consumed: replaced two batches later
      ASSERT_TRUE(st.Consume(batch, inputs(batch)));
      check(batch, "batch " + std::to_string(k));
    }
    EXPECT_EQ(dev->staging_overwrites, 0);
    EXPECT_EQ(dev->copy_stream_copies, 28);
    EXPECT_EQ(st.staged(), 14);
    EXPECT_EQ(st.consumed(), 7);
    // Feeds that are not a staged batch (a copy of one, another size) are not taken.
    const auto other = RandomBatch(rng, 32);
    std::map<std::string, Tensor> copy;
    for (const auto& [name, t] : other) copy[name] = t.Clone();
    st.Stage(other);
    EXPECT_FALSE(st.Consume(copy, {{"x", dx, copy.at("x").nbytes()}, {"y", dy, copy.at("y").nbytes()}}));
    EXPECT_FALSE(st.Consume(other, {{"x", dx, 64 * 7 * 4}}));
    dev->Synchronize();
    dev->Free(dx);
    dev->Free(dy);
  }
}

// The training loop's way (tools/train.cc): the loader stages each batch on its prefetch task while the current
// step runs; every step after the first takes its batch from the copy stream (nothing of the batch is uploaded on
// stream 0), and the trajectory equals the CPU's, with several streams and graphs.
TEST(BatchStager, StagedTrainingEqualsTheCpu) {
  const ExampleRun cpu = TrainExample("tiny_lm", "adam", 5, [](TrainerOptions&) {});
  for (uint64_t seed : {1u, 2u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto dev = std::make_shared<StreamDevice>(seed, 2);
    dev->supports_graphs = seed == 2;
    nlohmann::json ref = Reference("tiny_lm", "adam");
    TrainerOptions o = Options(ref, "adam");
    o.device = dev;
    const std::string path = kExamples + "tiny_lm/model.onnx";
    Trainer trainer(LoadModel(path), o);
    DataLoader data(TinyLmData(), ref["batch"], false, 0, path);
    data.set_on_ready([&](const Batch& b) { trainer.Stage(b.arrays); });
    std::vector<double> losses;
    const int64_t per = data.batches_per_epoch();
    data.Prefetch(0, 0);
    int64_t stream0_after_first = 0;
    for (int k = 0; k < 5; ++k) {
      Batch b = data.Take();
      if (k + 1 < 5) data.Prefetch((k + 1) / per, (k + 1) % per);
      const int64_t before = dev->stream0_uploads;
      losses.push_back(trainer.Step(b.arrays).loss);
      if (k > 0) stream0_after_first += dev->stream0_uploads - before;
    }
    ASSERT_EQ(losses.size(), cpu.losses.size());
    for (size_t k = 0; k < losses.size(); ++k) EXPECT_EQ(losses[k], cpu.losses[k]) << "step " << k + 1;
    for (const auto& [name, t] : trainer.Parameters()) test::ExpectClose(t, cpu.params.at(name), 0, 0);
    EXPECT_EQ(stream0_after_first, 0) << "a step uploaded its batch itself";
    EXPECT_GT(dev->copy_stream_copies, 0);
    EXPECT_EQ(dev->staging_overwrites, 0);
    if (seed == 2) {
      EXPECT_EQ(dev->replays, 3);  // runs 3 (captured), 4 and 5
    }
  }
}

}  // namespace
}  // namespace ot
