// The fused-cluster CUDA code generator (cuda_ops/cluster_codegen.h) and its NVRTC compile (cuda_ops/nvrtc_compile.h),
// on machines without a GPU: every op, dtype and row shape, and every cluster the example models' training steps
// make (--fuse=lite/full, fp32/bf16/fp16), must compile to PTX; a broken source fails with NVRTC's line-numbered
// log; the PTX disk cache is read back. The launch arguments (strides, coalescing) are checked on the host.
// Tests named *Gpu* (label `gpu`) run kernels and compare them with the CPU interpreter; they skip without a GPU.
#include "cuda_ops/cluster_codegen.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cuda_ops/device_info.h"
#include "cuda_ops/nvrtc_compile.h"
#include "kernel_common/cluster_program.h"
#include "onnx_import/model_io.h"
#include "passes/cluster_program_builder.h"
#include "tests/cuda/program_builder.h"
#include "tests/executor/example_data.h"
#include "training/data_loader.h"
#include "training/trainer.h"

namespace ot {
namespace {

using cluster::DType;
using cluster::Instr;
using cluster::Op;
using cluster::Program;
namespace fs = std::filesystem;

// Every test process gets a cache directory of its own (removed at exit), so tests neither read a stale PTX of
// another build nor write into the user's cache, and compile times are NVRTC's.
class CacheDirEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    char tmpl[] = "/tmp/ot_nvrtc_cache_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    setenv("ONNXTRAIN_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};
::testing::Environment* const kCacheEnv = ::testing::AddGlobalTestEnvironment(new CacheDirEnv);

// Compiles and checks the PTX names the entry; returns NVRTC's milliseconds.
double ExpectCompiles(const cuda::ClusterKernel& k, const std::string& arch) {
  cuda::NvrtcCompileInfo info;
  std::string ptx;
  try {
    ptx = cuda::CompileToPtx(k.source, arch, k.name + ".cu", &info);
  } catch (const std::exception& e) {
    ADD_FAILURE() << k.name << " for " << arch << ": " << e.what() << "\n--- source ---\n" << k.source;
    return 0;
  }
  EXPECT_NE(ptx.find(".entry " + k.name), std::string::npos) << k.name << " " << arch;
  EXPECT_NE(ptx.find(".target sm_" + arch.substr(8)), std::string::npos) << arch;
  return info.compile_ms;
}

// compute_90 (Hopper, the GPUs this backend targets) and the oldest arch this NVRTC supports: compute_70 where it
// still exists (CUDA 12), compute_75 on CUDA 13, which dropped Volta.
std::vector<std::string> Archs() {
  const std::vector<int> a = cuda::NvrtcSupportedArchs();
  const std::string oldest = "compute_" + std::to_string(a.empty() ? 70 : std::max(a.front(), 70));
  return {"compute_90", oldest};
}

using Builder = test::ProgramBuilder;  // tests/cuda/program_builder.h

const DType kTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kBool};

// Every elementwise op over inputs of dtype t (three inputs, the third broadcast), each result an output, and a
// Cast of the first input to every dtype.
Program EveryOp(DType t) {
  Builder b;
  b.p.num_inputs = 3;
  const int32_t x = b.Input(0, t), y = b.Input(1, t), z = b.Input(2, t);
  const int32_t c = b.Add(Op::kConst, t, -1, -1, -1, 0.5f);
  for (int o = static_cast<int>(Op::kNeg); o <= static_cast<int>(Op::kWhere); ++o) {
    const Op op = static_cast<Op>(o);
    float imm = 0.f;
    if (op == Op::kLeakyRelu) imm = 0.01f;
    for (int form = 0; form < ((op == Op::kGelu || op == Op::kGeluGrad) ? 2 : 1); ++form) {
      if (op == Op::kGelu || op == Op::kGeluGrad) imm = static_cast<float>(form);
      const int ar = cluster::Arity(op);
      const int32_t r = ar == 1   ? b.Add(op, t, x, -1, -1, imm)
                        : ar == 2 ? b.Add(op, t, x, op == Op::kPow ? c : y, -1, imm)
                                  : b.Add(op, t, z, x, y);
      b.Out(r);
    }
  }
  for (DType u : kTypes) b.Out(b.Add(Op::kCast, u, x));
  return b.p;
}

