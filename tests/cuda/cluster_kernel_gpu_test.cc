// Generated cluster kernels run on the GPU against the CPU interpreter (cpu_ops/fused_elementwise.h) on fresh
// seeded random inputs: every op per dtype (broadcast inputs), the row programs (softmax, layer norm, min, a
// three-phase reduction; short rows and rows longer than a block), and an in-place update (output 0 in input 0's
// memory). Label `gpu` (tests named *Gpu*); skipped without a device. The PTX is loaded with the CUDA runtime's
// library API (cudaLibraryLoadData), so this binary needs no libcuda to start on machines without a driver.
//
// Tolerance, relative to max(1, |cpu|): exp/erf/tanh/sigmoid/gelu are the same float operations on both sides
// (--fmad=false), log/sqrt/pow come from different libraries (an ulp or two) and row sums add in another order
// (double), so f32 gets 1e-5; a half value may round the other way after a one-ulp difference: 2^-10 for f16,
// 2^-7 for bf16. NaN must meet NaN; bool is exact.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu_ops/fused_elementwise.h"
#include "cuda_ops/cluster_codegen.h"
#include "cuda_ops/device_info.h"
#include "cuda_ops/nvrtc_compile.h"
#include "kernel_common/half.h"
#include "tests/cuda/program_builder.h"

namespace ot {
namespace {

using cluster::DType;
using cluster::Instr;
using cluster::Op;
using cluster::Program;

#define CUDA_OK(expr)                                                      \
  do {                                                                     \
    const cudaError_t e_ = (expr);                                         \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_); \
  } while (0)

size_t SizeOf(DType t) { return t == DType::kF32 ? 4 : t == DType::kBool ? 1 : 2; }

float ToFloat(DType t, const uint8_t* p) {
  switch (t) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfBitsToFloat(h);
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return Bf16BitsToFloat(h);
    }
    case DType::kBool:
      return *p != 0 ? 1.f : 0.f;
  }
  return 0;
}

std::vector<uint8_t> Random(DType t, int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<uint8_t> b(static_cast<size_t>(n) * SizeOf(t));
  for (int64_t i = 0; i < n; ++i) {
    const float v = u(rng);
    uint8_t* p = b.data() + i * SizeOf(t);
    if (t == DType::kF32)
      std::memcpy(p, &v, 4);
    else if (t == DType::kBool)
      *p = v > 0.f;
    else {
      const uint16_t h = t == DType::kF16 ? FloatToHalfBits(v) : FloatToBf16Bits(v);
      std::memcpy(p, &h, 2);
    }
  }
  return b;
}

int64_t Numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

struct Case {
  Program p;
  std::vector<DType> types;
  std::vector<int64_t> domain;
  std::vector<std::vector<int64_t>> dims;
  bool inplace = false;  // output 0 written over input 0 (same dtype, D's elements)
};

