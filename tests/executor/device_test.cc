// --device parsing and the CPU-only answers (this suite runs without a GPU; the GPU runs are tests/cuda/*Gpu*).
#include "executor/device.h"

#include <gtest/gtest.h>

#include "graph/error.h"

namespace ot {
namespace {

std::string OpenError(const std::string& spec) {
  try {
    OpenDevice(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Device, CpuIsTheCpuBackend) { EXPECT_EQ(OpenDevice("cpu"), nullptr); }

TEST(Device, BadSpecsNameTheValue) {
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda0"}) {
    const std::string e = OpenError(bad);
    EXPECT_NE(e.find(std::string("'") + bad + "'"), std::string::npos) << bad << ": " << e;
  }
}

TEST(Device, WithoutAGpuAutoIsTheCpuAndCudaIsAClearError) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(OpenDevice("auto"), nullptr);
  const std::string e = OpenError("cuda");
  EXPECT_TRUE(e.find("no CUDA GPU") != std::string::npos ||
              e.find("built without the CUDA backend") != std::string::npos)
      << e;
  EXPECT_NE(e.find("--device cuda"), std::string::npos) << e;
}

}  // namespace
}  // namespace ot