// Row reductions of every kind over the last two axes, with a row input, row and full outputs, and values that
// need earlier reductions: softmax (max -> sub -> exp -> sum -> div), a layer norm (mean, centred square mean,
// rsqrt), a min, and a reduction of a value that needs two phases.
Program Rows(DType t) {
  Builder b;
  b.p.num_inputs = 3;
  b.p.reduce_axes = 2;
  const int32_t x = b.Input(0, t), bias = b.Input(1, t), scale = b.Input(2, DType::kF32, true);
  const int32_t xs = b.Add(Op::kMul, t, x, b.Add(Op::kCast, t, scale, -1, -1, 0.f, true));
  const int32_t xb = b.Add(Op::kAdd, t, xs, bias);
  const int32_t mx = b.Add(Op::kReduceMax, DType::kF32, xb, -1, -1, 0.f, true);
  const int32_t xf = b.Add(Op::kCast, DType::kF32, xb);
  const int32_t e = b.Add(Op::kExp, DType::kF32, b.Add(Op::kSub, DType::kF32, xf, mx));
  const int32_t sum = b.Add(Op::kReduceSum, DType::kF32, e, -1, -1, 0.f, true);
  const int32_t sm = b.Add(Op::kDiv, DType::kF32, e, sum);
  const int32_t mean = b.Add(Op::kReduceMean, DType::kF32, xf, -1, -1, 0.f, true);
  const int32_t d = b.Add(Op::kSub, DType::kF32, xf, mean);
  const int32_t var = b.Add(Op::kReduceMean, DType::kF32, b.Add(Op::kMul, DType::kF32, d, d), -1, -1, 0.f, true);
  const int32_t eps = b.Add(Op::kConst, DType::kF32, -1, -1, -1, 1e-5f, true);
  const int32_t rstd =
      b.Add(Op::kReciprocal, DType::kF32,
            b.Add(Op::kSqrt, DType::kF32, b.Add(Op::kAdd, DType::kF32, var, eps, -1, 0.f, true), -1, -1, 0.f, true), -1,
            -1, 0.f, true);
  const int32_t ln = b.Add(Op::kCast, t, b.Add(Op::kMul, DType::kF32, d, rstd));
  const int32_t mn = b.Add(Op::kReduceMin, t, b.Add(Op::kMul, t, ln, x), -1, -1, 0.f, true);
  const int32_t smsum = b.Add(Op::kReduceSum, t, b.Add(Op::kCast, t, sm), -1, -1, 0.f, true);  // phase 2
  b.Out(b.Add(Op::kCast, t, sm));
  b.Out(ln);
  b.Out(mx);
  b.Out(mn);
  b.Out(smsum);
  b.Out(b.Add(Op::kGreater, DType::kBool, xb, b.Add(Op::kCast, t, mean, -1, -1, 0.f, true)));
  return b.p;
}

TEST(ClusterCodegen, EveryOpAndDtypeCompilesForCompute90AndTheOldestArch) {
  for (DType t : kTypes) {
    const Program p = EveryOp(t);
    const cuda::ClusterKernel k = cuda::GenerateClusterKernel(p, std::string("every_op_") + cluster::DTypeName(t));
    EXPECT_FALSE(k.rows);
    EXPECT_EQ(k.output_types.size(), p.outputs.size());
    for (const std::string& arch : Archs()) {
      const double ms = ExpectCompiles(k, arch);
      std::printf("  %-22s %s  %7.1f ms  (%zu instructions)\n", k.name.c_str(), arch.c_str(), ms, p.code.size());
    }
  }
}

