// Mixed precision on the GPU against the same mixed-precision training on the CPU (issue 6: "a GPU --amp test
// against the CPU"): the example models trained with --amp=fp16 (dynamic loss scaling) and --amp=bf16 over the same
// batches, unfused and --fuse=lite. The two backends round the same half values but accumulate GEMMs and
// reductions in different orders, so a product can round to the neighbouring half value: each step's loss is held
// to 1e-2 relative (about 10 fp16 ulp, 1.3 bf16 ulp -- far below the 3% that issue 4 allows between --amp and
// fp32), and the loss scale and the skipped steps must be the same step for step. And the skip itself on the
// device: an overflow injected into one batch skips exactly that step, halves S and leaves every parameter
// bit-identical. Label `gpu` (tests named *Gpu*), skipped without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "executor/device.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "tests/executor/example_data.h"
#include "training/data_loader.h"
#include "training/trainer.h"

namespace ot {
namespace {
using namespace ot::examples;

struct AmpRun {
  std::vector<double> losses, scales;
  std::vector<bool> skipped;
};

AmpRun TrainAmp(const std::string& dir, const std::string& optimizer, DataType half, const std::string& fuse, int steps,
                std::shared_ptr<DeviceBackend> device) {
  nlohmann::json ref = Reference(dir, optimizer);
  TrainerOptions o = Options(ref, optimizer);
  o.amp.half = half;
  o.fuse.mode = ParseFuseMode(fuse);
  o.device = std::move(device);
  std::map<std::string, Tensor> arrays;
  if (dir == "digits_mlp") {
    for (NamedTensor& t : ReadNpz(kExamples + "digits_mlp/train.npz")) arrays[t.name] = t.tensor;
  } else {
    arrays = TinyLmData();
  }
  const std::string path = kExamples + dir + "/model.onnx";
  Trainer trainer(LoadModel(path), o);
  DataLoader data(std::move(arrays), ref["batch"], false, 0, path);
  AmpRun r;
  for (int k = 0; k < steps; ++k) {
    const StepResult s = trainer.Step(data.Get(k / data.batches_per_epoch(), k % data.batches_per_epoch()).arrays);
    r.losses.push_back(s.loss);
    r.scales.push_back(s.loss_scale);
    r.skipped.push_back(s.skipped);
  }
  return r;
}

struct Case {
  std::string dir, optimizer;
  int steps;
};

class AmpGpu : public ::testing::TestWithParam<Case> {};

TEST_P(AmpGpu, HalfTrainingMatchesTheCpuAtEveryStep) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const Case& c = GetParam();
  for (DataType half : {DataType::kFloat16, DataType::kBFloat16}) {
    const AmpRun cpu = TrainAmp(c.dir, c.optimizer, half, "off", c.steps, nullptr);
    for (double l : cpu.losses) ASSERT_TRUE(std::isfinite(l));
    for (const char* fuse : {"off", "lite"}) {
      SCOPED_TRACE(c.dir + " " + DataTypeName(half) + " --fuse=" + fuse);
      const AmpRun gpu = TrainAmp(c.dir, c.optimizer, half, fuse, c.steps, OpenDevice("cuda:0"));
      ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
      for (size_t k = 0; k < cpu.losses.size(); ++k) {
        EXPECT_EQ(gpu.skipped[k], cpu.skipped[k]) << "step " << k + 1;
        EXPECT_EQ(gpu.scales[k], cpu.scales[k]) << "step " << k + 1;
        EXPECT_NEAR(gpu.losses[k], cpu.losses[k], 1e-2 * std::fabs(cpu.losses[k])) << "step " << k + 1;
      }
      EXPECT_LT(gpu.losses.back(), gpu.losses.front());  // it trains
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, AmpGpu,
                         ::testing::Values(Case{"digits_mlp", "adam", 12}, Case{"tiny_lm", "adam", 12}),
                         [](const auto& info) { return info.param.dir; });

// One pixel of one sample at 2e4 at step 4: its weight gradient times S = 2^16 is beyond fp16, so the device's
// all-finite check must skip exactly that step (no host synchronisation decides it), halve S, and leave every
// parameter bit-identical; the other steps apply.
TEST(AmpGpuLossScaling, InjectedOverflowSkipsExactlyThatStep) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  TrainerOptions o;
  o.loss = {"", "cross_entropy", "logits", "y"};
  o.optimizer.kind = OptimizerKind::kAdam;
  o.optimizer.lr = 0.01;
  o.amp.half = DataType::kFloat16;
  o.device = OpenDevice("cuda:0");
  Trainer trainer(LoadModel(kExamples + "digits_mlp/model.onnx"), o);
  ASSERT_EQ(trainer.step_info().loss_scaling, LossScaleMode::kDynamic);
  std::map<std::string, Tensor> arrays;
  for (NamedTensor& t : ReadNpz(kExamples + "digits_mlp/train.npz")) arrays[t.name] = t.tensor;
  DataLoader data(std::move(arrays), 50, false, 0, "digits");
  const int bad = 4;
  for (int k = 1; k <= 7; ++k) {
    Arrays batch = data.Get(0, k - 1).arrays;
    if (k == bad) batch["x"].SetDouble(5, 2e4);
    const std::map<std::string, Tensor> before = trainer.Parameters();
    const double s_before = trainer.step_info().loss_scale->initializer->GetDouble(0);
    const StepResult r = trainer.Step(batch);
    EXPECT_EQ(r.skipped, k == bad) << "step " << k;
    EXPECT_EQ(r.loss_scale, s_before) << "step " << k;
    const double s_after = trainer.step_info().loss_scale->initializer->GetDouble(0);
    const std::map<std::string, Tensor> after = trainer.Parameters();
    ASSERT_EQ(after.size(), before.size());
    if (k != bad) {
      EXPECT_EQ(s_after, s_before) << "step " << k;
      bool changed = false;
      for (const auto& [name, t] : after) changed |= std::memcmp(t.raw(), before.at(name).raw(), t.nbytes()) != 0;
      EXPECT_TRUE(changed) << "step " << k << " applied no update";
      continue;
    }
    EXPECT_EQ(s_after, s_before / 2);
    for (const auto& [name, t] : after) {
      ASSERT_EQ(t.nbytes(), before.at(name).nbytes());
      EXPECT_EQ(std::memcmp(t.raw(), before.at(name).raw(), t.nbytes()), 0) << name << " changed on a skipped step";
    }
  }
  EXPECT_EQ(trainer.optimizer_steps(), 6);
}

}  // namespace
}  // namespace ot
