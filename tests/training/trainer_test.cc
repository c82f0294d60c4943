// Loss trajectories: the digits MLP trained by the Trainer lands on PyTorch's loss at every step (same initial
// weights, same batches: no shuffling, batch 50), for SGD and Adam (examples/digits_mlp/export.py made the
// reference with torch.optim).
#include "training/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "training/data_loader.h"

namespace ot {
namespace {

const std::string kDir = std::string(OT_SOURCE_DIR) + "/examples/digits_mlp/";

void ExpectTrajectory(const std::string& optimizer) {
  std::ifstream f(kDir + "trajectory_" + optimizer + ".json");
  ASSERT_TRUE(f) << "missing trajectory";
  nlohmann::json ref = nlohmann::json::parse(f);
  TrainerOptions o;
  o.loss = {"", ref["loss"], ref["logits"], ref["labels"]};
  o.optimizer.kind = ParseOptimizerKind(optimizer);
  o.optimizer.lr = ref["lr"];
  Trainer trainer(LoadModel(kDir + "model.onnx"), o);
  std::map<std::string, Tensor> arrays;
  for (NamedTensor& t : ReadNpz(kDir + "train.npz")) arrays[t.name] = t.tensor;
  DataLoader data(arrays, ref["batch"], false, 0, "train.npz");
  const auto& losses = ref["losses"];
  ASSERT_GE(losses.size(), 30u);
  for (size_t k = 0; k < losses.size(); ++k) {
    const int64_t step = static_cast<int64_t>(k);
    StepResult r = trainer.Step(data.Get(step / data.batches_per_epoch(), step % data.batches_per_epoch()).arrays);
    const double want = losses[k];
    EXPECT_NEAR(r.loss, want, 1e-3 * std::fabs(want)) << optimizer << " step " << k + 1;
    EXPECT_FALSE(r.skipped);
  }
}

TEST(Trajectory, DigitsMlpSgdMatchesPyTorch) { ExpectTrajectory("sgd"); }
TEST(Trajectory, DigitsMlpAdamMatchesPyTorch) { ExpectTrajectory("adam"); }

}  // namespace
}  // namespace ot
