// MatMul, Gemm, ai.onnxtrain.MatMulBias, MatMulTrans and GemmSum on the GPU through cuBLASLt (cuda_ops/gemm.h): the CPU
// kernels' specs (numpy batching with a shared weight folded into M, Gemm's transposes) become a row-major GemmDesc;
// MatMulBias's bias and ReLU are cuBLASLt epilogues. fp32 runs exact fp32 (no TF32) unless --tf32.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "cpu_ops/matmul.h"
#include "cuda_ops/gemm.h"
#include "cuda_ops/row_kernels.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/device.h"
#include "graph/graph.h"

namespace ot {

cpu::MatMulSpec NumpyMatMulSpec(const KernelContext& ctx, int ai, int bi);  // executor/kernels/linalg.cc
cpu::MatMulSpec GemmOpSpec(const KernelContext& ctx, float* beta);          // executor/kernels/linalg.cc
cpu::MatMulSpec MatMulTransSpec(const KernelContext& ctx);                  // executor/kernels/linalg.cc
cpu::MatMulSpec MatMulBiasSpec(const KernelContext& ctx);                   // executor/kernels/fused_linalg.cc
cpu::GemmSumGeometry GemmSumOpGeometry(const KernelContext& ctx);           // executor/kernels/linalg.cc

namespace {

// One runner (cuBLASLt handle and heuristic cache) per process: a plan's kernels run one at a time.
struct SharedRunner {
  std::mutex mu;
  std::unique_ptr<cuda::GemmRunner> runner;
};
SharedRunner& Runner() {
  static SharedRunner r;
  return r;
}

cuda::GemmType GemmTypeOf(const KernelContext& ctx, DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return cuda::GemmType::kF32;
    case DataType::kFloat16:
      return cuda::GemmType::kF16;
    case DataType::kBFloat16:
      return cuda::GemmType::kBF16;
    default:
      ctx.Unsupported("GEMM of " + DataTypeName(t) + " on the GPU (float32, float16 and bfloat16 are)");
  }
}

bool AllOnes(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t d) { return d == 1; });
}

// The row-major desc of a CPU spec; *batch_out: the number of matrices.
cuda::GemmDesc DescOf(const KernelContext& ctx, DataType t, const cpu::MatMulSpec& s, cuda::GemmEpilogue ep,
                      int64_t* batch_out) {
  cuda::GemmDesc g;
  g.type = GemmTypeOf(ctx, t);
  g.trans_a = s.trans_a;
  g.trans_b = s.trans_b;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.lda = s.trans_a ? s.m : s.k;
  g.ldb = s.trans_b ? s.k : s.n;
  g.ldd = s.n;
  g.alpha = s.alpha;
  g.epilogue = ep;
  if (ctx.device) {
    g.tf32 = g.type == cuda::GemmType::kF32 && ctx.device->options().tf32;
    g.deterministic = ctx.device->options().deterministic;
  }
  int64_t batch = 1;
  if (!s.a_batch.empty()) {
    if (s.a_batch == s.b_batch) {
      for (int64_t d : s.a_batch) batch *= d;
      g.stride_a = s.m * s.k;
      g.stride_b = s.k * s.n;
    } else if (AllOnes(s.a_batch)) {
      for (int64_t d : s.b_batch) batch *= d;
      g.stride_a = 0;
      g.stride_b = s.k * s.n;
    } else if (AllOnes(s.b_batch)) {  // a shared B under a transposed A (MatMulTrans does not fold it into M)
      for (int64_t d : s.a_batch) batch *= d;
      g.stride_a = s.m * s.k;
      g.stride_b = 0;
    } else {
      ctx.Unsupported("MatMul batch dims that broadcast on both sides on the GPU");
    }
    g.batch = batch;
    g.stride_d = s.m * s.n;
  }
  *batch_out = batch;
  return g;
}

// The kernel of a CPU spec; `bias_slot`: the KernelIO input holding the bias (-1: none).
KernelInfo GemmKernel(const KernelContext& ctx, DataType t, const cpu::MatMulSpec& s, cuda::GemmEpilogue ep,
                      int bias_slot) {
  int64_t batch = 1;
  const cuda::GemmDesc g = DescOf(ctx, t, s, ep, &batch);
  KernelInfo info;
  info.workspace_bytes = cuda::GemmRunner::WorkspaceBytes();
  info.flops =
      2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) * static_cast<double>(batch);
  const bool empty = g.m == 0 || g.n == 0 || batch == 0;
  const size_t out_bytes = ctx.out(0).nbytes();
  info.fn = [g, bias_slot, empty, out_bytes](const KernelIO& io) {
    if (empty) return;
    if (g.k == 0) {  // an empty sum: zeros (plus the bias, which no kernel here needs: MatMulBias has k > 0)
      CudaCheck(cudaMemsetAsync(io.out[0], 0, out_bytes, static_cast<cudaStream_t>(io.stream)), "zero fill");
      return;
    }
    SharedRunner& r = Runner();
    std::lock_guard<std::mutex> l(r.mu);
    try {
      if (!r.runner) r.runner = std::make_unique<cuda::GemmRunner>();
      r.runner->Run(g, io.in[0], io.in[1], io.out[0], bias_slot >= 0 ? io.in[bias_slot] : nullptr, io.workspace,
                    cuda::GemmRunner::WorkspaceBytes(), io.stream);
    } catch (const std::exception& e) {
      throw Error(std::string("cuBLASLt: ") + e.what());
    }
  };
  return info;
}