TEST(ClusterCodegen, RowReductionsOfEveryKindCompile) {
  for (DType t : kTypes) {
    if (t == DType::kBool) continue;  // Rows() does arithmetic in t
    const Program p = Rows(t);
    const cuda::ClusterKernel k = cuda::GenerateClusterKernel(p, std::string("rows_") + cluster::DTypeName(t));
    EXPECT_TRUE(k.rows);
    EXPECT_EQ(k.num_reduction_phases, 3);  // max / mean -> sum, var -> min, sum of softmax
    for (const std::string& arch : Archs()) {
      const double ms = ExpectCompiles(k, arch);
      std::printf("  %-22s %s  %7.1f ms\n", k.name.c_str(), arch.c_str(), ms);
    }
  }
}

// A multi-output in-place update (the optimizer-like shape: outputs of an input's dtype over full inputs), a
// program whose only outputs are rows, a row program whose needed values hold no row (flat launch), and inputs
// stored in a dtype other than their load's.
TEST(ClusterCodegen, MultiOutputInPlaceRowOnlyAndConvertingLoadsCompile) {
  std::vector<std::pair<std::string, Program>> progs;
  {
    Builder b;
    b.p.num_inputs = 3;
    const int32_t w = b.Input(0, DType::kF32), g = b.Input(1, DType::kF32), m = b.Input(2, DType::kF32);
    const int32_t beta = b.Add(Op::kConst, DType::kF32, -1, -1, -1, 0.9f);
    const int32_t lr = b.Add(Op::kConst, DType::kF32, -1, -1, -1, 0.01f);
    const int32_t m2 = b.Add(Op::kAdd, DType::kF32, b.Add(Op::kMul, DType::kF32, m, beta), g);
    const int32_t w2 = b.Add(Op::kSub, DType::kF32, w, b.Add(Op::kMul, DType::kF32, m2, lr));
    b.Out(w2);
    b.Out(m2);
    b.Out(b.Add(Op::kCast, DType::kF16, w2));
    progs.emplace_back("inplace_update", b.p);
  }
  {
    Builder b;
    b.p.num_inputs = 1;
    b.p.reduce_axes = 1;
    const int32_t x = b.Input(0, DType::kBF16);
    b.Out(b.Add(Op::kReduceSum, DType::kF32, x, -1, -1, 0.f, true));
    b.Out(b.Add(Op::kReduceMax, DType::kBF16, x, -1, -1, 0.f, true));
    progs.emplace_back("row_outputs_only", b.p);
  }
  {
    Builder b;
    b.p.num_inputs = 1;
    b.p.reduce_axes = 1;
    const int32_t x = b.Input(0, DType::kF32);
    b.Add(Op::kReduceSum, DType::kF32, x, -1, -1, 0.f, true);  // dead
    b.Out(b.Add(Op::kTanh, DType::kF32, x));
    progs.emplace_back("dead_row", b.p);
  }
  for (auto& [name, p] : progs) {
    const cuda::ClusterKernel k = cuda::GenerateClusterKernel(p, name);
    EXPECT_EQ(k.rows, name == "row_outputs_only") << name;
    for (const std::string& arch : Archs()) ExpectCompiles(k, arch);
  }
  // Loads that convert: f16 storage read as f32 and bf16, bool storage read as f32, f32 storage read as bool.
  Builder b;
  b.p.num_inputs = 3;
  const int32_t a = b.Input(0, DType::kF32), a16 = b.Input(0, DType::kBF16), c = b.Input(1, DType::kF32);
  const int32_t m = b.Input(2, DType::kBool);
  b.Out(b.Add(Op::kWhere, DType::kF32, m, b.Add(Op::kAdd, DType::kF32, a, a16), c));
  cuda::ClusterKernelSpec spec;
  spec.input_types = {DType::kF16, DType::kBool, DType::kF32};
  const cuda::ClusterKernel k = cuda::GenerateClusterKernel(b.p, "converting_loads", spec);
  EXPECT_NE(k.source.find("const uint16_t* in0"), std::string::npos);
  EXPECT_NE(k.source.find("const uint8_t* in1"), std::string::npos);
  for (const std::string& arch : Archs()) ExpectCompiles(k, arch);
}