// Runs the case on the CPU interpreter and on the GPU from the same inputs and compares every output element.
void Compare(const Case& c, const std::string& name) {
  SCOPED_TRACE(name);
  std::mt19937 rng(1234);
  std::vector<std::vector<uint8_t>> inputs;
  for (int k = 0; k < c.p.num_inputs; ++k) inputs.push_back(Random(c.types[k], Numel(c.dims[k]), rng));
  // CPU
  cpu::FusedKernel cpu(c.p, c.domain, c.dims, c.types, 1);
  std::vector<std::vector<uint8_t>> want;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  for (auto& b : inputs) in_ptrs.push_back(b.data());
  std::vector<int64_t> out_n;
  for (int32_t o : c.p.outputs) {
    out_n.push_back(c.p.code[o].row ? cpu.rows() : cpu.numel());
    want.emplace_back(static_cast<size_t>(out_n.back()) * SizeOf(c.p.code[o].dtype));
    out_ptrs.push_back(want.back().data());
  }
  std::unique_ptr<void, void (*)(void*)> ws(std::aligned_alloc(64, (cpu.workspace_bytes() + 64) / 64 * 64), std::free);
  cpu.Run(in_ptrs.data(), out_ptrs.data(), ws.get());
  // GPU
  cuda::ClusterKernelSpec spec;
  spec.input_types = c.types;
  const cuda::ClusterKernel k = cuda::GenerateClusterKernel(c.p, name, spec);
  const std::string ptx = cuda::CompileToPtx(k.source, cuda::DefaultArch(), name + ".cu");
  cudaLibrary_t lib = nullptr;
  CUDA_OK(cudaLibraryLoadData(&lib, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t fn = nullptr;
  CUDA_OK(cudaLibraryGetKernel(&fn, lib, name.c_str()));
  std::vector<void*> dev;  // inputs then outputs
  for (auto& b : inputs) {
    void* d = nullptr;
    CUDA_OK(cudaMalloc(&d, b.size() + 1));
    CUDA_OK(cudaMemcpy(d, b.data(), b.size(), cudaMemcpyHostToDevice));
    dev.push_back(d);
  }
  for (size_t j = 0; j < want.size(); ++j) {
    void* d = nullptr;
    if (c.inplace && j == 0) {
      d = dev[0];
    } else {
      CUDA_OK(cudaMalloc(&d, want[j].size() + 1));
      CUDA_OK(cudaMemset(d, 0xff, want[j].size() + 1));
    }
    dev.push_back(d);
  }
  cuda::ClusterArgs args = cuda::MakeClusterArgs(c.p, c.domain, c.dims);
  ASSERT_EQ(args.words.size() * 8, k.args_bytes);
  std::vector<void*> params{args.words.data()};
  for (void*& d : dev) params.push_back(&d);
  const cuda::ClusterLaunch l = k.Launch(args.numel, args.rows, args.row_len);
  if (l.grid > 0) {
    CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(static_cast<unsigned>(l.grid)),
                             dim3(static_cast<unsigned>(l.block)), params.data(), static_cast<size_t>(l.shared_bytes),
                             nullptr));
  }
  CUDA_OK(cudaDeviceSynchronize());
  for (size_t j = 0; j < want.size(); ++j) {
    const DType t = c.p.code[c.p.outputs[j]].dtype;
    std::vector<uint8_t> got(want[j].size());
    CUDA_OK(cudaMemcpy(got.data(), dev[inputs.size() + j], got.size(), cudaMemcpyDeviceToHost));
    const double tol = t == DType::kF32 ? 1e-5 : t == DType::kF16 ? 1.0 / 1024 : t == DType::kBF16 ? 1.0 / 128 : 0;
    int bad = 0;
    for (int64_t i = 0; i < out_n[j] && bad < 5; ++i) {
      const float g = ToFloat(t, got.data() + i * SizeOf(t)), w = ToFloat(t, want[j].data() + i * SizeOf(t));
      const bool same = (std::isnan(g) && std::isnan(w)) || g == w ||
                        std::fabs(static_cast<double>(g) - w) <= tol * std::max(1.0, std::fabs(static_cast<double>(w)));
      if (!same) {
        ++bad;
        ADD_FAILURE() << "output " << j << " (" << cluster::DTypeName(t) << ") element " << i << ": gpu " << g
                      << ", cpu " << w;
      }
    }
  }
  for (size_t i = 0; i < dev.size(); ++i)
    if (!(c.inplace && i == inputs.size())) cudaFree(dev[i]);
  cudaLibraryUnload(lib);
}

using B = test::ProgramBuilder;  // tests/cuda/program_builder.h

class ClusterKernelGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(ClusterKernelGpu, EveryOpPerDtypeMatchesTheInterpreter) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kBool}) {
    B b;
    b.p.num_inputs = 3;
    const int32_t x = b.Add(Op::kInput, t, 0), y = b.Add(Op::kInput, t, 1), z = b.Add(Op::kInput, t, 2);
    for (int o = static_cast<int>(Op::kNeg); o <= static_cast<int>(Op::kWhere); ++o) {
      const Op op = static_cast<Op>(o);
      const float imm = op == Op::kLeakyRelu ? 0.01f : (op == Op::kGelu || op == Op::kGeluGrad) ? 1.f : 0.f;
      const int ar = cluster::Arity(op);
      b.p.outputs.push_back(ar == 1   ? b.Add(op, t, x, -1, -1, imm)
                            : ar == 2 ? b.Add(op, t, x, y, -1, imm)
                                      : b.Add(op, t, z, x, y));
    }
    b.p.outputs.push_back(b.Add(Op::kGelu, t, x));  // the erf forms
    b.p.outputs.push_back(b.Add(Op::kGeluGrad, t, x, y));
    Case c{b.p, {t, t, t}, {3, 5, 67}, {{3, 5, 67}, {5, 67}, {3, 1, 67}}};
    Compare(c, std::string("every_op_") + cluster::DTypeName(t));
  }
}

