// End to end: the bundled example models, imported from their ONNX files and run on the CPU executor, give
// PyTorch's outputs (computed in float64 by examples/*/export.py) on the bundled inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "executor/executor.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"

namespace ot {
namespace {

const std::string kExamples = std::string(OT_SOURCE_DIR) + "/examples/";

void ExpectMatchesPyTorch(const std::string& name, double rtol, double atol, int threads) {
  SetThreadCount(threads);
  std::unique_ptr<Graph> g = LoadModel(kExamples + name + "/model.onnx");
  std::map<std::string, Tensor> feeds;
  for (NamedTensor& t : ReadNpz(kExamples + name + "/input.npz")) feeds[t.name] = t.tensor;
  std::vector<NamedTensor> expected = ReadNpz(kExamples + name + "/expected.npz");
  Executor ex(*g);
  std::vector<Tensor> out = ex.Run(feeds);
  ASSERT_EQ(out.size(), g->outputs.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const NamedTensor* want = nullptr;
    for (const NamedTensor& e : expected)
      if (e.name == g->outputs[i]->name) want = &e;
    ASSERT_NE(want, nullptr) << "no reference for output " << g->outputs[i]->name;
    ASSERT_EQ(out[i].dims(), want->tensor.dims());
    double worst = 0;
    for (int64_t k = 0; k < out[i].numel(); ++k) {
      double a = out[i].GetDouble(k), b = want->tensor.GetDouble(k);
      ASSERT_FALSE(std::isnan(a)) << "element " << k;
      worst = std::max(worst, std::fabs(a - b) / (atol + rtol * std::fabs(b)));
    }
    EXPECT_LE(worst, 1.0) << name << " output " << g->outputs[i]->name;
  }
  SetThreadCount(0);
}

TEST(ExampleModels, MlpMatchesPyTorchSingleThread) { ExpectMatchesPyTorch("mlp", 1e-4, 1e-5, 1); }
TEST(ExampleModels, MlpMatchesPyTorchTwoThreads) { ExpectMatchesPyTorch("mlp", 1e-4, 1e-5, 2); }

}  // namespace
}  // namespace ot