// The fusion pass allows 64 operands (passes/cluster_fusion.h): 63 inputs and an output make a parameter block of
// 4,640 bytes, above the 4 KiB of old drivers; CUDA 12.1+ takes 32,764 bytes on compute_70 and newer.
TEST(ClusterCodegen, SixtyThreeInputsCompile) {
  Builder b;
  b.p.num_inputs = 63;
  int32_t acc = b.Input(0, DType::kF32);
  for (int k = 1; k < 63; ++k) acc = b.Add(Op::kAdd, DType::kF32, acc, b.Input(k, k % 2 ? DType::kBF16 : DType::kF32));
  b.Out(acc);
  const cuda::ClusterKernel k = cuda::GenerateClusterKernel(b.p, "sixty_three_inputs");
  EXPECT_EQ(k.args_bytes, 8u * (4 + 8 * 64));
  for (const std::string& arch : Archs()) ExpectCompiles(k, arch);
}

// Negative twins of the generator: an invalid program, a name that is no identifier, a spec of the wrong length.
TEST(ClusterCodegen, RejectsInvalidProgramsNamesAndSpecs) {
  Program bad;
  bad.num_inputs = 1;
  EXPECT_THROW(cuda::GenerateClusterSource(bad, "k"), std::invalid_argument);  // no outputs
  Builder b;
  b.p.num_inputs = 1;
  b.Out(b.Input(0, DType::kF32));
  EXPECT_THROW(cuda::GenerateClusterSource(b.p, "1k"), std::invalid_argument);
  EXPECT_THROW(cuda::GenerateClusterSource(b.p, "k-k"), std::invalid_argument);
  cuda::ClusterKernelSpec spec;
  spec.input_types = {DType::kF32, DType::kF32};
  EXPECT_THROW(cuda::GenerateClusterKernel(b.p, "k", spec), std::invalid_argument);
}

// ---- launch arguments ----

