// Data-movement CUDA kernels of a training step: Transpose (any permutation, elements of 1/2/4/8 bytes), Gather
// along an axis (the embedding lookup) and its deterministic gradient, Cast between f32/f16/bf16, and Fill.
// The CPU kernels of the same ops (cpu_ops/transpose.h, cpu_ops/gather.h, cpu_ops/scatter_add.h,
// cpu_ops/elementwise_cast) are the reference. Launchers are asynchronous on `stream` (a cudaStream_t; nullptr:
// the legacy default stream), throw std::invalid_argument on bad arguments and std::runtime_error when a launch
// fails; none synchronises with the host.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda_ops/row_kernels.h"  // FloatType, IndexType

namespace ot::cuda {

// ---- Transpose ----------------------------------------------------------------------------------------------------
// The permutation reduced to its essentials (host-only, no GPU needed): dims of size 1 dropped, and input axes that
// stay adjacent and in order in the output merged into one. out dim k is in_dims[perm[k]]. An empty perm (rank 0,
// or all dims 1, or the identity) means a plain copy; any dim of 0 gives numel 0.
struct TransposeShape {
  std::vector<int64_t> in_dims;
  std::vector<int> perm;
  int64_t numel = 1;
};
// Throws std::invalid_argument when perm is not a permutation of [0, in_dims.size()) or a dim is negative.
TransposeShape SimplifyTranspose(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& perm);

// out = transpose(in, perm) for a row-major `in` of in_dims (any rank up to 8), elements of esz = 1, 2, 4 or 8
// bytes moved as bits. After SimplifyTranspose: a copy when nothing moves; 32x32 shared-memory tiles (coalesced
// reads and writes) whenever the innermost input axis is not the innermost output axis (a swap of the last two
// axes, batched or not, is the common case); otherwise one thread per element with contiguous inner runs.
// out may not alias in.
void Transpose(const void* in, void* out, size_t esz, const std::vector<int64_t>& in_dims,
               const std::vector<int64_t>& perm, void* stream);

// ---- Gather / GatherGrad --------------------------------------------------------------------------------------------
// ONNX Gather along one axis: data viewed as [outer, axis_dim, inner] elements of esz bytes, idx `num` int32/int64
// indices (any shape, flattened), out [outer, num, inner]. A negative index counts from the end. An index outside
// [-axis_dim, axis_dim) is an error the CPU throws for: here its output row is zero-filled and *bad_index is set to
// 1 (when not null; never cleared here -- zero it before and read it after, e.g. with the step's other flags).
// Embedding lookup: outer = 1, axis_dim = V, inner = D.
void Gather(const void* data, int64_t outer, int64_t axis_dim, int64_t inner, size_t esz, IndexType it, const void* idx,
            int64_t num, void* out, int* bad_index, void* stream);

// Workspace of GatherGrad (bytes). Asks CUB for its radix-sort scratch size, so it needs the CUDA runtime (a GPU).
size_t GatherGradWorkspaceBytes(int64_t num, int64_t vocab);

// The gradient of an axis-0 Gather (embedding backward, cpu::GatherGrad with outer = 1): dx [vocab, dim] =
// 0, then dx[idx[j]] += dy[j] for j in order. Deterministic and bit-identical to the CPU for float32: the (index,
// position) pairs are radix-sorted (CUB, stable), so every row's contributions are added in increasing j, in float
// from 0, by one thread per element of the row; then every row of dx is written once (zeros where no index points).
// O(num * dim + vocab * dim) work. dy [num, dim] of type dyt, dx of type dxt (accumulated in float, rounded once).
// An index outside [-vocab, vocab) sets *bad_index = 1 and contributes nothing (the CPU zeroes dx and fails).
// vocab and num must be below 2^31.
void GatherGrad(FloatType dyt, const void* dy, IndexType it, const void* idx, int64_t num, int64_t vocab, int64_t dim,
                FloatType dxt, void* dx, int* bad_index, void* workspace, size_t workspace_bytes, void* stream);

// ---- Cast / Fill ----------------------------------------------------------------------------------------------------
// out[i] = in[i] converted (kernel_common/half.h: round to nearest even, NaN stays NaN, overflow to inf; the same
// bits as the CPU's Cast). from == to is a copy. out may alias in only when the types have the same size.
void Cast(FloatType from, const void* in, FloatType to, void* out, int64_t n, void* stream);

// n elements of esz (1, 2, 4 or 8) bytes, each set to the low esz bytes of `bits`.
void Fill(void* out, size_t esz, uint64_t bits, int64_t n, void* stream);
// n elements of type t set to value (rounded to t).
void FillFloat(FloatType t, void* out, float value, int64_t n, void* stream);

}  // namespace ot::cuda
