// The measured memory of a step against its plan (issue 5: "the measured peak of a step (all allocations
// counted) is at most the plan plus the declared workspace, and at least 0.9x the plan"), and the next state
// written in place: the same numbers, bit for bit, as the Trainer's copy.
//
// Measurement: this file interposes malloc/free/calloc/realloc/posix_memalign/aligned_alloc/memalign for the
// whole test_executor binary (wrappers over glibc's __libc_* that count live bytes by malloc_usable_size and keep a
// resettable peak). Under a sanitizer (which has its own allocator) nothing is interposed and the measuring test
// skips.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "executor/plan.h"
#include "kernel_common/scalar_math.h"
#include "onnx_import/model_io.h"
#include "passes/step_graph.h"
#include "tests/executor/example_data.h"
#include "tests/test_util.h"
#include "training/data_loader.h"
#include "training/fusion.h"
#include "training/memory_report.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define OT_NO_MALLOC_COUNTER 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OT_NO_MALLOC_COUNTER 1
#endif

namespace ot::alloc_counter {
// Live heap bytes (usable sizes) and the largest value since the last Reset. Blocks allocated before the binary's
// first counted call may be freed later: read differences, never absolute values.
std::atomic<int64_t> live{0}, peak{0};
inline void Add(int64_t n) {
  const int64_t now = live.fetch_add(n, std::memory_order_relaxed) + n;
  int64_t p = peak.load(std::memory_order_relaxed);
  while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}
void Reset() { peak.store(live.load()); }
#ifdef OT_NO_MALLOC_COUNTER
constexpr bool kActive = false;
#else
constexpr bool kActive = true;
#endif
}  // namespace ot::alloc_counter

#ifndef OT_NO_MALLOC_COUNTER
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

static inline void* Counted(void* p) {
  if (p) ot::alloc_counter::Add(static_cast<int64_t>(malloc_usable_size(p)));
  return p;
}
void* malloc(size_t n) { return Counted(__libc_malloc(n)); }
void* calloc(size_t n, size_t m) { return Counted(__libc_calloc(n, m)); }
void free(void* p) {
  if (!p) return;
  ot::alloc_counter::Add(-static_cast<int64_t>(malloc_usable_size(p)));
  __libc_free(p);
}
void* realloc(void* p, size_t n) {
  const int64_t old = p ? static_cast<int64_t>(malloc_usable_size(p)) : 0;
  void* q = __libc_realloc(p, n);
  if (q)
    ot::alloc_counter::Add(static_cast<int64_t>(malloc_usable_size(q)) - old);
  else if (p && n == 0)
    ot::alloc_counter::Add(-old);  // realloc(p, 0) freed p
  return q;
}
void* memalign(size_t a, size_t n) { return Counted(__libc_memalign(a, n)); }
void* aligned_alloc(size_t a, size_t n) { return Counted(__libc_memalign(a, n)); }
int posix_memalign(void** out, size_t a, size_t n) {
  if (a < sizeof(void*) || (a & (a - 1))) return 22;  // EINVAL
  void* p = __libc_memalign(a, n);
  if (!p) return 12;  // ENOMEM
  *out = Counted(p);
  return 0;
}
}
#endif