TEST(ClusterArgs, StridesBroadcastAndCoalescing) {
  Builder b;
  b.p.num_inputs = 2;
  const int32_t x = b.Input(0, DType::kF32), y = b.Input(1, DType::kF32);
  b.Out(b.Add(Op::kAdd, DType::kF32, x, y));
  // Same shapes: one axis of 24, stride 1 for both.
  cuda::ClusterArgs s = cuda::MakeClusterArgs(b.p, {2, 3, 4}, {{2, 3, 4}, {2, 3, 4}});
  EXPECT_EQ(s.numel, 24);
  EXPECT_EQ(s.words[3], 1);
  EXPECT_EQ(s.words[4], 24);
  const int kS = 4 + cuda::kClusterMaxRank;  // first stride word
  EXPECT_EQ(s.words[kS], 1);
  EXPECT_EQ(s.words[kS + cuda::kClusterMaxRank], 1);
  // A trailing bias [4] against [2,3,4]: axes (6, 4), the bias walks (0, 1).
  s = cuda::MakeClusterArgs(b.p, {2, 3, 4}, {{2, 3, 4}, {4}});
  ASSERT_EQ(s.words[3], 2);
  EXPECT_EQ(s.words[4], 6);
  EXPECT_EQ(s.words[5], 4);
  EXPECT_EQ(s.words[kS], 4);
  EXPECT_EQ(s.words[kS + 1], 1);
  EXPECT_EQ(s.words[kS + cuda::kClusterMaxRank], 0);
  EXPECT_EQ(s.words[kS + cuda::kClusterMaxRank + 1], 1);
  // A column [2,3,1]: (6, 4) with strides (1, 0); the args block has the kernel's size.
  s = cuda::MakeClusterArgs(b.p, {2, 3, 4}, {{2, 3, 4}, {2, 3, 1}});
  EXPECT_EQ(s.words[kS + cuda::kClusterMaxRank], 1);
  EXPECT_EQ(s.words[kS + cuda::kClusterMaxRank + 1], 0);
  EXPECT_EQ(s.words.size() * 8, cuda::GenerateClusterKernel(b.p, "k").args_bytes);
  // Negative twin: [3] does not broadcast to [2,3,4].
  EXPECT_THROW(cuda::MakeClusterArgs(b.p, {2, 3, 4}, {{2, 3, 4}, {3}}), std::invalid_argument);
  // More than 8 axes that cannot be merged.
  EXPECT_THROW(cuda::MakeClusterArgs(b.p, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
                                     {{2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, {2, 1, 2, 1, 2, 1, 2, 1, 2, 1}}),
               std::invalid_argument);
}

TEST(ClusterArgs, RowsAndLaunchShape) {
  const Program p = Rows(DType::kF32);
  // x [4,5,6,7], bias [6,7], a row input [4,5,1,1]: 20 rows of 42.
  const cuda::ClusterArgs s = cuda::MakeClusterArgs(p, {4, 5, 6, 7}, {{4, 5, 6, 7}, {6, 7}, {4, 5, 1, 1}});
  EXPECT_EQ(s.rows, 20);
  EXPECT_EQ(s.row_len, 42);
  // A row input must be 1 on the reduced axes.
  EXPECT_THROW(cuda::MakeClusterArgs(p, {4, 5, 6, 7}, {{4, 5, 6, 7}, {6, 7}, {4, 5, 6, 1}}), std::invalid_argument);
  // Empty rows: no element is visited but every row reads its row input, indexed by the row number (the strides
  // describe D with the reduced axes 1: six rows of stride 1), and the kernel says so.
  const cuda::ClusterArgs e = cuda::MakeClusterArgs(p, {2, 3, 0, 7}, {{2, 3, 0, 7}, {0, 7}, {2, 3, 1, 1}});
  EXPECT_EQ(e.rows, 6);
  EXPECT_EQ(e.row_len, 0);
  EXPECT_EQ(e.numel, 0);
  ASSERT_EQ(e.words[3], 1);
  EXPECT_EQ(e.words[4], 6);
  EXPECT_EQ(e.words[4 + cuda::kClusterMaxRank * 3], 1);  // input 2's stride
  const cuda::ClusterKernel k = cuda::GenerateClusterKernel(p, "rows");
  EXPECT_NE(k.source.find("a.row_len > 0 ? base : r"), std::string::npos);
  EXPECT_EQ(k.Launch(e.numel, e.rows, e.row_len).grid, 6);
  cuda::ClusterLaunch l = k.Launch(s.numel, s.rows, s.row_len);
  EXPECT_TRUE(l.rows);
  EXPECT_EQ(l.grid, 20);
  EXPECT_EQ(l.block, 64);  // whole warps covering a row of 42
  EXPECT_GT(l.shared_bytes, 0);
  l = k.Launch(1 << 24, 1 << 20, 16);
  EXPECT_EQ(l.grid, cuda::kClusterMaxGrid);
  EXPECT_EQ(l.block, 32);
  l = k.Launch(0, 0, 7);
  EXPECT_EQ(l.grid, 0);
  const cuda::ClusterKernel flat = cuda::GenerateClusterKernel(EveryOp(DType::kF32), "flat");
  l = flat.Launch(1000, 1000, 1);
  EXPECT_EQ(l.block, cuda::kClusterMaxThreads);
  EXPECT_EQ(l.grid, 4);
  EXPECT_EQ(l.shared_bytes, 0);
}

// ---- the example models' clusters ----

struct StepClusters {
  std::vector<std::pair<std::string, cuda::ClusterKernelSpec>> programs;  // text and input storage types
};

StepClusters FusedClusters(const std::string& dir, const std::string& mode, DataType half) {
  using namespace ot::examples;
  nlohmann::json ref = Reference(dir, "adam");
  TrainerOptions o = Options(ref, "adam");
  o.fuse.mode = ParseFuseMode(mode);
  o.amp.half = half;
  std::map<std::string, Tensor> arrays;
  if (dir == "digits_mlp") {
    for (NamedTensor& t : ReadNpz(kExamples + "digits_mlp/train.npz")) arrays[t.name] = t.tensor;
  } else {
    arrays = dir == "fashion_cnn" ? FashionHead(64) : TinyLmData();
  }
  const std::string path = kExamples + dir + "/model.onnx";
  Trainer trainer(LoadModel(path), o);
  DataLoader data(std::move(arrays), ref["batch"], false, 0, path);
  trainer.Step(data.Get(0, 0).arrays);  // fuses for the first batch's shapes
  StepClusters r;
  for (const auto& n : trainer.step_graph().nodes()) {
    if (n->op_type != "FusedElementwise") continue;
    cuda::ClusterKernelSpec spec;
    for (const Value* v : n->inputs) {
      cluster::DType t;
      EXPECT_TRUE(v && ToClusterType(v->dtype, &t)) << n->Describe();
      spec.input_types.push_back(t);
    }
    r.programs.emplace_back(n->attr_string("program", ""), spec);
  }
  return r;
}

TEST(ClusterCodegen, EveryClusterOfTheExampleModelsCompiles) {
  struct Amp {
    const char* name;
    DataType half;
  };
  const Amp amps[] = {{"fp32", DataType::kUndefined}, {"bf16", DataType::kBFloat16}, {"fp16", DataType::kFloat16}};
  std::map<std::string, std::string> seen;  // program text + input types -> where it was first found
  int compiled = 0, rows = 0;
  double total_ms = 0, max_ms = 0;
  for (const char* dir : {"digits_mlp", "fashion_cnn", "tiny_lm"}) {
    for (const char* mode : {"lite", "full"}) {
      for (const Amp& amp : amps) {
        const std::string where = std::string(dir) + " --fuse=" + mode + " " + amp.name;
        SCOPED_TRACE(where);
        const StepClusters c = FusedClusters(dir, mode, amp.half);
        // The transformer always has elementwise work to fuse (fusion_examples_test); the MLP and the CNN may not.
        if (std::string(dir) == "tiny_lm") {
          EXPECT_FALSE(c.programs.empty());
        }
        int fresh = 0;
        for (const auto& [text, spec] : c.programs) {
          std::string key = text;
          for (DType t : spec.input_types) key += std::string(" ") + cluster::DTypeName(t);
          if (!seen.emplace(key, where).second) continue;
          ++fresh;
          Program p;
          ASSERT_NO_THROW(p = cluster::ParseProgram(text)) << text;
          const cuda::ClusterKernel k = cuda::GenerateClusterKernel(p, "cluster_" + std::to_string(seen.size()), spec);
          const double ms = ExpectCompiles(k, "compute_90");
          std::printf("    %-11s %s, %2zu instructions, %d inputs, %zu outputs: %5.1f ms\n", k.name.c_str(),
                      k.rows ? "rows" : "flat", p.code.size(), p.num_inputs, p.outputs.size(), ms);
          rows += k.rows;
          total_ms += ms;
          max_ms = std::max(max_ms, ms);
          ++compiled;
        }
        std::printf("  %-34s %2zu clusters, %2d new programs\n", where.c_str(), c.programs.size(), fresh);
      }
    }
  }
  std::printf(
      "  %d distinct programs (%d with rows) compiled for compute_90: %.0f ms in all, %.1f ms mean, %.1f ms "
      "max\n",
      compiled, rows, total_ms, compiled ? total_ms / compiled : 0.0, max_ms);
  EXPECT_GT(compiled, 0);
}

// ---- NVRTC errors and the cache ----

TEST(NvrtcCompile, ABrokenSourceFailsWithNvrtcsLineNumberedLog) {
  const std::string src = "extern \"C\" __global__ void broken(float* x) {\n  x[0] = 1.f;\n  x[1] = undeclared_y;\n}\n";
  try {
    cuda::CompileToPtx(src, "compute_90", "broken.cu");
    FAIL() << "a source with an undeclared identifier compiled";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("broken.cu(3): error"), std::string::npos) << msg;
    EXPECT_NE(msg.find("undeclared_y"), std::string::npos) << msg;
    EXPECT_NE(msg.find("compute_90"), std::string::npos) << msg;
  }
  // Negative twin: the same source fixed compiles.
  const std::string fixed = "extern \"C\" __global__ void broken(float* x) {\n  x[0] = 1.f;\n  x[1] = 2.f;\n}\n";
  EXPECT_NE(cuda::CompileToPtx(fixed, "compute_90", "broken.cu").find(".entry broken"), std::string::npos);
  EXPECT_THROW(cuda::CompileToPtx(fixed, "compute_1", "broken.cu"), std::runtime_error);  // no such arch
}

