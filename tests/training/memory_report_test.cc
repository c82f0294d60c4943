// The memory report of a training step (training/memory_report.h) against bytes counted by hand. The model is
// built in code: x[N,8] -> Gemm(W1[8,64], b1) -> h -> Relu -> r -> Gemm(W2[64,3], b2) -> logits[N,3], cross-entropy
// against int64 labels y[N]. Its backward reads exactly x (dW1 = x^T dh), r (ReluGrad reads the Relu output; dW2
// = r^T dlogits), logits and y (the loss gradient); W1/W2 are parameters, not activations, and h is not read.
#include "training/memory_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "executor/plan.h"
#include "graph/error.h"
#include "graph/op_registry.h"
#include "tests/test_util.h"
#include "training/trainer.h"

namespace ot {
namespace {

// kHidden 64, not 16: on AVX-512 oneDNN's GEMM for the [4, 3] gradient declares a 4.8 KB scratchpad, which made that
// backward kernel the peak at batch 4 while the update's next parameters and moments were only 2.3 KB.
constexpr int64_t kIn = 8, kHidden = 64, kOut = 3;
// Parameter bytes: W1, b1, W2, b2 in float32.
constexpr int64_t kParamBytes = 4 * (kIn * kHidden + kHidden + kHidden * kOut + kOut);
// Saved bytes per sample: x (8 floats), r (64 floats), logits (3 floats), y (one int64).
constexpr int64_t kSavedPerSample = 4 * kIn + 4 * kHidden + 4 * kOut + 8;
// optimizer.lr (float64) and optimizer.step (int64).
constexpr int64_t kOptimizerScalars = 16;

// `feature`: the name of a symbolic second dim of x ("" = static 8). `matmul`: the first layer is MatMul + Add,
// whose weight gradient MatMul(Transpose(x), dh) transposes x in a node that reads only forward values.
std::unique_ptr<Graph> MakeMlp(const std::string& feature = "", bool matmul = false) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 15;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape({Dim::Symbol("N"), feature.empty() ? Dim(kIn) : Dim::Symbol(feature)});
  g->inputs.push_back(x);
  Value* w1 = g->AddInitializer("W1", test::RandomTensor(DataType::kFloat32, {kIn, kHidden}));
  Value* b1 = g->AddInitializer("b1", test::RandomTensor(DataType::kFloat32, {kHidden}));
  Value* w2 = g->AddInitializer("W2", test::RandomTensor(DataType::kFloat32, {kHidden, kOut}));
  Value* b2 = g->AddInitializer("b2", test::RandomTensor(DataType::kFloat32, {kOut}));
  Value* h = g->AddValue("h");
  if (matmul) {
    Value* mm = g->AddValue("mm");
    g->AddNode("MatMul", {x, w1}, {mm}, "fc1.matmul");
    g->AddNode("Add", {mm, b1}, {h}, "fc1.add");
  } else {
    g->AddNode("Gemm", {x, w1, b1}, {h}, "fc1");
  }
  Value* r = g->AddValue("r");
  g->AddNode("Relu", {h}, {r}, "relu");
  Value* logits = g->AddValue("logits");
  g->AddNode("Gemm", {r, w2, b2}, {logits}, "fc2");
  g->outputs.push_back(logits);
  InferShapes(*g);
  return g;
}

struct Step {
  std::unique_ptr<Graph> graph;
  StepGraphInfo info;
};

Step MakeStep(const std::string& optimizer, int64_t accumulate = 1, const std::string& freeze = "", bool matmul = false,
              DataType amp = DataType::kUndefined) {
  Step s;
  s.graph = MakeMlp("", matmul);
  StepOptions o;
  o.loss = {"", "cross_entropy", "logits", "y"};
  o.freeze = freeze;
  o.amp.half = amp;
  o.optimizer.kind = ParseOptimizerKind(optimizer);
  o.optimizer.accumulate = accumulate;
  s.info = BuildStepGraph(*s.graph, o);
  AddTrainerOutputs(*s.graph, s.info);
  return s;
}

MemoryReport Report(const Step& s, int64_t batch) { return PlanMemory(*s.graph, batch, nullptr, s.info.loss); }

int64_t Sum(const MemoryReport& r) {
  return r.parameters + r.half_copies + r.optimizer_state + r.saved_activations + r.gradients + r.transient;
}

// The liveness peak recomputed by brute force over the plan's buffers (every step, every buffer), the model of
// memory_report.h: not written by a kernel -> the whole step; arena -> [def, last]; graph output -> [def, end].
int64_t BruteForcePeak(const Plan& plan) {
  const auto bufs = plan.buffer_views();
  const int n = static_cast<int>(plan.step_views().size());
  int64_t peak = 0;
  for (int s = 0; s < n; ++s) {
    int64_t live = 0;
    for (const auto& b : bufs) {
      const bool alive =
          b.def_step < 0 || (b.def_step <= s && (b.kind == Plan::BufferKind::kOutput || s <= b.last_step));
      if (alive) live += static_cast<int64_t>(b.desc.nbytes());
    }
    peak = std::max(peak, live);
  }
  return peak;
}

TEST(MemoryReport, AdamMlpMatchesTheBytesCountedByHand) {
  const Step s = MakeStep("adam");
  const int64_t batch = 4;
  const BatchInputs in = InputsForBatch(*s.graph, batch);
  ASSERT_EQ(in.descs.at("x").dims, (std::vector<int64_t>{batch, kIn}));
  ASSERT_EQ(in.descs.at("y").dims, (std::vector<int64_t>{batch}));
  std::unique_ptr<Plan> plan = Plan::Compile(*s.graph, in.descs, in.known(), 0);
  const MemoryReport r = ReportMemory(*s.graph, *plan, s.info.loss);

  EXPECT_EQ(r.parameters, kParamBytes);
  EXPECT_EQ(r.half_copies, 0);
  EXPECT_EQ(r.optimizer_state, 2 * kParamBytes + kOptimizerScalars);  // exp_avg, exp_avg_sq, lr, step
  EXPECT_EQ(r.saved_activations_total, batch * kSavedPerSample);
  std::set<std::string> saved;
  for (const SavedActivation& a : r.largest) saved.insert(a.name);
  EXPECT_EQ(saved, (std::set<std::string>{"x", "r", "logits", "y"}));
  ASSERT_FALSE(r.largest.empty());
  EXPECT_EQ(r.largest[0].name, "r");  // 64 floats per sample: the largest
  EXPECT_EQ(r.largest[0].op, "Relu");
  EXPECT_EQ(r.largest[0].bytes, batch * kHidden * 4);
  EXPECT_EQ(r.largest[0].dims, (std::vector<int64_t>{batch, kHidden}));

  // At batch 4 the update is the peak: every gradient is live, the activations the backward consumed are not
  // (x, y: fed, resident; logits: a graph output, alive to the end), and the next parameters and moments
  // (graph outputs the Trainer copies back) are written.
  EXPECT_NE(r.peak_node.find("OptimizerUpdate"), std::string::npos) << r.peak_node;
  EXPECT_EQ(r.gradients, kParamBytes);
  EXPECT_EQ(r.saved_activations, batch * (4 * kIn + 4 * kOut + 8));
  // Every graph output but logits (saved): next W/b, exp_avg, exp_avg_sq (3x params), and scalars: step' (8),
  // grad_norm (4), skipped (1), loss (4) and whatever statistics the update reports.
  int64_t outputs = 0;
  for (const Value* o : s.graph->outputs)
    if (o->name != "logits") outputs += *o->shape.NumElements() * static_cast<int64_t>(SizeOf(o->dtype));
  EXPECT_GE(outputs, 3 * kParamBytes + 8 + 4 + 1 + 4);
  EXPECT_LE(outputs, 3 * kParamBytes + 64);
  EXPECT_EQ(r.step_outputs, outputs);
  EXPECT_GE(r.transient, r.step_outputs + r.constants);
  EXPECT_EQ(Sum(r), r.peak_bytes);
  EXPECT_EQ(r.peak_bytes, BruteForcePeak(*plan));
  EXPECT_EQ(r.arena_bytes, plan->arena_bytes());
  EXPECT_GE(r.arena_bytes, r.transient - r.constants - r.step_outputs);
  EXPECT_EQ(r.kernels, plan->kernel_count());
}

TEST(MemoryReport, LargeBatchPeaksInTheBackwardWithActivationsLive) {
  const Step s = MakeStep("adam");
  const int64_t batch = 4096;  // activations (~1.2 MiB) dwarf the 3 KiB of parameters
  const BatchInputs in = InputsForBatch(*s.graph, batch);
  std::unique_ptr<Plan> plan = Plan::Compile(*s.graph, in.descs, in.known(), 0);
  const MemoryReport r = ReportMemory(*s.graph, *plan, s.info.loss);
  EXPECT_EQ(r.peak_node.find("OptimizerUpdate"), std::string::npos) << r.peak_node;
  EXPECT_EQ(r.parameters, kParamBytes);
  // r is alive at the peak (the backward has not consumed it yet) or x, y, logits are: saved bytes dominate.
  EXPECT_GT(r.saved_activations, batch * (4 * kIn + 4 * kOut + 8));
  EXPECT_LE(r.saved_activations, r.saved_activations_total);
  EXPECT_LE(r.gradients, kParamBytes);
  EXPECT_EQ(Sum(r), r.peak_bytes);
  EXPECT_EQ(r.peak_bytes, BruteForcePeak(*plan));
  EXPECT_GE(r.arena_bytes, r.transient - r.constants - r.step_outputs);
}

TEST(MemoryReport, NodesOnlyTheBackwardReadsAreBackward) {
  // dW1 = MatMul(Transpose(x), dh): the Transpose reads only x, yet exists only for the backward. x is what the
  // step keeps for it (saved), not the transposed copy; the saved bytes are those of the Gemm model.
  const Step s = MakeStep("adam", 1, "", true);
  const int64_t batch = 8;
  const MemoryReport r = Report(s, batch);
  std::set<std::string> saved;
  for (const SavedActivation& a : r.largest) saved.insert(a.name);
  EXPECT_EQ(saved, (std::set<std::string>{"x", "r", "logits", "y"}));
  EXPECT_EQ(r.saved_activations_total, batch * kSavedPerSample);
  EXPECT_EQ(Sum(r), r.peak_bytes);
}

TEST(MemoryReport, GradientsAreCountedFromTheKernelThatComputesThem) {
  // autodiff names each gradient with an Identity after the whole backward; the gradient a rule computed (dW2 =
  // r^T dlogits, early in the backward) is gradient memory from its kernel on, not transient. At the step that
  // computes dW1 (the last Gemm of the backward), dW2 and db2 are live.
  const Step s = MakeStep("sgd");
  const int64_t batch = 4096;
  const BatchInputs in = InputsForBatch(*s.graph, batch);
  std::unique_ptr<Plan> plan = Plan::Compile(*s.graph, in.descs, in.known(), 0);
  const MemoryReport r = ReportMemory(*s.graph, *plan, s.info.loss);
  EXPECT_EQ(r.peak_node.find("OptimizerUpdate"), std::string::npos) << r.peak_node;
  EXPECT_GE(r.gradients, 4 * (kHidden * kOut + kOut)) << r.peak_node;
  EXPECT_EQ(r.peak_bytes, BruteForcePeak(*plan));
}

TEST(MemoryReport, DoublingTheBatchDoublesTheSavedActivations) {
  const Step s = MakeStep("adam");
  const int64_t batch = 8 + static_cast<int64_t>(test::Rng()() % 56);
  const MemoryReport a = Report(s, batch), b = Report(s, 2 * batch);
  EXPECT_EQ(a.saved_activations_total, batch * kSavedPerSample);
  EXPECT_EQ(b.saved_activations_total, 2 * a.saved_activations_total);
  EXPECT_EQ(a.parameters, b.parameters);
  EXPECT_EQ(a.optimizer_state, b.optimizer_state);
  EXPECT_GT(b.peak_bytes, a.peak_bytes);
}

TEST(MemoryReport, SgdHasNoMomentsMomentumOne) {
  const MemoryReport sgd = Report(MakeStep("sgd"), 16);
  EXPECT_EQ(sgd.parameters, kParamBytes);
  EXPECT_EQ(sgd.optimizer_state, kOptimizerScalars);
  EXPECT_EQ(Sum(sgd), sgd.peak_bytes);
  const MemoryReport momentum = Report(MakeStep("momentum"), 16);
  EXPECT_EQ(momentum.optimizer_state, kParamBytes + kOptimizerScalars);
  EXPECT_EQ(momentum.saved_activations_total, sgd.saved_activations_total);
}

TEST(MemoryReport, GradientAccumulationSumsAreOptimizerState) {
  // K > 1: the running gradient sums (one per parameter) and the micro-step counter (int64) are state.
  const MemoryReport r = Report(MakeStep("adam", 4), 16);
  EXPECT_EQ(r.optimizer_state, 3 * kParamBytes + kOptimizerScalars + 8);
  EXPECT_EQ(r.parameters, kParamBytes);
  EXPECT_EQ(Sum(r), r.peak_bytes);
}

TEST(MemoryReport, FrozenWeightsAreConstantsNotParameters) {
  const MemoryReport r = Report(MakeStep("adam", 1, "^W1$"), 16);
  const int64_t w1 = 4 * kIn * kHidden;
  EXPECT_EQ(r.parameters, kParamBytes - w1);
  EXPECT_EQ(r.optimizer_state, 2 * (kParamBytes - w1) + kOptimizerScalars);
  EXPECT_GE(r.constants, w1);
  // x is read by no backward kernel now (dW1 is not computed): it is fed data, not a saved activation.
  EXPECT_EQ(r.saved_activations_total, 16 * (4 * kHidden + 4 * kOut + 8));
  EXPECT_EQ(Sum(r), r.peak_bytes);
}

TEST(MemoryReport, HalfStateIsCountedAsHalfCopies) {
  // A half copy of W2 refreshed each step (what master weights add): bf16 state bound to a Cast of W2's next
  // value. It is state whose dtype is half and not a trained parameter.
  Step s = MakeStep("sgd");
  Graph& g = *s.graph;
  Value* w2 = g.FindValue("W2");
  Value* w2_next = nullptr;
  for (const auto& b : g.update_bindings)
    if (b.state == w2) w2_next = b.next;
  ASSERT_NE(w2_next, nullptr);
  Value* half = g.AddInitializer("W2.half", Tensor(DataType::kBFloat16, {kHidden, kOut}));
  Value* half_next = g.AddValue("W2.half_next");
  g.AddNode("Cast", {w2_next}, {half_next}, "W2.refresh")->attrs["to"] =
      Attribute::Int(static_cast<int64_t>(DataType::kBFloat16));
  InferShapes(g);
  g.update_bindings.push_back({half, half_next});
  g.outputs.push_back(half_next);
  const MemoryReport r = Report(s, 16);
  EXPECT_EQ(r.half_copies, 2 * kHidden * kOut);
  EXPECT_EQ(r.parameters, kParamBytes);
  EXPECT_EQ(r.optimizer_state, kOptimizerScalars);
  EXPECT_EQ(Sum(r), r.peak_bytes);
}

TEST(MemoryReport, AmpStepHasHalfCopiesAndHalfActivations) {
  // --amp: the Gemms run in half, so what the backward keeps of x and r is their half copy (2 bytes an element);
  // logits (fp32: the model's output) and y are unchanged. Master weights: every trained parameter stays fp32
  // (parameters) and has a half copy refreshed by the update (half_copies: half the bytes). With fp16, loss
  // scaling adds its state: S (float32), good and bad step counts (int64).
  const int64_t batch = 32;
  const MemoryReport fp32 = Report(MakeStep("adam"), batch);
  for (DataType half : {DataType::kBFloat16, DataType::kFloat16}) {
    SCOPED_TRACE(DataTypeName(half));
    const Step s = MakeStep("adam", 1, "", false, half);
    const MemoryReport r = Report(s, batch);
    EXPECT_EQ(r.parameters, kParamBytes);
    EXPECT_EQ(r.half_copies, kParamBytes / 2);
    EXPECT_EQ(r.optimizer_state, 2 * kParamBytes + kOptimizerScalars + (half == DataType::kFloat16 ? 4 + 8 + 8 : 0));
    EXPECT_EQ(r.saved_activations_total, batch * (2 * kIn + 2 * kHidden + 4 * kOut + 8));
    EXPECT_LT(r.saved_activations_total, fp32.saved_activations_total);
    for (const SavedActivation& a : r.largest)
      if (a.name == "r") {
        EXPECT_EQ(a.dtype, half);
      }
    EXPECT_EQ(Sum(r), r.peak_bytes);
  }
}

TEST(MemoryReport, SymbolicDimsComeFromTheData) {
  std::unique_ptr<Graph> g = MakeMlp("features");
  StepOptions o;
  o.loss = {"", "cross_entropy", "logits", "y"};
  const StepGraphInfo info = BuildStepGraph(*g, o);
  AddTrainerOutputs(*g, info);
  // Without data: the error names the input, the dim and its symbol.
  try {
    PlanMemory(*g, 32, nullptr, info.loss);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dim 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("features"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--data"), std::string::npos) << msg;
  }
  // With data of another sample count: its dims after axis 0, the batch from the argument.
  std::map<std::string, Tensor> data;
  data["x"] = test::RandomTensor(DataType::kFloat32, {5, kIn});
  data["y"] = Tensor(DataType::kInt64, {5});
  const BatchInputs in = InputsForBatch(*g, 32, &data);
  EXPECT_EQ(in.descs.at("x").dims, (std::vector<int64_t>{32, kIn}));
  const MemoryReport r = PlanMemory(*g, 32, &data, info.loss);
  EXPECT_EQ(r.saved_activations_total, 32 * kSavedPerSample);
  // Data whose array has another rank is an error naming the array.
  data["x"] = test::RandomTensor(DataType::kFloat32, {5, kIn, 1});
  EXPECT_THROW(
      {
        try {
          InputsForBatch(*g, 32, &data, "train.npz");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("train.npz: array 'x'"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

TEST(MemoryReport, StaticBatchOtherThanTheBatchIsAnError) {
  std::unique_ptr<Graph> g = MakeMlp();
  g->inputs[0]->shape = Shape({Dim(4), Dim(kIn)});
  InferShapes(*g);
  StepOptions o;
  o.loss = {"", "cross_entropy", "logits", "y"};
  const StepGraphInfo info = BuildStepGraph(*g, o);
  try {
    PlanMemory(*g, 8, nullptr, info.loss);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' has a static batch dim 4"), std::string::npos) << e.what();
  }
}

TEST(MemoryReport, AGraphWithoutBackwardIsAnError) {
  std::unique_ptr<Graph> g = MakeMlp();
  const BatchInputs in = InputsForBatch(*g, 2);
  std::unique_ptr<Plan> plan = Plan::Compile(*g, in.descs, in.known(), 0);
  try {
    ReportMemory(*g, *plan, "loss");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loss_grad_seed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ot
