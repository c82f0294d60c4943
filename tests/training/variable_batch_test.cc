// One step graph serves every batch size and sequence length: a Trainer (the C++ API) trains the pos_lm example
// (a positional table sliced by the input's length, a causal mask built for that length; exported with dynamic
// batch and sequence axes) on steps of 16 sequences of 16 tokens, then 5 of 12, then 16 of 16 again..., against
// PyTorch's losses for the same sequence of batches (examples/pos_lm/export.py).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "passes/optimizer.h"
#include "training/trainer.h"

namespace ot {
namespace {

const std::string kDir = std::string(OT_SOURCE_DIR) + "/examples/pos_lm/";

// Rows [first, first + count) and columns [0, length) of an int64 [n, seq] array.
Tensor Rows(const Tensor& a, int64_t first, int64_t count, int64_t length) {
  const int64_t seq = a.dims()[1];
  Tensor out(DataType::kInt64, {count, length});
  for (int64_t i = 0; i < count; ++i)
    for (int64_t j = 0; j < length; ++j) out.data<int64_t>()[i * length + j] = a.data<int64_t>()[(first + i) * seq + j];
  return out;
}

void TrainVariableBatches(const std::string& fuse) {
  SCOPED_TRACE("--fuse=" + fuse);
  std::ifstream f(kDir + "trajectory_variable_batch.json");
  ASSERT_TRUE(f) << "missing examples/pos_lm/trajectory_variable_batch.json";
  const nlohmann::json ref = nlohmann::json::parse(f);
  TrainerOptions o;
  o.optimizer.kind = OptimizerKind::kAdamW;
  o.optimizer.lr = ref["lr"];
  o.optimizer.weight_decay = ref["weight_decay"].get<double>();
  o.fuse.mode = ParseFuseMode(fuse);
  Trainer trainer(LoadModel(kDir + "model.onnx"), o);
  const Graph* step_graph = &trainer.step_graph();
  Tensor x, y;
  for (NamedTensor& t : ReadNpz(kDir + "data.npz")) (t.name == "x" ? x : y) = std::move(t.tensor);
  ASSERT_EQ(x.dims().size(), 2u);
  const auto& batches = ref["batches"];
  const auto& losses = ref["losses"];
  ASSERT_EQ(batches.size(), losses.size());
  ASSERT_GE(batches.size(), 3u);
  for (size_t k = 0; k < batches.size(); ++k) {
    const int64_t first = batches[k][0], count = batches[k][1], length = batches[k][2];
    Arrays batch{{"x", Rows(x, first, count, length)}, {"y", Rows(y, first, count, length)}};
    const StepResult r = trainer.Step(batch);
    const double want = losses[k];
    EXPECT_NEAR(r.loss, want, 1e-4 * std::fabs(want)) << "step " << k + 1 << ": " << count << " x " << length;
    EXPECT_FALSE(r.skipped);
  }
  EXPECT_EQ(&trainer.step_graph(), step_graph);  // the one step graph, never rebuilt
  EXPECT_EQ(trainer.optimizer_steps(), static_cast<int64_t>(batches.size()));
}

TEST(VariableBatch, PosLmMatchesPyTorchAsBatchAndLengthChange) { TrainVariableBatches("off"); }
TEST(VariableBatch, PosLmFusedMatchesPyTorchAsBatchAndLengthChange) { TrainVariableBatches("lite"); }

}  // namespace
}  // namespace ot