TEST_F(ClusterKernelGpu, RowProgramsMatchTheInterpreter) {
  for (DType t : {DType::kF32, DType::kBF16}) {
    // softmax of x * s + bias over the last axis with a row scale s, its row max and sum as outputs, the sum of
    // the softmax (a third phase), and a layer norm.
    B b;
    b.p.num_inputs = 3;
    b.p.reduce_axes = 1;
    const int32_t x = b.Add(Op::kInput, t, 0), bias = b.Add(Op::kInput, t, 1);
    const int32_t s = b.Add(Op::kInput, DType::kF32, 2, -1, -1, 0.f, true);
    const int32_t xb = b.Add(Op::kAdd, t, b.Add(Op::kMul, t, x, b.Add(Op::kCast, t, s, -1, -1, 0.f, true)), bias);
    const int32_t mx = b.Add(Op::kReduceMax, DType::kF32, xb, -1, -1, 0.f, true);
    const int32_t e = b.Add(Op::kExp, DType::kF32, b.Add(Op::kSub, DType::kF32, xb, mx));
    const int32_t sum = b.Add(Op::kReduceSum, DType::kF32, e, -1, -1, 0.f, true);
    const int32_t sm = b.Add(Op::kCast, t, b.Add(Op::kDiv, DType::kF32, e, sum));
    const int32_t smsum = b.Add(Op::kReduceSum, DType::kF32, sm, -1, -1, 0.f, true);
    const int32_t mean = b.Add(Op::kReduceMean, DType::kF32, x, -1, -1, 0.f, true);
    const int32_t d = b.Add(Op::kSub, DType::kF32, x, mean);
    const int32_t var = b.Add(Op::kReduceMean, DType::kF32, b.Add(Op::kMul, DType::kF32, d, d), -1, -1, 0.f, true);
    const int32_t eps = b.Add(Op::kConst, DType::kF32, -1, -1, -1, 1e-5f, true);
    const int32_t rstd =
        b.Add(Op::kReciprocal, DType::kF32,
              b.Add(Op::kSqrt, DType::kF32, b.Add(Op::kAdd, DType::kF32, var, eps, -1, 0.f, true), -1, -1, 0.f, true),
              -1, -1, 0.f, true);
    const int32_t ln = b.Add(Op::kCast, t, b.Add(Op::kMul, DType::kF32, d, rstd));
    const int32_t mn = b.Add(Op::kReduceMin, t, ln, -1, -1, 0.f, true);
    b.p.outputs = {sm, ln, mx, sum, smsum, mn};
    for (int64_t len : {1, 7, 100, 1000}) {
      Case c{b.p, {t, t, DType::kF32}, {6, len}, {{6, len}, {len}, {6, 1}}};
      Compare(c, std::string("rows_") + cluster::DTypeName(t) + "_" + std::to_string(len));
    }
  }
}

TEST_F(ClusterKernelGpu, InPlaceUpdateMatchesTheInterpreter) {
  B b;
  b.p.num_inputs = 2;
  const int32_t w = b.Add(Op::kInput, DType::kF32, 0), g = b.Add(Op::kInput, DType::kF32, 1);
  const int32_t lr = b.Add(Op::kConst, DType::kF32, -1, -1, -1, 0.01f);
  const int32_t w2 = b.Add(Op::kSub, DType::kF32, w, b.Add(Op::kMul, DType::kF32, g, lr));
  b.p.outputs = {w2, b.Add(Op::kCast, DType::kBF16, w2)};
  Case c{b.p, {DType::kF32, DType::kF32}, {1000, 37}, {{1000, 37}, {1000, 37}}, true};
  Compare(c, "inplace_update");
}

}  // namespace
}  // namespace ot
