// CPU kernels of the fused linear-algebra ops (graph/ops/internal_fused.cc):
//   MatMulBias(A [..., M, K], B [K, N] (or [N, K] with trans_b), bias [N]) {activation, trans_b} -> Y [..., N]
// One GEMM over the M' = prod(A's leading dims) rows (B is shared, so the batch folds into M, as MatMul's kernel
// does): the bias is first written into every row of Y, then oneDNN's matmul accumulates A B onto it (its sum
// post-op, MatMulSpec::accumulate -- the same path as Gemm's C in kernels/linalg.cc), so Y is written by the kernel
// and read back once by the GEMM, never by a separate Add. With activation = relu the negative entries are zeroed
// in one more pass over Y (NaN stays NaN, as Relu's max(0, x) with NaN propagation).
// f32/f16/bf16 run through oneDNN (exclusive unless in row blocks on TBB's threads; a half type without a native
// oneDNN implementation is converted to f32 inside DnnlMatMul); float64 uses NaiveMatMul (the gradient checks).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>

#include "cpu_ops/matmul.h"
#include "executor/kernel_registry.h"
#include "graph/graph.h"
#include "graph/tensor.h"
#include "kernel_common/half.h"
#include "kernel_common/vec_math.h"

namespace ot {

void RegisterFusedLinalgKernels(KernelRegistry& r);

// MatMulBias's operands as one GEMM over the M' = prod(A's leading dims) rows; B [K, N], or [N, K] with trans_b
// (shared with the GPU kernel).
cpu::MatMulSpec MatMulBiasSpec(const KernelContext& ctx) {
  const auto& a = ctx.in(0).dims;
  const auto& b = ctx.in(1).dims;
  const auto& bias = ctx.in(2).dims;
  const bool tb = ctx.node.attr_int("trans_b", 0) != 0;
  if (a.size() < 2 || b.size() != 2 || bias.size() != 1)
    ctx.Fail(std::string("MatMulBias takes A of rank >= 2, B ") + (tb ? "[N, K]" : "[K, N]") + " and bias [N]; got A " +
             DimsToString(a) + ", B " + DimsToString(b) + ", bias " + DimsToString(bias));
  cpu::MatMulSpec spec;
  spec.trans_b = tb;
  spec.m = 1;
  for (size_t i = 0; i + 1 < a.size(); ++i) spec.m *= a[i];
  spec.k = b[tb ? 1 : 0];
  spec.n = b[tb ? 0 : 1];
  if (a.back() != spec.k)
    ctx.Fail("inner dimensions differ: A " + DimsToString(a) + ", B " + DimsToString(b) + (tb ? " (trans_b)" : ""));
  if (bias[0] != spec.n) ctx.Fail("bias " + DimsToString(bias) + " does not match N of B " + DimsToString(b));
  return spec;
}

namespace {

// Zeroes the negative entries of y[0, n) in place. For the half types the test is on the bits: sign set and not a
// NaN (|bits| above the infinity pattern `inf`), so no conversion to float is needed. Written as selects, not
// conditional stores: the loops vectorize (OT_VEC_CLONES) and take no branch per element (random signs made the
// branchy loop mispredict half the time: 4 ms of a 2048 x 1024 layer's 8.5 ms).
template <typename T>
OT_VEC_CLONES void ReluRange(T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    constexpr uint16_t inf = std::is_same_v<T, float16> ? 0x7C00 : 0x7F80;
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t b = y[i].bits;
      y[i].bits = ((b & 0x8000) && (b & 0x7FFF) <= inf) ? uint16_t{0} : b;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] < T(0) ? T(0) : y[i];
  }
}

template <typename T>
void ReluInPlace(T* y, int64_t n) {
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 15),
                    [&](const tbb::blocked_range<int64_t>& r) { ReluRange<T>(y + r.begin(), r.end() - r.begin()); });
}

template <typename T>
std::function<void(const KernelIO&)> Epilogue(int64_t m, int64_t n, bool relu) {
  return [=](const KernelIO& io) {
    (void)io;
    if (relu) ReluInPlace<T>(io.Out<T>(0), m * n);
  };
}

KernelInfo MatMulBiasKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  for (int i = 1; i < 3; ++i)
    if (ctx.in(i).dtype != t)
      ctx.Fail("input " + std::to_string(i) + " (" + DataTypeName(ctx.in(i).dtype) + ") and A (" + DataTypeName(t) +
               ") differ in dtype");
  const std::string act = ctx.node.attr_string("activation", "none");
  if (act != "none" && act != "relu") ctx.Fail("activation = '" + act + "' (none or relu)");
  const bool relu = act == "relu";
  cpu::MatMulSpec spec = MatMulBiasSpec(ctx);
  spec.accumulate = true;  // Y = bias rows + A B
  KernelInfo info;
  auto build = [&](auto tag) {
    using T = decltype(tag);
    const int64_t m = spec.m, n = spec.n;
    auto epilogue = Epilogue<T>(m, n, relu);
    // The bias row copied into every row of Y (FillScaledBroadcast2D with beta 1 gives these bits: x * 1.0f is x
    // in float, and a half widened and rounded back is itself), in parallel blocks of rows: the element loop ran
    // on one thread before the GEMM's row blocks, 1.7% of the tiny LM's step.
    auto prefill = [m, n](const KernelIO& io) {
      const T* bias = io.In<T>(2);
      T* y = io.Out<T>(0);
      const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(n, 1));
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, m, grain), [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t i = r.begin(); i < r.end(); ++i) std::memcpy(y + i * n, bias, static_cast<size_t>(n) * sizeof(T));
      });
    };
    if constexpr (std::is_same_v<T, double>) {
      info.fn = [spec, prefill, epilogue](const KernelIO& io) {
        prefill(io);
        cpu::NaiveMatMul<double, double>(spec, io.In<double>(0), io.In<double>(1), io.Out<double>(0));
        epilogue(io);
      };
    } else {
      cpu::MatMulSpec s = spec;
      s.type = std::is_same_v<T, float16>    ? cpu::DnnType::kF16
               : std::is_same_v<T, bfloat16> ? cpu::DnnType::kBF16
                                             : cpu::DnnType::kF32;
      auto mm = std::make_shared<cpu::DnnlMatMul>(s);
      info.fn = [mm, prefill, epilogue](const KernelIO& io) {
        prefill(io);
        mm->Run(io.in[0], io.in[1], io.out[0], io.workspace);
        epilogue(io);
      };
      // oneDNN's scratchpad and the f32 copies of converted half operands come from the memory plan.
      info.workspace_bytes = mm->workspace_bytes();
      info.heap_bytes = mm->heap_bytes();
      info.exclusive = mm->blocks() == 1;  // blocks run on TBB's threads only (linalg.cc)
    }
  };
  switch (t) {
    case DataType::kFloat32:
      build(float{});
      break;
    case DataType::kFloat16:
      build(float16{});
      break;
    case DataType::kBFloat16:
      build(bfloat16{});
      break;
    case DataType::kFloat64:
      build(double{});
      break;
    default:
      ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported");
  }
  info.flops = cpu::GemmFlops(spec);
  return info;
}

}  // namespace

void RegisterFusedLinalgKernels(KernelRegistry& r) { r.Register("MatMulBias", MatMulBiasKernel, kInternalDomain); }

}  // namespace ot
