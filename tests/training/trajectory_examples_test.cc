// Loss trajectories of the issue-3 examples: the Trainer lands on PyTorch's loss at every step (same initial
// weights, same batches: no shuffling), for SGD and Adam, references made with torch.optim by
//   examples/fashion_cnn/export.py  a CNN with BatchNormalization exported in training mode, on Fashion-MNIST
//                                   (read here straight from Debian's idx files, as convert.py reads them)
//   examples/tiny_lm/export.py      a 2-block pre-LN causal transformer LM on committed token ids; logits
//                                   [batch, vocab, 32] with labels [batch, 32] (cross-entropy over positions)
// and what they rest on: convert.py's npz (the demo's data) read by our reader, the dense MaxPool backward.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cpu_ops/pool_grad.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "tests/executor/example_data.h"
#include "training/data_loader.h"
#include "training/trainer.h"

namespace ot {
namespace {
using namespace ot::examples;

// Trains `dir`/model.onnx on `arrays` in file order and compares every step's loss with the reference's.
void ExpectTrajectory(const std::string& dir, const std::string& optimizer, std::map<std::string, Tensor> arrays) {
  nlohmann::json ref = Reference(dir, optimizer);
  ASSERT_FALSE(ref.is_null());
  ASSERT_EQ(ref["shuffle"], false);
  Trainer trainer(LoadModel(kExamples + dir + "/model.onnx"), Options(ref, optimizer));
  DataLoader data(std::move(arrays), ref["batch"], false, 0, dir);
  const auto& losses = ref["losses"];
  ASSERT_GE(losses.size(), 30u);
  ASSERT_GE(data.samples(), static_cast<int64_t>(losses.size()) * ref["batch"].get<int64_t>());
  for (size_t k = 0; k < losses.size(); ++k) {
    const int64_t step = static_cast<int64_t>(k);
    StepResult r = trainer.Step(data.Get(step / data.batches_per_epoch(), step % data.batches_per_epoch()).arrays);
    const double want = losses[k];
    EXPECT_NEAR(r.loss, want, 1e-3 * std::fabs(want)) << dir << " " << optimizer << " step " << k + 1;
    EXPECT_FALSE(r.skipped) << "step " << k + 1;
  }
}

TEST(Trajectory, FashionCnnExportedInTrainingMode) {
  // What TrainingMode.TRAINING export gives: BatchNormalization with training_mode=1 and the running
  // statistics as extra outputs (which no graph output uses).
  std::unique_ptr<Graph> g = LoadModel(kExamples + "fashion_cnn/model.onnx");
  int bn = 0;
  for (const auto& n : g->nodes()) {
    if (n->op_type != "BatchNormalization") continue;
    ++bn;
    EXPECT_EQ(n->attr_int("training_mode", 0), 1) << n->name;
    EXPECT_EQ(n->outputs.size(), 3u) << n->name;
  }
  EXPECT_EQ(bn, 2);
}

// convert.py (what `make demo` runs; standard library only) writes .npz files our reader takes, holding exactly
// the arrays read here from the idx files; a missing dataset is an error naming the file it looked for.
TEST(FashionConvert, WritesWhatTheNpzReaderReadsBitForBit) {
  const std::string dir = ::testing::TempDir() + "fashion_convert_" + std::to_string(::getpid());
  const std::string script = kExamples + "fashion_cnn/convert.py";
  ASSERT_EQ(std::system(("python3 " + script + " --limit 300 --out " + dir + " > /dev/null").c_str()), 0);
  std::map<std::string, Tensor> want = FashionHead(300);
  std::map<std::string, Tensor> got;
  for (NamedTensor& t : ReadNpz(dir + "/train.npz")) got[t.name] = t.tensor;
  ASSERT_EQ(got.size(), 2u);
  for (const char* name : {"x", "y"}) {
    const Tensor &g = got[name], &w = want[name];
    ASSERT_EQ(g.dtype(), w.dtype()) << name;
    ASSERT_EQ(g.dims(), w.dims()) << name;
    EXPECT_EQ(std::memcmp(g.raw(), w.raw(), g.nbytes()), 0) << name;
  }
  std::vector<NamedTensor> test = ReadNpz(dir + "/test.npz");
  ASSERT_EQ(test.size(), 2u);
  EXPECT_EQ(test[0].tensor.dims(), (std::vector<int64_t>{300, 1, 28, 28}));
  std::filesystem::remove_all(dir);

  const std::string err = dir + ".err";
  EXPECT_NE(std::system(("python3 " + script + " --src " + dir + "/none --out " + dir + " 2> " + err).c_str()), 0);
  std::ifstream f(err);
  const std::string msg((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(msg.find("train-images-idx3-ubyte"), std::string::npos) << msg;
  std::filesystem::remove_all(dir);
  std::filesystem::remove(err);
}

// The CNN's MaxPool backward takes cpu_ops' dense path (no pads or dilations): a tie goes to the first maximum in
// window order (as the forward's argmax), a NaN once met stays the pick, and a ceil_mode window clipped at the
// input's end still routes its gradient.
TEST(MaxPoolGradDense, TiesGoToTheFirstMaximumNaNStaysAndClippedWindowsCount) {
  cpu::PoolSpec spec;
  spec.n = 1, spec.c = 1;
  spec.in_spatial = {3, 5}, spec.out_spatial = {2, 3}, spec.kernel = {2, 2}, spec.strides = {2, 2};
  spec.dilations = {1, 1}, spec.pad_begin = {0, 0}, spec.pad_end = {0, 0};
  const float nan = std::nanf("");
  const std::vector<float> x = {1, 1, 2,   5, 7,  //
                                1, 1, nan, 9, 7,  //
                                3, 0, 0,   0, 8};
  const std::vector<float> dy = {10, 20, 30, 40, 50, 60};
  std::vector<float> dx(x.size(), -1.0f);
  cpu::MaxPoolGrad<float>(spec, dy.data(), x.data(), dx.data());
  // windows: rows 0-1 x cols 0-1 (all 1: first), cols 2-3 (NaN), col 4 (7, 7: first); row 2 x cols 0-1 (3),
  // cols 2-3 (0, 0: first), col 4 (8)
  const std::vector<float> want = {10, 0, 0,  0, 30,  //
                                   0,  0, 20, 0, 0,   //
                                   40, 0, 50, 0, 60};
  EXPECT_EQ(dx, want);
}

TEST(Trajectory, FashionCnnSgdMatchesPyTorch) { ExpectTrajectory("fashion_cnn", "sgd", FashionHead(32 * 40)); }
TEST(Trajectory, FashionCnnAdamMatchesPyTorch) { ExpectTrajectory("fashion_cnn", "adam", FashionHead(32 * 40)); }
TEST(Trajectory, TinyLmSgdMatchesPyTorch) { ExpectTrajectory("tiny_lm", "sgd", TinyLmData()); }
TEST(Trajectory, TinyLmAdamMatchesPyTorch) { ExpectTrajectory("tiny_lm", "adam", TinyLmData()); }

TEST(Trajectory, TinyLmLabelsOfTheWrongLengthAreAnError) {
  // Labels [batch, 31] for logits [batch, 64, 32]: an error naming the labels input and both shapes.
  nlohmann::json ref = Reference("tiny_lm", "adam");
  Trainer trainer(LoadModel(kExamples + "tiny_lm/model.onnx"), Options(ref, "adam"));
  std::map<std::string, Tensor> arrays = TinyLmData();
  Tensor y(DataType::kInt64, {4, 31});
  std::map<std::string, Tensor> batch = {{"x", DataLoader(arrays, 4, false, 0, "data").Get(0, 0).arrays.at("x")},
                                         {"y", y}};
  try {
    trainer.Step(batch);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'y'"), std::string::npos) << m;
    EXPECT_NE(m.find("[4,31]"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace ot
