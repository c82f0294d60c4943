// Mixed-precision training end to end (issue 4's Done-when): the example models trained with --amp=bf16 and
// --amp=fp16 against fp32 over the same batches; fp16 gradient underflow and dynamic loss scaling; an injected
// overflow that skips exactly its step; checkpoints across precisions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "passes/master_weights.h"
#include "tests/executor/example_data.h"
#include "training/data_loader.h"
#include "training/trainer.h"

namespace ot {
namespace {
using namespace ot::examples;

std::map<std::string, Tensor> Npz(const std::string& path) {
  std::map<std::string, Tensor> arrays;
  for (NamedTensor& t : ReadNpz(path)) arrays[t.name] = t.tensor;
  return arrays;
}

struct RunLog {
  std::vector<double> losses, zero_fractions;
  int skipped = 0;
};

// Trains `model` for `steps` steps on `arrays` in file order with `half` (kUndefined: fp32).
RunLog Train(const std::string& model_path, TrainerOptions o, std::map<std::string, Tensor> arrays, int64_t batch,
             int steps, DataType half, std::unique_ptr<Graph> model = nullptr) {
  o.amp.half = half;
  Trainer trainer(model ? std::move(model) : LoadModel(model_path), o);
  DataLoader data(std::move(arrays), batch, false, 0, model_path);
  RunLog r;
  for (int64_t k = 0; k < steps; ++k) {
    StepResult s = trainer.Step(data.Get(k / data.batches_per_epoch(), k % data.batches_per_epoch()).arrays);
    r.losses.push_back(s.loss);
    r.zero_fractions.push_back(s.zero_grad_fraction);
    r.skipped += s.skipped;
  }
  return r;
}

double TailMean(const std::vector<double>& v, size_t n) {
  double s = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i) s += v[i];
  return s / static_cast<double>(n);
}

struct Example {
  std::string dir, optimizer;
  int steps;
};

class AmpExamples : public ::testing::TestWithParam<Example> {};

// Done-when: --amp=bf16 and --amp=fp16 train to a final loss within 3% of the fp32 run over the same steps, with
// no non-finite loss.
TEST_P(AmpExamples, FinalLossWithin3PercentOfFp32) {
  const Example& ex = GetParam();
  nlohmann::json ref = Reference(ex.dir, ex.optimizer);
  ASSERT_FALSE(ref.is_null());
  std::map<std::string, Tensor> arrays = ex.dir == "digits_mlp"    ? Npz(kExamples + "digits_mlp/train.npz")
                                         : ex.dir == "fashion_cnn" ? FashionHead(4096)
                                                                   : TinyLmData();
  const std::string path = kExamples + ex.dir + "/model.onnx";
  const int64_t batch = ref["batch"];
  const RunLog fp32 = Train(path, Options(ref, ex.optimizer), arrays, batch, ex.steps, DataType::kUndefined);
  for (DataType h : {DataType::kBFloat16, DataType::kFloat16}) {
    SCOPED_TRACE(ex.dir + (h == DataType::kFloat16 ? " fp16" : " bf16"));
    const RunLog amp = Train(path, Options(ref, ex.optimizer), arrays, batch, ex.steps, h);
    for (double l : amp.losses) ASSERT_TRUE(std::isfinite(l));
    // Dynamic loss scaling starts at 2^16 and may skip a few early steps while it finds its scale, as PyTorch's
    // GradScaler does; bf16 has fp32's range and skips none.
    EXPECT_LE(amp.skipped, h == DataType::kFloat16 ? 3 : 0);
    EXPECT_NEAR(amp.losses.back(), fp32.losses.back(), 0.03 * fp32.losses.back());
    // And it trained: the loss fell by more than the difference allowed.
    EXPECT_LT(amp.losses.back(), 0.9 * amp.losses.front());
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, AmpExamples,
                         ::testing::Values(Example{"digits_mlp", "adam", 36}, Example{"fashion_cnn", "sgd", 40},
                                           Example{"tiny_lm", "adam", 32}),
                         [](const auto& info) { return info.param.dir; });

// The digits MLP whose loss is cross-entropy * 2^-14: its fp16 gradients underflow without scaling.
std::unique_ptr<Graph> ScaledLossMlp() {
  std::unique_ptr<Graph> g = LoadModel(kExamples + "digits_mlp/model.onnx");
  Value* logits = g->FindValue("logits");
  Value* y = g->AddValue("y");
  y->dtype = DataType::kInt64;
  y->shape = Shape(std::vector<Dim>{logits->shape[0]});
  g->inputs.push_back(y);
  Value* ce = g->AddValue("ce");
  g->AddNode("SoftmaxCrossEntropyLoss", {logits, y}, {ce}, "ce")->attrs["reduction"] = Attribute::String("mean");
  Tensor c(DataType::kFloat32, {});
  c.SetDouble(0, std::ldexp(1.0, -14));
  Value* loss = g->AddValue("scaled_loss");
  g->AddNode("Mul", {ce, g->AddInitializer("scale", std::move(c))}, {loss}, "scale_loss");
  g->outputs = {loss};
  InferShapes(*g, true);
  return g;
}

TEST(AmpLossScaling, UnderflowIsRecoveredByDynamicScaling) {
  TrainerOptions o;
  o.loss.output = "scaled_loss";
  o.freeze = "^scale$";                     // the constant 2^-14 is an initializer: not a parameter
  o.optimizer.kind = OptimizerKind::kAdam;  // invariant to the gradient's scale: fp32 trains as if unscaled
  o.optimizer.lr = 0.01;
  const auto arrays = Npz(kExamples + "digits_mlp/train.npz");
  const int steps = 60;
  const RunLog fp32 = Train("", o, arrays, 50, steps, DataType::kUndefined, ScaledLossMlp());
  TrainerOptions dyn = o;
  dyn.loss_scale.mode = LossScaleMode::kDynamic;
  const RunLog scaled = Train("", dyn, arrays, 50, steps, DataType::kFloat16, ScaledLossMlp());
  TrainerOptions one = o;
  one.loss_scale.mode = LossScaleMode::kStatic;
  one.loss_scale.init = 1;
  const RunLog unscaled = Train("", one, arrays, 50, steps, DataType::kFloat16, ScaledLossMlp());
  const double f32 = TailMean(fp32.losses, 5), dl = TailMean(scaled.losses, 5), ul = TailMean(unscaled.losses, 5);
  EXPECT_NEAR(dl, f32, 0.02 * f32) << "dynamic loss scaling";
  EXPECT_GT(ul, 1.02 * f32) << "--loss-scale 1 should train worse: its gradients flush to zero";
  const double z_dyn = TailMean(scaled.zero_fractions, steps), z_one = TailMean(unscaled.zero_fractions, steps);
  std::printf(
      "scaled loss x 2^-14, last 5 steps: fp32 %.6g, fp16 dynamic %.6g, fp16 --loss-scale 1 %.6g; gradient "
      "elements exactly zero: dynamic %.3f, unscaled %.3f\n",
      f32, dl, ul, z_dyn, z_one);
  EXPECT_GT(z_one, z_dyn + 0.1) << "share of gradient elements flushed to zero: scaled " << z_dyn << ", unscaled "
                                << z_one;
  EXPECT_LE(scaled.skipped, 3);
}

// An overflow injected at step 4 (one pixel of one sample at 2e4: its weight gradient times S = 2^16 is beyond fp16)
// skips exactly that step, halves S, and leaves every weight, moment and half copy bit-identical.
TEST(AmpLossScaling, InjectedOverflowSkipsExactlyThatStep) {
  TrainerOptions o;
  o.loss = {"", "cross_entropy", "logits", "y"};
  o.optimizer.kind = OptimizerKind::kAdam;
  o.optimizer.lr = 0.01;
  o.amp.half = DataType::kFloat16;
  Trainer trainer(LoadModel(kExamples + "digits_mlp/model.onnx"), o);
  ASSERT_EQ(trainer.step_info().loss_scaling, LossScaleMode::kDynamic);
  ASSERT_FALSE(HalfCopies(trainer.step_graph()).empty());
  DataLoader data(Npz(kExamples + "digits_mlp/train.npz"), 50, false, 0, "digits");
  const int bad = 4;
  for (int k = 1; k <= 7; ++k) {
    Arrays batch = data.Get(0, k - 1).arrays;
    if (k == bad) batch["x"].SetDouble(5, 2e4);
    std::map<std::string, Tensor> before;
    for (const auto& b : trainer.step_graph().update_bindings) before[b.state->name] = *b.state->initializer;
    const double s_before = trainer.step_info().loss_scale->initializer->GetDouble(0);
    StepResult r = trainer.Step(batch);
    EXPECT_EQ(r.skipped, k == bad) << "step " << k;
    EXPECT_EQ(r.loss_scale, s_before);
    const double s_after = trainer.step_info().loss_scale->initializer->GetDouble(0);
    if (k != bad) {
      EXPECT_EQ(s_after, s_before) << "step " << k;
      continue;
    }
    EXPECT_EQ(s_after, s_before / 2);
    for (const auto& b : trainer.step_graph().update_bindings) {
      const std::string& name = b.state->name;
      if (name.rfind("loss_scale", 0) == 0) continue;
      const Tensor& now = *b.state->initializer;
      ASSERT_EQ(now.nbytes(), before[name].nbytes());
      EXPECT_EQ(std::memcmp(now.raw(), before[name].raw(), now.nbytes()), 0) << name << " changed on a skipped step";
    }
  }
  EXPECT_EQ(trainer.optimizer_steps(), 6);
}

// Checkpoints across precisions: fp32 -> --amp=bf16 (the half copies are recomputed from the masters) and
// --amp=fp16 -> fp32 (the extra arrays are ignored); training goes on from the same weights.
TEST(AmpCheckpoint, ResumesAcrossPrecisions) {
  const std::string dir = ::testing::TempDir() + "/amp_ckpt_" + std::to_string(::getpid());
  const auto arrays = Npz(kExamples + "digits_mlp/train.npz");
  DataLoader data(arrays, 50, false, 0, "digits");
  TrainerOptions o;
  o.loss = {"", "cross_entropy", "logits", "y"};
  o.optimizer.kind = OptimizerKind::kAdam;
  o.optimizer.lr = 0.01;
  auto master = [](Trainer& t, const std::string& name) { return *t.step_graph().FindValue(name)->initializer; };
  {
    Trainer fp32(LoadModel(kExamples + "digits_mlp/model.onnx"), o);
    for (int k = 0; k < 3; ++k) fp32.Step(data.Get(0, k).arrays);
    fp32.SaveCheckpoint(dir, {});
    TrainerOptions a = o;
    a.amp.half = DataType::kBFloat16;
    Trainer amp(LoadModel(kExamples + "digits_mlp/model.onnx"), a);
    amp.LoadCheckpoint(dir);
    EXPECT_EQ(amp.optimizer_steps(), 3);
    const auto copies = HalfCopies(amp.step_graph());
    ASSERT_FALSE(copies.empty());
    for (const auto& [m, h] : copies) {
      const Tensor want = master(fp32, m->name).CastTo(DataType::kBFloat16);
      EXPECT_EQ(std::memcmp(h->initializer->raw(), want.raw(), want.nbytes()), 0) << h->name;
    }
    StepResult r = amp.Step(data.Get(0, 3).arrays);
    EXPECT_FALSE(r.skipped);
    EXPECT_TRUE(std::isfinite(r.loss));
  }
  {
    TrainerOptions a = o;
    a.amp.half = DataType::kFloat16;
    Trainer amp(LoadModel(kExamples + "digits_mlp/model.onnx"), a);
    for (int k = 0; k < 3; ++k) amp.Step(data.Get(0, k).arrays);
    amp.SaveCheckpoint(dir, {});
    Trainer fp32(LoadModel(kExamples + "digits_mlp/model.onnx"), o);
    fp32.LoadCheckpoint(dir);
    for (const auto& [m, h] : HalfCopies(amp.step_graph())) {
      const Tensor& a32 = *m->initializer;
      const Tensor b32 = master(fp32, m->name);
      EXPECT_EQ(std::memcmp(a32.raw(), b32.raw(), a32.nbytes()), 0) << m->name;
    }
    EXPECT_FALSE(fp32.Step(data.Get(0, 3).arrays).skipped);
  }
  {
    // --amp=bf16 -> --amp=bf16: the file holds no half copy (.npy has no bfloat16; they are round(master)), and the
    // resumed run continues the uninterrupted one bit for bit, half copies included.
    TrainerOptions a = o;
    a.amp.half = DataType::kBFloat16;
    Trainer full(LoadModel(kExamples + "digits_mlp/model.onnx"), a);
    std::vector<double> want;
    for (int k = 0; k < 5; ++k) want.push_back(full.Step(data.Get(0, k).arrays).loss);
    Trainer first(LoadModel(kExamples + "digits_mlp/model.onnx"), a);
    for (int k = 0; k < 3; ++k) first.Step(data.Get(0, k).arrays);
    first.SaveCheckpoint(dir, {});
    for (const NamedTensor& t : ReadNpz(dir + "/checkpoint.npz"))
      EXPECT_EQ(t.name.find(".half"), std::string::npos) << t.name << " is in the checkpoint";
    Trainer second(LoadModel(kExamples + "digits_mlp/model.onnx"), a);
    second.LoadCheckpoint(dir);
    for (int k = 3; k < 5; ++k) EXPECT_EQ(second.Step(data.Get(0, k).arrays).loss, want[k]) << "step " << k + 1;
    const auto copies = HalfCopies(second.step_graph());
    ASSERT_FALSE(copies.empty());
    for (const auto& [m, h] : copies) {
      const Tensor& w = *full.step_graph().FindValue(h->name)->initializer;
      EXPECT_EQ(std::memcmp(h->initializer->raw(), w.raw(), w.nbytes()), 0) << h->name;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ot
