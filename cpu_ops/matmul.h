// Batched GEMM: oneDNN's matmul primitive for f32/f16/bf16 (created once, executed per call over the caller's
// buffers), and plain loops for float64 and integer types.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cpu_ops/dnnl_util.h"

namespace ot::cpu {

// C[b..., M, N] = alpha * op(A)[b..., M, K] x op(B)[b..., K, N] (+ C when accumulate).
// a_batch and b_batch have the same length (pad with 1s); each dim is equal to the other's or 1 (broadcast).
// op(A) = A, or A stored as [b..., K, M] when trans_a; likewise B stored as [b..., N, K] when trans_b.
// C is contiguous with batch dims max(a_batch, b_batch).
struct MatMulSpec {
  DnnType type = DnnType::kF32;
  std::vector<int64_t> a_batch, b_batch;
  int64_t m = 0, k = 0, n = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f;
  bool accumulate = false;  // C += alpha * A x B, reading C's prior contents (oneDNN sum post-op)
};

// A GEMM that also sums the columns of one operand stored [rows, cols] with its K axis first (ai.onnxtrain.GemmSum:
// a weight gradient and its bias gradient): the spec, which input (0 = A, 1 = B) and its stored dims.
struct GemmSumGeometry {
  MatMulSpec spec;
  int sum_input = 0;
  int64_t rows = 0, cols = 0;
};

// The broadcast batch of a spec: how many matrices, and where matrix bi of C reads its A and B (element offsets;
// a broadcast batch dim advances neither). Shared by the loop kernels that walk the batch themselves.
class MatMulBatch {
 public:
  explicit MatMulBatch(const MatMulSpec& s) : c_(s.a_batch.size()), as_(s.a_batch.size()), bs_(s.a_batch.size()) {
    int64_t sa = s.m * s.k, sb = s.k * s.n;
    count_ = 1;
    for (size_t i = c_.size(); i-- > 0;) {
      c_[i] =
          (s.a_batch[i] == 0 || s.b_batch[i] == 0) ? 0 : (s.a_batch[i] > s.b_batch[i] ? s.a_batch[i] : s.b_batch[i]);
      as_[i] = s.a_batch[i] == 1 ? 0 : sa;
      bs_[i] = s.b_batch[i] == 1 ? 0 : sb;
      sa *= s.a_batch[i];
      sb *= s.b_batch[i];
      count_ *= c_[i];
    }
  }
  int64_t count() const { return count_; }
  void Offsets(int64_t bi, int64_t* a_off, int64_t* b_off) const {
    int64_t ao = 0, bo = 0;
    for (size_t d = c_.size(); d-- > 0;) {
      const int64_t idx = bi % c_[d];
      bi /= c_[d];
      ao += idx * as_[d];
      bo += idx * bs_[d];
    }
    *a_off = ao;
    *b_off = bo;
  }

 private:
  std::vector<int64_t> c_, as_, bs_;
  int64_t count_ = 1;
};

// Floating-point operations of a spec: 2 m n k per matrix of the broadcast batch.
inline double GemmFlops(const MatMulSpec& s) {
  double batch = 1;
  for (size_t i = 0; i < s.a_batch.size() && i < s.b_batch.size(); ++i)
    batch *= static_cast<double>(s.a_batch[i] > s.b_batch[i] ? s.a_batch[i] : s.b_batch[i]);
  return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) * batch;
}

class DnnlMatMul {
 public:
  // Creates the primitive (slow: do it once per plan). Falls back to an f32 primitive with conversions when
  // the CPU has no implementation for the half type.
  explicit DnnlMatMul(const MatMulSpec& spec);
  ~DnnlMatMul();
  // `workspace`: workspace_bytes() bytes, 64-byte aligned, private to this call -- oneDNN's scratchpad and the
  // f32 copies of half operands when the primitive converts them. Null: Run allocates them itself (the
  // scratchpad once, owned by this object; the copies per call).
  void Run(const void* a, const void* b, void* c, void* workspace = nullptr) const;
  // Bytes of the memory one Run needs (0 when it runs no primitive): what a caller that plans its memory hands in.
  size_t workspace_bytes() const;
  // Host bytes one Run allocates on its own, outside the workspace (an upper estimate for the memory plan):
  // DnnlCallHeapBytes, plus the packing buffers oneDNN's gemm driver ("gemm:jit": blocks of a transposed A, column
  // blocks of B) mallocs in each call. Measured on AVX512-BF16 at 2 threads, [64, 2048]^T x [2048, 256] in two row
  // blocks: f32 156 KB, bf16 1.02 MB; brgemm calls allocate ~4 KB.
  size_t heap_bytes() const;
  const MatMulSpec& spec() const { return spec_; }
  // oneDNN's implementation name, with " (f32 on converted operands)" when the half type is converted.
  std::string impl_name() const;
  // Blocks of C -- its rows, or its columns where column_blocks() -- run as parallel one-thread calls (1: one call on
  // oneDNN's own team); fixed when made, from the shape, the type and the configured thread count
  // (cpu_ops/threads.h).
  int blocks() const;
  bool column_blocks() const;

 private:
  // Converting a tile at a time (Impl::mc, kc): the tiles' primitives, and the run over the workspace's slices.
  void MakeTiles(const MatMulSpec& spec);
  void RunTiles(const void* a, const void* b, void* c, void* workspace) const;
  // The primitive(s) on f32 or native operands, `scratch` the scratchpad(s).
  void Execute(const void* a, const void* b, void* c, void* scratch) const;
  struct Impl;
  MatMulSpec spec_;
  std::shared_ptr<Impl> impl_;
};

// The same contract with plain loops (float64 and integers; also a reference). Acc is the accumulator type.
// Parallel over output rows; each element accumulates over k in order.
template <typename T, typename Acc>
void NaiveMatMul(const MatMulSpec& spec, const T* a, const T* b, T* c);

// Y[M, N] = beta * C broadcast, where C has 2-D strides (cs_m, cs_n), 0 on a broadcast dim.
template <typename T>
void FillScaledBroadcast2D(const T* c, int64_t cs_m, int64_t cs_n, float beta, int64_t m, int64_t n, T* y);

}  // namespace ot::cpu
