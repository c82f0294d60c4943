// Trainer features beyond the plain step: gradient accumulation, the LR schedule, checkpoints and exact resume,
// BatchNorm running statistics as state, evaluation in inference mode, and naming the node that produced a
// non-finite value. The model is built in code: x[N,4] -> (BatchNormalization) -> (Log) -> MatMul W -> Add b ->
// logits[N,3], cross-entropy against int64 labels y.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/op_registry.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "tests/test_util.h"
#include "training/trainer.h"

namespace ot {
namespace {

struct ModelSpec {
  bool batchnorm = false;
  bool log = false;
};

std::unique_ptr<Graph> MakeModel(ModelSpec spec) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 15;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape({Dim::Symbol("N"), Dim(4)});
  g->inputs.push_back(x);
  Value* h = x;
  if (spec.batchnorm) {
    std::vector<Value*> ins = {h};
    ins.push_back(g->AddInitializer("bn.scale", test::RandomTensor(DataType::kFloat32, {4}, 0.5, 1.5)));
    ins.push_back(g->AddInitializer("bn.bias", test::RandomTensor(DataType::kFloat32, {4})));
    ins.push_back(g->AddInitializer("bn.mean", test::RandomTensor(DataType::kFloat32, {4})));
    ins.push_back(g->AddInitializer("bn.var", test::RandomTensor(DataType::kFloat32, {4}, 0.5, 1.5)));
    Value* y = g->AddValue("bn.out");
    g->AddNode("BatchNormalization", ins, {y}, "bn")->attrs["training_mode"] = Attribute::Int(0);
    h = y;
  }
  if (spec.log) {
    Value* y = g->AddValue("log.out");
    g->AddNode("Log", {h}, {y}, "the_log");
    h = y;
  }
  Value* w = g->AddInitializer("W", test::RandomTensor(DataType::kFloat32, {4, 3}));
  Value* b = g->AddInitializer("b", test::RandomTensor(DataType::kFloat32, {3}));
  Value* mm = g->AddValue("mm");
  g->AddNode("MatMul", {h, w}, {mm}, "matmul");
  Value* logits = g->AddValue("logits");
  g->AddNode("Add", {mm, b}, {logits}, "add");
  g->outputs.push_back(logits);
  InferShapes(*g);
  return g;
}

// The same model twice (same initial weights): through the serialized form.
std::unique_ptr<Graph> Copy(const Graph& g) { return ParseModel(SerializeModel(g), "", "copy"); }

Arrays MakeData(int64_t n, double lo = -1, double hi = 1) {
  Arrays a;
  a["x"] = test::RandomTensor(DataType::kFloat32, {n, 4}, lo, hi);
  Tensor y(DataType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.SetDouble(i, static_cast<double>(test::Rng()() % 3));
  a["y"] = y;
  return a;
}

Arrays Slice(const Arrays& a, int64_t b, int64_t e) {
  Arrays r;
  for (const auto& [name, t] : a) {
    std::vector<int64_t> dims = t.dims();
    const size_t row = t.nbytes() / static_cast<size_t>(dims[0]);
    dims[0] = e - b;
    Tensor s(t.dtype(), dims);
    std::memcpy(s.raw(), static_cast<const uint8_t*>(t.raw()) + row * b, row * (e - b));
    r[name] = s;
  }
  return r;
}

TrainerOptions Options(const std::string& optimizer, double lr) {
  TrainerOptions o;
  o.loss = {"", "cross_entropy", "logits", "y"};
  o.optimizer.kind = ParseOptimizerKind(optimizer);
  o.optimizer.lr = lr;
  return o;
}

void ExpectSameParams(const Trainer& a, const Trainer& b, double tol) {
  auto pa = a.Parameters(), pb = b.Parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (auto& [name, t] : pa) {
    SCOPED_TRACE(name);
    test::ExpectClose(t, pb.at(name), tol, tol);
  }
}

TEST(TrainerFeatures, GradientAccumulationEqualsOneBigBatch) {
  auto model = MakeModel({});
  Arrays data = MakeData(60);
  TrainerOptions big = Options("adam", 0.05), acc = big;
  acc.optimizer.accumulate = 3;
  Trainer a(Copy(*model), big), b(Copy(*model), acc);
  for (int s = 0; s < 3; ++s) {
    StepResult ra = a.Step(Slice(data, 18 * s, 18 * s + 18));
    StepResult rb = b.Step(
        {Slice(data, 18 * s, 18 * s + 6), Slice(data, 18 * s + 6, 18 * s + 12), Slice(data, 18 * s + 12, 18 * s + 18)});
    EXPECT_NEAR(ra.loss, rb.loss, 1e-5) << "step " << s + 1;  // the mean of the three micro-batch means
    EXPECT_NEAR(ra.grad_norm, rb.grad_norm, 1e-5 * ra.grad_norm) << "step " << s + 1;
    EXPECT_FALSE(rb.skipped);
  }
  EXPECT_EQ(b.optimizer_steps(), 3);
  ExpectSameParams(a, b, 1e-5);
  EXPECT_THROW(b.Step(Slice(data, 0, 6)), Error);  // a step needs its three micro-batches
}

TEST(TrainerFeatures, WarmupStartsAtZeroAndScalesTheUpdate) {
  auto model = MakeModel({});
  Arrays data = MakeData(20);
  TrainerOptions sched = Options("sgd", 0.1), flat = sched;
  sched.optimizer.lr_schedule = 1;  // linear
  sched.optimizer.warmup = 2;
  sched.optimizer.total_steps = 10;
  Trainer s(Copy(*model), sched), c(Copy(*model), flat);
  const auto w0 = s.Parameters();
  StepResult r1 = s.Step(Slice(data, 0, 10));
  EXPECT_EQ(r1.lr, 0.0);
  for (auto& [name, t] : s.Parameters())  // lr 0: nothing moves, bit for bit
    EXPECT_EQ(std::memcmp(t.raw(), w0.at(name).raw(), t.nbytes()), 0) << name;
  EXPECT_EQ(s.optimizer_steps(), 1);
  // Step 2 has factor 1/2: its update is half the constant-lr update from the same weights on the same batch.
  StepResult r2 = s.Step(Slice(data, 10, 20));
  EXPECT_DOUBLE_EQ(r2.lr, 0.05);
  c.Step(Slice(data, 10, 20));
  auto ps = s.Parameters(), pc = c.Parameters();
  for (auto& [name, t] : ps)
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double w = w0.at(name).GetDouble(i);
      EXPECT_NEAR(t.GetDouble(i) - w, 0.5 * (pc.at(name).GetDouble(i) - w), 1e-6) << name << "[" << i << "]";
    }
  // The linear decay after warm-up, and cosine at its midpoint.
  EXPECT_DOUBLE_EQ(ScheduledLr(sched.optimizer, 6), 0.1 * (10 - 6) / 8.0);
  EXPECT_DOUBLE_EQ(ScheduledLr(sched.optimizer, 10), 0.0);
  OptimizerOptions cos = sched.optimizer;
  cos.lr_schedule = 2;
  EXPECT_NEAR(ScheduledLr(cos, 6), 0.05, 1e-12);
}

TEST(TrainerFeatures, ResumeFromCheckpointReproducesTheLossesExactly) {
  auto model = MakeModel({.batchnorm = true});
  Arrays data = MakeData(48);
  const std::string dir = testing::TempDir() + "/ot_ckpt_" + std::to_string(test::Rng()());
  TrainerOptions o = Options("adam", 0.02);
  Trainer full(Copy(*model), o);
  std::vector<double> losses;
  for (int s = 0; s < 6; ++s) losses.push_back(full.Step(Slice(data, 8 * s, 8 * s + 8)).loss);
  {
    Trainer first(Copy(*model), o);
    for (int s = 0; s < 3; ++s) EXPECT_EQ(first.Step(Slice(data, 8 * s, 8 * s + 8)).loss, losses[s]);
    first.SaveCheckpoint(dir, {{"step", "3"}});
  }
  Trainer resumed(Copy(*model), o);
  auto meta = resumed.LoadCheckpoint(dir);
  EXPECT_EQ(meta["step"], "3");
  EXPECT_EQ(resumed.optimizer_steps(), 3);
  for (int s = 3; s < 6; ++s) EXPECT_EQ(resumed.Step(Slice(data, 8 * s, 8 * s + 8)).loss, losses[s]) << s + 1;
  ExpectSameParams(full, resumed, 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/checkpoint.npz.tmp"));

  // A checkpoint of another optimizer does not load: the error names both.
  Trainer sgd(Copy(*model), Options("sgd", 0.1));
  sgd.SaveCheckpoint(dir, {});
  try {
    resumed.LoadCheckpoint(dir);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds sgd's state, this run trains with adam"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(resumed.optimizer_steps(), 6);  // nothing was loaded
  std::filesystem::remove_all(dir);
}

// Every checkpoint is checked before anything loads: another optimizer's (either way round), a step counter < 0, a
// non-finite learning rate or weight, junk metadata. --reset-optimizer loads the weights and starts the
// optimizer afresh.
TEST(TrainerFeatures, CheckpointsAreCheckedBeforeAnythingLoads) {
  auto model = MakeModel({.batchnorm = true});
  Arrays data = MakeData(16);
  const std::string dir = testing::TempDir() + "/ot_ckpt_bad_" + std::to_string(test::Rng()());
  Trainer adam(Copy(*model), Options("adam", 0.02));
  adam.Step(Slice(data, 0, 8));
  adam.Step(Slice(data, 8, 16));
  adam.SaveCheckpoint(dir, {{"step", "2"}});
  const std::string path = dir + "/checkpoint.npz";
  const std::vector<NamedTensor> good = ReadNpz(path);

  auto refused = [&](Trainer& t, const std::string& want, bool reset = false) {
    const auto before = t.Parameters();
    const int64_t steps = t.optimizer_steps();
    try {
      t.LoadCheckpoint(dir, reset);
      ADD_FAILURE() << "expected an error with '" << want << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    EXPECT_EQ(t.optimizer_steps(), steps);
    for (const auto& [name, w] : t.Parameters())
      EXPECT_EQ(std::memcmp(w.raw(), before.at(name).raw(), w.nbytes()), 0) << name << " changed";
  };
  // Adam's checkpoint into an SGD run (SGD has no state of its own that could be missing).
  Trainer sgd(Copy(*model), Options("sgd", 0.1));
  refused(sgd, "holds adam's state, this run trains with sgd (--reset-optimizer");
  // --reset-optimizer: the weights and running statistics load, the optimizer starts at step 0 with its own lr.
  sgd.LoadCheckpoint(dir, true);
  EXPECT_EQ(sgd.optimizer_steps(), 0);
  EXPECT_EQ(sgd.options().optimizer.lr, 0.1);
  ExpectSameParams(adam, sgd, 0);
  EXPECT_EQ(std::memcmp(sgd.step_graph().FindValue("bn.mean")->initializer->raw(),
                        adam.step_graph().FindValue("bn.mean")->initializer->raw(), 4 * sizeof(float)),
            0);

  auto rewrite = [&](const std::string& name, const std::function<void(Tensor&)>& change) {
    std::vector<NamedTensor> arrays = good;
    bool found = false;
    for (NamedTensor& nt : arrays)
      if (nt.name == name) {
        nt.tensor = nt.tensor.Clone();
        change(nt.tensor);
        found = true;
      }
    ASSERT_TRUE(found) << name;
    WriteNpz(path, arrays, false);
  };
  Trainer fresh(Copy(*model), Options("adam", 0.02));
  rewrite("optimizer.step", [](Tensor& t) { t.SetDouble(0, -7); });
  refused(fresh, "the optimizer step counter 'optimizer.step' is -7");
  rewrite("optimizer.lr", [](Tensor& t) { t.SetDouble(0, std::nan("")); });
  refused(fresh, "array 'optimizer.lr' holds nan at element 0");
  rewrite("W", [](Tensor& t) { t.SetDouble(5, INFINITY); });
  refused(fresh, "array 'W' holds inf at element 5");
  rewrite("__trainer_meta__", [](Tensor& t) {
    Tensor junk(DataType::kUint8, {5});
    std::memcpy(junk.raw(), "junk\n", 5);
    t = junk;
  });
  refused(fresh, "metadata line 1 is not KEY=VALUE");
  // The unchanged checkpoint loads, with the caller's metadata back.
  WriteNpz(path, good, false);
  EXPECT_EQ(fresh.LoadCheckpoint(dir).at("step"), "2");
  EXPECT_EQ(fresh.optimizer_steps(), 2);
  ExpectSameParams(adam, fresh, 0);
  std::filesystem::remove_all(dir);
}

TEST(TrainerFeatures, BatchNormRunningStatisticsAreUpdatedAndSaved) {
  auto model = MakeModel({.batchnorm = true});
  Arrays data = MakeData(16);
  const Tensor mean0 = model->FindValue("bn.mean")->initializer->Clone();
  const Tensor var0 = model->FindValue("bn.var")->initializer->Clone();
  Trainer t(Copy(*model), Options("sgd", 0.1));
  t.Step(data);
  // ONNX semantics: running = 0.9 * running + 0.1 * batch statistic (biased variance).
  const Tensor& x = data["x"];
  const Value* mean = t.step_graph().FindValue("bn.mean");
  const Value* var = t.step_graph().FindValue("bn.var");
  for (int64_t c = 0; c < 4; ++c) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < 16; ++i) m += x.GetDouble(i * 4 + c) / 16;
    for (int64_t i = 0; i < 16; ++i) v += (x.GetDouble(i * 4 + c) - m) * (x.GetDouble(i * 4 + c) - m) / 16;
    EXPECT_NEAR(mean->initializer->GetDouble(c), 0.9 * mean0.GetDouble(c) + 0.1 * m, 1e-5);
    EXPECT_NEAR(var->initializer->GetDouble(c), 0.9 * var0.GetDouble(c) + 0.1 * v, 1e-5);
  }
  // The saved model is in inference mode with those statistics and the trained weights.
  const std::string path = testing::TempDir() + "/ot_saved_" + std::to_string(test::Rng()()) + ".onnx";
  t.Save(path);
  auto saved = LoadModel(path);
  std::filesystem::remove(path);
  const Node* bn = saved->FindValue("bn.out")->producer;
  EXPECT_EQ(bn->attr_int("training_mode", 1), 0);
  EXPECT_EQ(bn->outputs.size(), 1u);
  test::ExpectClose(*saved->FindValue("bn.mean")->initializer, *mean->initializer, 0, 0);
  test::ExpectClose(*saved->FindValue("W")->initializer, t.Parameters().at("W"), 0, 0);
}

TEST(TrainerFeatures, EvaluateUsesInferenceModeOverEverySample) {
  auto model = MakeModel({.batchnorm = true});
  Arrays data = MakeData(23);
  Trainer t(Copy(*model), Options("sgd", 0.1));
  t.Step(Slice(data, 0, 16));
  const EvalResult e = t.Evaluate(data, 7);  // batches of 7, 7, 7 and 2
  EXPECT_EQ(e.samples, 23);
  // Reference: the saved inference model run once over all samples; cross-entropy and accuracy in double.
  const std::string path = testing::TempDir() + "/ot_eval_" + std::to_string(test::Rng()()) + ".onnx";
  t.Save(path);
  auto saved = LoadModel(path);
  std::filesystem::remove(path);
  Executor ex(*saved);
  const Tensor logits = ex.Run({{"x", data["x"]}})[0];
  double loss = 0;
  int correct = 0;
  for (int64_t i = 0; i < 23; ++i) {
    double mx = -1e300, sum = 0;
    int best = 0;
    for (int c = 0; c < 3; ++c)
      if (logits.GetDouble(i * 3 + c) > mx) mx = logits.GetDouble(i * 3 + c), best = c;
    for (int c = 0; c < 3; ++c) sum += std::exp(logits.GetDouble(i * 3 + c) - mx);
    const int64_t y = static_cast<int64_t>(data["y"].GetDouble(i));
    loss += (std::log(sum) + mx - logits.GetDouble(i * 3 + y)) / 23;
    correct += best == y;
  }
  EXPECT_NEAR(e.loss, loss, 1e-5);
  EXPECT_DOUBLE_EQ(e.accuracy, correct / 23.0);
  // Evaluation changes no training state.
  const auto before = t.Parameters();
  t.Evaluate(data, 5);
  for (auto& [name, p] : t.Parameters()) test::ExpectClose(p, before.at(name), 0, 0);
  EXPECT_THROW(t.Evaluate({{"x", data["x"]}}, 4), Error);  // no labels
}

TEST(TrainerFeatures, NonFiniteGradientsSkipTheStepAndNameTheNode) {
  auto model = MakeModel({.log = true});
  Trainer t(Copy(*model), Options("adam", 0.1));
  const auto w0 = t.Parameters();
  Arrays bad = MakeData(8, -1.0, -0.1);  // Log of negative numbers: NaN
  StepResult r = t.Step(bad);
  EXPECT_TRUE(r.skipped);
  EXPECT_EQ(t.optimizer_steps(), 0);
  for (auto& [name, p] : t.Parameters()) test::ExpectClose(p, w0.at(name), 0, 0);
  const std::string node = t.FirstNonFiniteNode(bad);
  EXPECT_NE(node.find("the_log"), std::string::npos) << node;
  EXPECT_EQ(t.FirstNonFiniteNode(MakeData(8, 0.1, 1.0)), "");  // a good batch has none
  EXPECT_FALSE(t.Step(MakeData(8, 0.1, 1.0)).skipped);
  EXPECT_EQ(t.optimizer_steps(), 1);
}

TEST(TrainerFeatures, CheckNumericsStopsAtTheFirstNonFiniteNode) {
  auto model = MakeModel({.log = true});
  TrainerOptions o = Options("sgd", 0.1);
  o.check_numerics = true;
  Trainer t(Copy(*model), o);
  EXPECT_FALSE(t.Step(MakeData(8, 0.1, 1.0)).skipped);  // finite: runs as usual
  const auto w = t.Parameters();
  try {
    t.Step(MakeData(8, -1.0, -0.1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the_log"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("step 2"), std::string::npos) << e.what();
    // What it saw: its precision, its input's range (all negative: the cause) and how many outputs were NaN.
    EXPECT_NE(std::string(e.what()).find("ran in float32"), std::string::npos) << e.what();
    // The range printed is that of the batch: inside [-1, -0.1] where the data was drawn, and all negative.
    const std::string msg = e.what(), key = "input 0 'x' float32 range [";
    const size_t at = msg.find(key);
    ASSERT_NE(at, std::string::npos) << msg;
    double lo = 0, hi = 0;
    ASSERT_EQ(std::sscanf(msg.c_str() + at + key.size(), "%lf, %lf]", &lo, &hi), 2) << msg;
    EXPECT_GE(lo, -1.0) << msg;
    EXPECT_LT(lo, hi) << msg;
    EXPECT_LE(hi, -0.1) << msg;
    EXPECT_NE(std::string(e.what()).find(" NaN, 0 inf of "), std::string::npos) << e.what();
  }
  for (auto& [name, p] : t.Parameters()) test::ExpectClose(p, w.at(name), 0, 0);
  EXPECT_EQ(t.optimizer_steps(), 1);
}

}  // namespace
}  // namespace ot