KernelInfo MatMulKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (ctx.in(1).dtype != t) ctx.Fail("inputs have different dtypes");
  return GemmKernel(ctx, t, NumpyMatMulSpec(ctx, 0, 1), cuda::GemmEpilogue::kNone, -1);
}

KernelInfo MatMulTransKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (ctx.in(1).dtype != t) ctx.Fail("inputs have different dtypes");
  return GemmKernel(ctx, t, MatMulTransSpec(ctx), cuda::GemmEpilogue::kNone, -1);
}

// ai.onnxtrain.GemmSum: the GEMM with cuBLASLt's bias-gradient epilogue writing the column sums of the [K, X] operand
// (kBiasGradA for A with transA, kBiasGrad for B without transB: cuda_ops/gemm.h). Where cuBLASLt has no algorithm
// for that epilogue, and under --deterministic (the epilogue's reduction order is cuBLASLt's), a plain GEMM and
// ReduceToShape's column-sum kernel (cuda::ReduceRowsToColumns) instead, on the same stream and workspace.
KernelInfo GemmSumKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  const cpu::GemmSumGeometry geo = GemmSumOpGeometry(ctx);
  const cpu::MatMulSpec& s = geo.spec;
  const int si = geo.sum_input;
  const int64_t rows = geo.rows, cols = geo.cols;
  const cuda::FloatType ft = DeviceFloatType(ctx, t, "GemmSum");
  int64_t batch = 1;
  const cuda::GemmDesc g =
      DescOf(ctx, t, s, si == 0 ? cuda::GemmEpilogue::kBiasGradA : cuda::GemmEpilogue::kBiasGrad, &batch);
  cuda::GemmDesc plain = g;
  plain.epilogue = cuda::GemmEpilogue::kNone;
  const size_t rws = cuda::ReduceRowsToColumnsWorkspaceBytes(rows, cols);
  KernelInfo info;
  info.workspace_bytes = std::max(cuda::GemmRunner::WorkspaceBytes(), rws);
  info.flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  if (g.m == 0 || g.n == 0 || g.k == 0) ctx.Unsupported("an empty GemmSum on the GPU");
  auto epilogue_ok = std::make_shared<std::atomic<bool>>(!g.deterministic);
  const std::string what = ctx.node.Describe();
  info.fn = [g, plain, epilogue_ok, si, rows, cols, ft, rws, what](const KernelIO& io) {
    SharedRunner& r = Runner();
    {
      std::lock_guard<std::mutex> l(r.mu);
      try {
        if (!r.runner) r.runner = std::make_unique<cuda::GemmRunner>();
        if (epilogue_ok->load()) {
          try {
            r.runner->Run(g, io.in[0], io.in[1], io.out[0], nullptr, io.workspace, cuda::GemmRunner::WorkspaceBytes(),
                          io.stream, io.out[1]);
            return;
          } catch (const std::runtime_error& e) {
            if (std::string(e.what()).find("no algorithm") == std::string::npos) throw;
            epilogue_ok->store(false);  // this layout has no bias-gradient epilogue here: GEMM + column sums
          }
        }
        r.runner->Run(plain, io.in[0], io.in[1], io.out[0], nullptr, io.workspace, cuda::GemmRunner::WorkspaceBytes(),
                      io.stream);
      } catch (const std::exception& e) {
        throw Error(std::string("cuBLASLt: ") + e.what());
      }
    }
    RunLauncher(what, [&] {
      cuda::ReduceRowsToColumns(rows, cols, ft, io.in[si], ft, io.out[1], io.workspace, rws, io.stream);
    });
  };
  return info;
}

KernelInfo GemmOpKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  float beta = 1.0f;
  const cpu::MatMulSpec s = GemmOpSpec(ctx, &beta);
  if (!ctx.has_input(2) || beta == 0.0f) return GemmKernel(ctx, t, s, cuda::GemmEpilogue::kNone, -1);
  // C as a bias over the columns: [n] or [1, n] with beta 1.
  const auto& c = ctx.in(2).dims;
  const bool row_bias = (c.size() == 1 && c[0] == s.n) || (c.size() == 2 && c[0] == 1 && c[1] == s.n);
  if (!row_bias || beta != 1.0f || ctx.in(2).dtype != t)
    ctx.Unsupported("Gemm with C " + DimsToString(c) + " and beta " + std::to_string(beta) +
                    " on the GPU (C as a bias of N elements with beta 1 is supported)");
  return GemmKernel(ctx, t, s, cuda::GemmEpilogue::kBias, 2);
}

KernelInfo MatMulBiasKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  const cpu::MatMulSpec s = MatMulBiasSpec(ctx);
  if (ctx.in(1).dtype != t || ctx.in(2).dtype != t) ctx.Fail("A, B and bias must share a dtype");
  const std::string act = ctx.node.attr_string("activation", "none");
  if (act != "none" && act != "relu") ctx.Unsupported("activation '" + act + "'");
  return GemmKernel(ctx, t, s, act == "relu" ? cuda::GemmEpilogue::kBiasRelu : cuda::GemmEpilogue::kBias, 2);
}

}  // namespace

void RegisterCudaLinalgKernels(KernelRegistry& r) {
  r.Register("MatMul", MatMulKernel);
  r.Register("Gemm", GemmOpKernel);
  r.Register("MatMulBias", MatMulBiasKernel, kInternalDomain);
  r.Register("MatMulTrans", MatMulTransKernel, kInternalDomain);
  r.Register("GemmSum", GemmSumKernel, kInternalDomain);
}

}  // namespace ot
