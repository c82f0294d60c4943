// The example models trained on the GPU (--device cuda) against the same training on the CPU: fp32 with TF32 off,
// every step's loss within 1e-4 relative (issue 6's bar) and the parameters after the last step within 1e-4 (after
// Adam: in norm, with one element in 1,000 allowed Adam's noise amplification, test::ExpectCloseAfterAdam; an H200 run
// found one such element of tiny_lm's 16k-element fc2 weight 2e-3 off) -- which also checks that the device state
// comes back to the host (Trainer::Parameters syncs it). Unfused and
// --fuse=lite (generated cluster kernels). Label `gpu` (tests named *Gpu*), skipped without a device.
// TrainerOptimizersGpu: the MLP example with every other optimizer kind (sgd, momentum, nesterov, lamb) and with
// --grad-accum 2 (two micro-batches per optimizer step, the micro-step counter and gradient sums on the device),
// held to the same bars.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>

#include "executor/device.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "tests/executor/example_data.h"
#include "tests/test_util.h"
#include "training/data_loader.h"
#include "training/trainer.h"

namespace ot {
namespace {
using namespace ot::examples;

ExampleRun Train(const std::string& dir, const std::string& optimizer, const std::string& fuse, int steps,
                 std::shared_ptr<DeviceBackend> device) {
  return TrainExample(dir, optimizer, steps, [&](TrainerOptions& o) {
    o.fuse.mode = ParseFuseMode(fuse);
    o.device = device;
  });
}

struct Example {
  std::string dir, optimizer;
  int steps;
};

class TrainerGpu : public ::testing::TestWithParam<Example> {};

TEST_P(TrainerGpu, MatchesTheCpuAtEveryStep) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const Example& ex = GetParam();
  const ExampleRun cpu = Train(ex.dir, ex.optimizer, "off", ex.steps, nullptr);
  for (const char* mode : {"off", "lite"}) {
    SCOPED_TRACE(ex.dir + " --fuse=" + mode);
    const ExampleRun gpu = Train(ex.dir, ex.optimizer, mode, ex.steps, OpenDevice("cuda:0"));
    ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
    for (size_t k = 0; k < cpu.losses.size(); ++k)
      EXPECT_NEAR(gpu.losses[k], cpu.losses[k], 1e-4 * std::fabs(cpu.losses[k])) << "step " << k + 1;
    for (const auto& [name, t] : cpu.params) {
      SCOPED_TRACE(name);
      if (name.size() > 8 && name.compare(name.size() - 8, 8, "qkv.bias") == 0) {
        // The key third of an attention's qkv bias has a gradient that is zero analytically (a shift of every key
        // by one vector moves each query's scores by a constant: softmax ignores it), so what reaches it is
        // rounding noise, which Adam normalizes into steps of up to lr: its trajectory is backend noise, bounded
        // by lr x steps. The query and value thirds are held to the strict tolerance.
        const int64_t h = t.numel() / 3;
        const double bound = 2.0 * Reference(ex.dir, ex.optimizer)["lr"].get<double>() * ex.steps;
        for (int64_t i = 0; i < t.numel(); ++i) {
          const double g = gpu.params.at(name).GetDouble(i), c = t.GetDouble(i);
          const double tol = i >= h && i < 2 * h ? bound : 1e-6 + 1e-4 * std::fabs(c);
          EXPECT_NEAR(g, c, tol) << "element " << i;
        }
        continue;
      }
      if (ex.optimizer == "adam") {
        const double lr = Reference(ex.dir, ex.optimizer)["lr"].get<double>();
        test::ExpectCloseAfterAdam(gpu.params.at(name), t, 1e-4, 1e-6, 2.0 * lr * ex.steps);
      } else {
        test::ExpectClose(gpu.params.at(name), t, 1e-4, 1e-6);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, TrainerGpu,
                         ::testing::Values(Example{"digits_mlp", "adam", 8}, Example{"tiny_lm", "adam", 8}),
                         [](const auto& info) { return info.param.dir + "_" + info.param.optimizer; });

// ---- every optimizer kind and gradient accumulation on the MLP example ---------------------------------------------

struct Variant {
  std::string name, optimizer;
  double lr;
  int64_t accumulate;
  int steps;
};

// `v.steps` optimizer steps of digits_mlp (the sgd reference's loss, batch and file-order batches) with v's optimizer,
// learning rate (weight decay and the rest at the optimizer's defaults: LAMB's 0.01 turns its trust ratio on) and
// accumulation: step k takes micro-batches kK .. kK+K-1.
ExampleRun TrainMlp(const Variant& v, const std::string& fuse, std::shared_ptr<DeviceBackend> device) {
  nlohmann::json ref = Reference("digits_mlp", "sgd");
  TrainerOptions o = Options(ref, "sgd");
  o.optimizer.kind = ParseOptimizerKind(v.optimizer);
  o.optimizer.lr = v.lr;
  o.optimizer.accumulate = v.accumulate;
  o.fuse.mode = ParseFuseMode(fuse);
  o.device = std::move(device);
  std::map<std::string, Tensor> arrays;
  for (NamedTensor& t : ReadNpz(kExamples + "digits_mlp/train.npz")) arrays[t.name] = t.tensor;
  const std::string path = kExamples + "digits_mlp/model.onnx";
  Trainer trainer(LoadModel(path), o);
  DataLoader data(std::move(arrays), ref["batch"], false, 0, path);
  ExampleRun r;
  const int64_t per_epoch = data.batches_per_epoch();
  for (int k = 0; k < v.steps; ++k) {
    std::vector<Arrays> micro;
    for (int64_t j = 0; j < v.accumulate; ++j) {
      const int64_t b = k * v.accumulate + j;
      micro.push_back(data.Get(b / per_epoch, b % per_epoch).arrays);
    }
    const StepResult s = trainer.Step(micro);
    EXPECT_FALSE(s.skipped) << "step " << k + 1;
    r.losses.push_back(s.loss);  // the mean of the micro-batches' losses
  }
  r.params = trainer.Parameters();  // brings the device's state back (the step counter too)
  EXPECT_EQ(trainer.optimizer_steps(), v.steps);
  return r;
}

// gtest prints a parameter in the test's name (and so in CTest's): its name, not its bytes.
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class TrainerOptimizersGpu : public ::testing::TestWithParam<Variant> {};

TEST_P(TrainerOptimizersGpu, MatchesTheCpuAtEveryStep) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const Variant& v = GetParam();
  const ExampleRun cpu = TrainMlp(v, "off", nullptr);
  for (const char* mode : {"off", "lite"}) {
    SCOPED_TRACE(v.name + " --fuse=" + mode);
    const ExampleRun gpu = TrainMlp(v, mode, OpenDevice("cuda:0"));  // fp32, TF32 off (DeviceOptions' default)
    ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
    for (size_t k = 0; k < cpu.losses.size(); ++k)
      EXPECT_NEAR(gpu.losses[k], cpu.losses[k], 1e-4 * std::fabs(cpu.losses[k])) << "step " << k + 1;
    ASSERT_EQ(gpu.params.size(), cpu.params.size());
    for (const auto& [name, t] : cpu.params) {
      SCOPED_TRACE(name);
      test::ExpectClose(gpu.params.at(name), t, 1e-4, 1e-6);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    DigitsMlp, TrainerOptimizersGpu,
    ::testing::Values(Variant{"sgd", "sgd", 0.1, 1, 8}, Variant{"momentum", "momentum", 0.05, 1, 8},
                      Variant{"nesterov", "nesterov", 0.05, 1, 8}, Variant{"lamb", "lamb", 0.01, 1, 8},
                      Variant{"sgd_grad_accum2", "sgd", 0.1, 2, 6},
                      Variant{"momentum_grad_accum2", "momentum", 0.05, 2, 6},
                      Variant{"lamb_grad_accum2", "lamb", 0.01, 2, 6}, Variant{"adam_grad_accum2", "adam", 0.01, 2, 6}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ot