namespace ot {
namespace {

using examples::kExamples;

struct LmStep {
  std::unique_ptr<Graph> graph;
  StepGraphInfo info;
};

// The tiny transformer's training step as the Trainer compiles it (Adam; `half`: AMP precision or kUndefined).
LmStep MakeLmStep(DataType half) {
  nlohmann::json ref = examples::Reference("tiny_lm", "adam");
  LmStep s;
  s.graph = LoadModel(kExamples + "tiny_lm/model.onnx");
  StepOptions o;
  o.loss = {"", ref["loss"], ref["logits"], ref["labels"]};
  o.optimizer.kind = ParseOptimizerKind("adam");
  o.optimizer.lr = ref["lr"];
  o.amp.half = half;
  s.info = BuildStepGraph(*s.graph, o);
  AddTrainerOutputs(*s.graph, s.info);
  return s;
}

std::map<std::string, Tensor> Batch(int64_t batch, int64_t index) {
  static std::map<std::string, Tensor> data = examples::TinyLmData();
  DataLoader loader(data, batch, false, 0, "tiny_lm/data.npz");
  return loader.Get(0, index % loader.batches_per_epoch()).arrays;
}

std::unique_ptr<Plan> Compile(const Graph& g, const std::map<std::string, Tensor>& feeds, bool state_in_place) {
  std::map<std::string, TensorDesc> descs;
  std::map<std::string, const Tensor*> known;
  for (const auto& [name, t] : feeds) descs[name] = TensorDesc{t.dtype(), t.dims(), true};
  for (const Value* v : ValuesNeededAtPlanTime(g))
    if (feeds.count(v->name)) known[v->name] = &feeds.at(v->name);
  return Plan::Compile(g, descs, known, 0, state_in_place);
}

// What the Trainer does after a run: the next state into the state (skipped when the plan wrote it there).
void CopyState(Graph& g, const std::vector<Tensor>& out) {
  for (const auto& b : g.update_bindings) {
    size_t idx = 0;
    while (g.outputs[idx] != b.next) ++idx;
    Tensor& s = *b.state->initializer;
    if (out[idx].raw() != s.raw()) std::memcpy(s.raw(), out[idx].raw(), s.nbytes());
  }
}

class MemoryPeak : public ::testing::TestWithParam<DataType> {};
class MemoryPeakFused : public ::testing::TestWithParam<std::tuple<DataType, std::string>> {};

// Batch 64, one step after a warm-up step (first-run work -- TBB's worker threads, oneDNN's kernel caches -- is not
// the step's memory): heap bytes live at the peak during Plan::Run, minus those live before it, plus what the
// plan allocated before the run (state, constants and fed inputs, and the arena), against the plan's peak
// (resident -- outputs included -- plus the whole arena).
// The same for every --fuse mode: the fused step's plan (FusedElementwise kernels with their row workspaces).
TEST_P(MemoryPeakFused, MeasuredPeakOfTheTinyLmStepFollowsThePlan) {
  if (!alloc_counter::kActive) GTEST_SKIP() << "built with a sanitizer: malloc is not interposed";
  const auto [half, mode] = GetParam();
  LmStep s = MakeLmStep(half);
  const std::map<std::string, Tensor> feeds = Batch(64, 0);
  if (mode != "off") {
    std::map<std::string, TensorDesc> descs;
    std::map<std::string, const Tensor*> known;
    for (const auto& [name, t] : feeds) descs[name] = TensorDesc{t.dtype(), t.dims(), true};
    for (const Value* v : ValuesNeededAtPlanTime(*s.graph))
      if (feeds.count(v->name)) known[v->name] = &feeds.at(v->name);
    FuseOptions fo;
    fo.mode = ParseFuseMode(mode);
    fo.memory_budget = int64_t{1} << 40;
    const FusionReport r = FuseForShapes(*s.graph, fo, descs, known);
    ASSERT_FALSE(r.clusters.empty()) << mode << " made no cluster in the transformer";
  }
  std::unique_ptr<Plan> plan = Compile(*s.graph, feeds, true);
  const MemoryPlan& mp = plan->memory_plan();
  EXPECT_FALSE(plan->outputs_in_state().empty());
  CopyState(*s.graph, plan->Run(feeds, 0));

  const int64_t planned = mp.resident_bytes + mp.arena_bytes;
  // Every kernel's scratch memory is declared in the arena; what the libraries allocate on their own and the
  // returned tensors' handles are declared outside it (Plan::heap_bytes).
  const int64_t declared_outside = plan->heap_bytes();
  const int64_t before = alloc_counter::live.load();
  alloc_counter::Reset();
  std::vector<Tensor> out = plan->Run(feeds, 1);
  const int64_t during = alloc_counter::peak.load() - before;
  CopyState(*s.graph, out);
  const int64_t measured = during + (mp.resident_bytes - plan->output_bytes()) + mp.arena_bytes;
  int64_t ws_max = 0;
  for (int k = 0; k < plan->kernel_count(); ++k) ws_max = std::max(ws_max, plan->workspace_bytes(k));
  std::printf(
      "tiny_lm batch 64 %s --fuse=%s: measured peak %.2f MB, planned %.2f MB (resident %.2f MB of which outputs %.3f "
      "MB, "
      "arena %.2f MB, live peak %.2f MB, largest workspace %.2f MB, in place %.2f MB, declared heap %.3f MB); heap "
      "during "
      "the run +%.3f MB\n",
      half == DataType::kUndefined ? "fp32" : DataTypeName(half).c_str(), mode.c_str(), measured / 1e6, planned / 1e6,
      mp.resident_bytes / 1e6, plan->output_bytes() / 1e6, mp.arena_bytes / 1e6, mp.peak_live_bytes / 1e6, ws_max / 1e6,
      mp.inplace_saved_bytes / 1e6, declared_outside / 1e6, during / 1e6);
  EXPECT_LE(measured, planned + declared_outside);
  EXPECT_GE(measured, 0.9 * static_cast<double>(planned));
  // The plan itself: arena at least the arena's live peak; in-place reuse found something in this model.
  EXPECT_GE(mp.arena_bytes + mp.resident_bytes, mp.peak_live_bytes);
  EXPECT_GT(mp.inplace_saved_bytes, 0);
}

INSTANTIATE_TEST_SUITE_P(Precisions, MemoryPeak, ::testing::Values(DataType::kUndefined, DataType::kBFloat16),
                         [](const auto& info) {
                           return info.param == DataType::kUndefined ? std::string("fp32") : DataTypeName(info.param);
                         });
INSTANTIATE_TEST_SUITE_P(PrecisionsAndFuseModes, MemoryPeakFused,
                         ::testing::Combine(::testing::Values(DataType::kUndefined, DataType::kBFloat16),
                                            ::testing::Values(std::string("off"), std::string("lite"),
                                                              std::string("full"))),
                         [](const auto& info) {
                           const DataType t = std::get<0>(info.param);
                           return (t == DataType::kUndefined ? std::string("fp32") : DataTypeName(t)) + "_" +
                                  std::get<1>(info.param);
                         });

// Issue 5's budget point: --fuse=full under a budget 10% below its own unconstrained planned peak. Fusion alone
// cannot go below the saved activations; recomputing cheap saved values (passes/rematerialize.h) and the GEMM
// epilogues' dropped intermediates bring the plan within it. The measured peak follows that plan, and three
// training steps give the unfused step's numbers bit for bit (a recomputation runs the same kernel on the same
// inputs).
FusionReport FuseLm(LmStep& s, const std::map<std::string, Tensor>& feeds, const std::string& mode, int64_t budget) {
  std::map<std::string, TensorDesc> descs;
  std::map<std::string, const Tensor*> known;
  for (const auto& [name, t] : feeds) descs[name] = TensorDesc{t.dtype(), t.dims(), true};
  for (const Value* v : ValuesNeededAtPlanTime(*s.graph))
    if (feeds.count(v->name)) known[v->name] = &feeds.at(v->name);
  FuseOptions fo;
  fo.mode = ParseFuseMode(mode);
  fo.memory_budget = budget;
  return FuseForShapes(*s.graph, fo, descs, known);
}

TEST(MemoryBudget, FullUnderABudgetTenPercentBelowItsPeakStaysWithinIt) {
  const std::map<std::string, Tensor> feeds = Batch(64, 0);
  LmStep free_run = MakeLmStep(DataType::kUndefined);
  FuseLm(free_run, feeds, "full", 0);
  const int64_t unconstrained = Compile(*free_run.graph, feeds, true)->memory_plan().peak_live_bytes;
  LmStep off = MakeLmStep(DataType::kUndefined);
  EXPECT_LE(unconstrained, Compile(*off.graph, feeds, true)->memory_plan().peak_live_bytes);

  const int64_t budget = unconstrained * 9 / 10;
  LmStep s = MakeLmStep(DataType::kUndefined);
  const FusionReport r = FuseLm(s, feeds, "full", budget);
  EXPECT_FALSE(r.rematerialized.empty()) << FormatFusionReport(r);
  EXPECT_FALSE(r.budget_unreachable) << FormatFusionReport(r);
  std::unique_ptr<Plan> plan = Compile(*s.graph, feeds, true);
  const MemoryPlan& mp = plan->memory_plan();
  EXPECT_LE(mp.peak_live_bytes, budget) << FormatFusionReport(r);
  EXPECT_EQ(r.peak_after, mp.peak_live_bytes);
  EXPECT_LE(mp.resident_bytes + mp.arena_bytes, budget + budget / 50) << "the arena's best fit";

  // Three steps against the unfused step, bit for bit.
  std::unique_ptr<Plan> ref = Compile(*off.graph, feeds, true);
  for (int k = 0; k < 3; ++k) {
    const std::map<std::string, Tensor> f = Batch(64, k);
    if (k == 1 && alloc_counter::kActive) {  // the measured peak of a warm step
      const int64_t before = alloc_counter::live.load();
      alloc_counter::Reset();
      std::vector<Tensor> out = plan->Run(f, k);
      const int64_t measured =
          alloc_counter::peak.load() - before + (mp.resident_bytes - plan->output_bytes()) + mp.arena_bytes;
      EXPECT_LE(measured, mp.resident_bytes + mp.arena_bytes + plan->heap_bytes());
      EXPECT_GE(measured, 0.9 * static_cast<double>(mp.resident_bytes + mp.arena_bytes));
      std::vector<Tensor> want = ref->Run(f, k);
      CopyState(*s.graph, out);
      CopyState(*off.graph, want);
      EXPECT_EQ(out[0].GetDouble(0), want[0].GetDouble(0));
      continue;
    }
    std::vector<Tensor> got = plan->Run(f, k), want = ref->Run(f, k);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::memcmp(got[i].raw(), want[i].raw(), got[i].nbytes()), 0)
          << "step " << k << ": output " << s.graph->outputs[i]->name;
    CopyState(*s.graph, got);
    CopyState(*off.graph, want);
  }
}

// The next state written into the state's storage gives the trajectory of the Trainer's copy, bit for bit: two
// copies of the step (fresh from the model file, so the same initial weights), three steps each.
TEST_P(MemoryPeak, StateWrittenInPlaceIsBitIdenticalToTheCopy) {
  const DataType half = GetParam();
  LmStep a = MakeLmStep(half), b = MakeLmStep(half);
  const std::map<std::string, Tensor> first = Batch(16, 0);
  std::unique_ptr<Plan> pa = Compile(*a.graph, first, false), pb = Compile(*b.graph, first, true);
  EXPECT_TRUE(pa->outputs_in_state().empty());
  // Every parameter and moment of Adam is written in place (the step counter too).
  const std::vector<int>& in_state = pb->outputs_in_state();
  int params = 0;
  for (const auto& bind : b.graph->update_bindings) params += bind.state->initializer->dtype() == DataType::kFloat32;
  EXPECT_GE(static_cast<int>(in_state.size()), params);
  for (int k = 0; k < 3; ++k) {
    const std::map<std::string, Tensor> feeds = Batch(16, k);
    std::vector<Tensor> oa = pa->Run(feeds, k), ob = pb->Run(feeds, k);
    for (int i : in_state) {
      const Value* next = b.graph->outputs[static_cast<size_t>(i)];
      bool found = false;
      for (const auto& bind : b.graph->update_bindings)
        if (bind.next == next) {
          EXPECT_EQ(ob[static_cast<size_t>(i)].raw(), bind.state->initializer->raw()) << next->name;
          found = true;
        }
      EXPECT_TRUE(found) << next->name << " is no next state";
    }
    CopyState(*a.graph, oa);
    CopyState(*b.graph, ob);
    ASSERT_EQ(oa.size(), ob.size());
    for (size_t i = 0; i < oa.size(); ++i) {
      ASSERT_EQ(oa[i].nbytes(), ob[i].nbytes());
      EXPECT_EQ(std::memcmp(oa[i].raw(), ob[i].raw(), oa[i].nbytes()), 0)
          << "step " << k << ": output " << a.graph->outputs[i]->name << " differs";
    }
    for (size_t j = 0; j < a.graph->update_bindings.size(); ++j) {
      const Tensor& sa = *a.graph->update_bindings[j].state->initializer;
      const Tensor& sb = *b.graph->update_bindings[j].state->initializer;
      EXPECT_EQ(std::memcmp(sa.raw(), sb.raw(), sa.nbytes()), 0)
          << "step " << k << ": state " << a.graph->update_bindings[j].state->name;
    }
  }
}

Value* In(Graph& g, const std::string& name, DataType t, std::vector<Dim> dims) {
  Value* v = g.AddValue(name);
  v->dtype = t;
  v->shape = Shape(std::move(dims));
  g.inputs.push_back(v);
  return v;
}

Value* Op(Graph& g, const std::string& op, std::vector<Value*> ins) {
  return g.AddNode(op, ins, {g.AddValue(g.UniqueName(op))}, g.UniqueName("n_" + op))->outputs[0];
}

// a = Relu(x), b = Exp(a), c = Neg(a), d = Mul(b, c), z = MatMul(Cast(d, bf16), w): Neg (a's last reader) and Mul
// run in place, and the bf16 MatMul declares a workspace (oneDNN's scratchpad; on a CPU without bf16 GEMM also
// the f32 copies of its operands). Exp and Neg may run side by side: Neg writes into a's memory only after Exp has
// read it (the dependency the plan adds), so every run under TBB equals the reference.
TEST(MemoryPlanRun, InPlaceAndWorkspaceKeepConcurrentRunsExact) {
  Graph g;
  g.opset_imports[""] = 17;
  const int64_t m = 512, k = 64, n = 32;
  Value* x = In(g, "x", DataType::kFloat32, {Dim(m), Dim(k)});
  Value* w = In(g, "w", DataType::kBFloat16, {Dim(k), Dim(n)});
  Value* a = Op(g, "Relu", {x});
  Value* b = Op(g, "Exp", {a});
  Value* c = Op(g, "Neg", {a});
  Value* d = Op(g, "Mul", {b, c});
  Node* cast = g.AddNode("Cast", {d}, {g.AddValue("dh")}, "cast");
  cast->attrs["to"] = Attribute::Int(static_cast<int64_t>(DataType::kBFloat16));
  Value* z = Op(g, "MatMul", {cast->outputs[0], w});
  g.outputs.push_back(z);
  const Tensor xt = test::RandomTensor(DataType::kFloat32, {m, k}, -2, 2);
  const Tensor wt = test::RandomTensor(DataType::kBFloat16, {k, n});
  const std::map<std::string, Tensor> feeds = {{"x", xt}, {"w", wt}};
  std::unique_ptr<Plan> plan = Compile(g, feeds, false);
  const MemoryPlan& mp = plan->memory_plan();
  EXPECT_GT(mp.inplace_saved_bytes, 0);
  int shared = 0;
  for (const auto& v : plan->buffer_views()) shared += v.shares >= 0;
  EXPECT_GE(shared, 2) << "Neg into a, Mul into b or c";
  const int matmul = plan->kernel_count() - 1;
  EXPECT_EQ(plan->step_views()[static_cast<size_t>(matmul)].node->op_type, "MatMul");
  EXPECT_GT(plan->workspace_bytes(matmul), 0);
  EXPECT_GE(mp.workspace_offsets[static_cast<size_t>(matmul)], 0);
  EXPECT_LE(mp.peak_live_bytes, mp.resident_bytes + mp.arena_bytes);

  // The reference in double from the same rounded operands: d rounded to bf16 as the Cast does, from the Exp kernel's
  // own float exp (math::Exp): with std::exp a one-ulp difference could move a d across a bf16 rounding boundary,
  // and a row whose products cancel then missed the tolerance (about 1 run in 60).
  std::vector<double> dh(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m * k; ++i) {
    const double r = std::max(0.0, static_cast<double>(xt.data<float>()[i]));
    const float df = math::Exp(static_cast<float>(r)) * static_cast<float>(-r);
    dh[static_cast<size_t>(i)] = static_cast<double>(static_cast<float>(bfloat16(df)));
  }
  Tensor ref(DataType::kFloat32, {m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < k; ++q)
        acc += dh[static_cast<size_t>(i * k + q)] *
               static_cast<double>(static_cast<float>(wt.data<bfloat16>()[q * n + j]));
      ref.data<float>()[i * n + j] = static_cast<float>(acc);
    }
  for (int run = 0; run < 20; ++run) {
    std::vector<Tensor> out = plan->Run(feeds, static_cast<uint64_t>(run));
    ASSERT_EQ(out.size(), 1u);
    const Tensor got = out[0].CastTo(DataType::kFloat32);
    double worst = 0;
    for (int64_t i = 0; i < m * n; ++i) {
      const double e = ref.data<float>()[i], v = got.data<float>()[i];
      worst = std::max(worst, std::fabs(v - e) / (std::fabs(e) + 0.05));
    }
    // bf16 output: 8 bits of mantissa, one rounding of the f32 result (a lost dependency gives garbage instead).
    ASSERT_LT(worst, 1.5e-2) << "run " << run;
  }
}

}  // namespace
}  // namespace ot