TEST(NvrtcCompile, DiskCacheIsWrittenAndReadBack) {
  // A source no other test compiles (the pid and time in a comment), so the first compile is NVRTC's.
  const std::string src = "// cache test " + std::to_string(getpid()) + " " +
                          std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) +
                          "\nextern \"C\" __global__ void cached(float* x) { x[threadIdx.x] *= 2.f; }\n";
  cuda::NvrtcCompileInfo first, second, third;
  const std::string ptx = cuda::CompileToPtx(src, "compute_90", "cached.cu", &first);
  EXPECT_FALSE(first.memory_hit || first.disk_hit);
  EXPECT_GT(first.compile_ms, 0);
  ASSERT_FALSE(first.cache_file.empty());
  EXPECT_EQ(first.cache_file.rfind(cuda::PtxCacheDir(), 0), 0u) << first.cache_file;
  EXPECT_TRUE(fs::exists(first.cache_file));
  // A fresh in-memory cache (as in a new process): the file is read, the PTX is the same.
  cuda::ClearPtxMemoryCache();
  EXPECT_EQ(cuda::CompileToPtx(src, "compute_90", "cached.cu", &second), ptx);
  EXPECT_TRUE(second.disk_hit);
  EXPECT_EQ(second.compile_ms, 0);
  EXPECT_EQ(cuda::CompileToPtx(src, "compute_90", "cached.cu", &third), ptx);
  EXPECT_TRUE(third.memory_hit);
  // Another arch is another entry.
  cuda::NvrtcCompileInfo other;
  cuda::CompileToPtx(src, Archs()[1], "cached.cu", &other);
  EXPECT_FALSE(other.memory_hit || other.disk_hit);
  EXPECT_NE(other.cache_file, first.cache_file);
}

