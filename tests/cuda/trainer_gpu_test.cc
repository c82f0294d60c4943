// The example models trained on the GPU (--device cuda) against the same training on the CPU: fp32 with TF32 off,
// every step's loss within 1e-4 relative (issue 6's bar) and the parameters after the last step within 1e-4 --
// which also checks that the device state comes back to the host (Trainer::Parameters syncs it). Unfused and
// --fuse=lite (generated cluster kernels). Label `gpu` (tests named *Gpu*), skipped without a device.
#include <gtest/gtest.h>

#include <cmath>

#include "executor/data_loader.h"
#include "executor/device.h"
#include "executor/trainer.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "tests/executor/example_data.h"
#include "tests/test_util.h"

namespace ot {
namespace {
using namespace ot::examples;

ExampleRun Train(const std::string& dir, const std::string& optimizer, const std::string& fuse, int steps,
                 std::shared_ptr<DeviceBackend> device) {
  return TrainExample(dir, optimizer, steps, [&](TrainerOptions& o) {
    o.fuse.mode = fuse;
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
      test::ExpectClose(gpu.params.at(name), t, 1e-4, 1e-6);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, TrainerGpu,
                         ::testing::Values(Example{"digits_mlp", "adam", 8},
                                           Example{"tiny_lm", "adam", 8}),
                         [](const auto& info) { return info.param.dir + "_" + info.param.optimizer; });

}  // namespace
}  // namespace ot
