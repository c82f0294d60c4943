// Data-parallel's NCCL path on one GPU (executor/cuda/kernels_collective.cc): the digits MLP and the tiny transformer
// trained with the gradient buckets all-reduced by NCCL over a world of one rank (DataParallelOptions::even_alone
// builds the AllReduceStart/AllReduceWait nodes anyway, in several buckets), against the plain run on the same GPU:
// the mean over one rank is the gradient itself, so the losses and parameters agree to 1e-6 -- with and without CUDA
// graphs, on 1 and 2 streams. Label `gpu`, skipped without a device; NCCL is the machine's (ONNXTRAIN_NCCL_LIB).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "executor/device.h"
#include "tests/executor/example_data.h"
#include "tests/test_util.h"
#include "training/trainer.h"

namespace ot {
namespace {
using namespace ot::examples;

ExampleRun TrainOnGpu(const std::string& dir, bool nccl, const DeviceOptions& d) {
  return TrainExample(dir, "adam", 6, [&](TrainerOptions& o) {
    o.device = OpenDevice("cuda:0", d);
    if (nccl) {
      o.data_parallel.world = 1;
      o.data_parallel.even_alone = true;
      o.data_parallel.bucket_bytes = 16 << 10;  // several buckets
    }
  });
}

TEST(NcclGpu, OneRankFollowsThePlainRun) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  for (const char* dir : {"digits_mlp", "tiny_lm"})
    for (int streams : {1, 2})
      for (bool graph : {true, false}) {
        SCOPED_TRACE(std::string(dir) + " streams " + std::to_string(streams) + (graph ? " graph" : " no graph"));
        DeviceOptions d;
        d.streams = streams;
        d.graphs = graph;
        d.deterministic = true;
        const ExampleRun plain = TrainOnGpu(dir, false, d), nccl = TrainOnGpu(dir, true, d);
        ASSERT_EQ(plain.losses.size(), nccl.losses.size());
        for (size_t i = 0; i < plain.losses.size(); ++i)
          EXPECT_NEAR(nccl.losses[i], plain.losses[i], 1e-6 * std::abs(plain.losses[i])) << "step " << i + 1;
        ASSERT_EQ(nccl.params.size(), plain.params.size());
        for (const auto& [name, t] : plain.params) {
          SCOPED_TRACE(name);
          test::ExpectClose(nccl.params.at(name), t, 1e-6, 1e-7);
        }
      }
}

}  // namespace
}  // namespace ot