TEST(NvrtcCompile, AnUnwritableCacheIsNotAnError) {
  const std::string saved = cuda::PtxCacheDir();
  setenv("ONNXTRAIN_CACHE_DIR", "/proc/onnx-train-cannot-be-made", 1);
  cuda::ClearPtxMemoryCache();
  cuda::NvrtcCompileInfo info;
  std::string ptx;
  EXPECT_NO_THROW(ptx = cuda::CompileToPtx("extern \"C\" __global__ void nowrite(int* p) { *p = 7; }\n", "compute_90",
                                           "nowrite.cu", &info));
  EXPECT_NE(ptx.find(".entry nowrite"), std::string::npos);
  EXPECT_FALSE(fs::exists(info.cache_file));
  setenv("ONNXTRAIN_CACHE_DIR", saved.c_str(), 1);
}

// compute_70 compiles where NVRTC still has it; where it does not (CUDA 13) the error says which arch.
TEST(NvrtcCompile, Compute70CompilesOrIsRejectedByName) {
  const cuda::ClusterKernel k = cuda::GenerateClusterKernel(Rows(DType::kF16), "rows_for_70");
  const std::vector<int> a = cuda::NvrtcSupportedArchs();
  if (std::find(a.begin(), a.end(), 70) != a.end()) {
    ExpectCompiles(k, "compute_70");
    return;
  }
  try {
    cuda::CompileToPtx(k.source, "compute_70", "rows_for_70.cu");
    FAIL() << "compute_70 is not in NVRTC's list but compiled";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("compute_70"), std::string::npos) << e.what();
  }
}

TEST(NvrtcCompile, DefaultArchWithoutADeviceIsCompute90) {
  const std::string arch = cuda::DefaultArch();
  if (cuda::DeviceCount() == 0) {
    EXPECT_EQ(arch, "compute_90");
  }
  EXPECT_EQ(arch.rfind("compute_", 0), 0u);
  EXPECT_FALSE(cuda::NvrtcVersion().empty());
}

}  // namespace
}  // namespace ot
