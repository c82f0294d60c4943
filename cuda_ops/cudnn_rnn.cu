// The small kernels around cuDNN's RNN calls (see cudnn_rnn.h, rnn_detail): the weight-space pack / unpack as one
// launch over a segment table passed by value (so a captured graph replays it), the per-sequence masks and reversal
// of padded sequence data, the length-0 state fix-ups and cuDNN's device lengths. Elements are moved as bits (2 or
// 4 bytes); nothing is converted.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_ops/cudnn_rnn.h"
#include "cuda_ops/launch_util.cuh"

namespace ot::cuda::rnn_detail {

namespace {

using detail::CheckLaunch;
using detail::DispatchBits;
using detail::Require;

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = int64_t{1} << 20;

unsigned GridFor(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b < kMaxGrid ? b : kMaxGrid);
}

struct SegTable {
  int n;
  int operand[kMaxSegments];  // 0 W, 1 R, 2 B
  int64_t onnx[kMaxSegments], space[kMaxSegments], count[kMaxSegments];
};

SegTable TableOf(const std::vector<RnnWeightSegment>& segs, int64_t* max_count) {
  Require(segs.size() <= static_cast<size_t>(kMaxSegments), "ot::cuda::rnn: too many weight segments");
  SegTable t{};
  t.n = static_cast<int>(segs.size());
  *max_count = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    t.operand[i] = static_cast<int>(segs[i].operand);
    t.onnx[i] = segs[i].onnx_offset;
    t.space[i] = segs[i].space_offset;
    t.count[i] = segs[i].count;
    if (segs[i].count > *max_count) *max_count = segs[i].count;
  }
  return t;
}

// blockIdx.y: the segment; the block's threads stride over its elements.
template <typename W>
__global__ void PackKernel(SegTable t, const W* __restrict__ w, const W* __restrict__ r, const W* __restrict__ b,
                           W* __restrict__ space) {
  const int s = blockIdx.y;
  const W* src = t.operand[s] == 0 ? w : t.operand[s] == 1 ? r : b;
  if (!src) return;  // an absent B: its bias stays zero
  src += t.onnx[s];
  W* dst = space + t.space[s];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < t.count[s];
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

template <typename W>
__global__ void UnpackKernel(SegTable t, const W* __restrict__ space, W* __restrict__ dw, W* __restrict__ dr,
                             W* __restrict__ db) {
  const int s = blockIdx.y;
  W* dst = t.operand[s] == 0 ? dw : t.operand[s] == 1 ? dr : db;
  if (!dst) return;
  dst += t.onnx[s];
  const W* src = space + t.space[s];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < t.count[s];
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

__global__ void LengthsKernel(const int32_t* __restrict__ lens, int64_t seq, int64_t batch, int32_t* __restrict__ out) {
  for (int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; n < batch;
       n += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t l = lens ? lens[n] : static_cast<int32_t>(seq);
    out[n] = l > 1 ? l : 1;
  }
}

// Element (n, t, j) of padded sequence data.
__device__ __forceinline__ int64_t SeqAt(bool batch_major, int64_t seq, int64_t batch, int64_t vec, int64_t n,
                                         int64_t t, int64_t j) {
  return (batch_major ? n * seq + t : t * batch + n) * vec + j;
}

template <typename W>
__global__ void MaskKernel(W* __restrict__ data, bool batch_major, int64_t seq, int64_t batch, int64_t vec,
                           const int32_t* __restrict__ lens) {
  const int64_t total = seq * batch * vec;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // i in the data's own order: [t, n, j] or [n, t, j].
    const int64_t r = i / vec;
    const int64_t n = batch_major ? r / seq : r % batch, t = batch_major ? r % seq : r / batch;
    if (t >= lens[n]) data[i] = W(0);
  }
}

template <typename W>
__global__ void ReverseKernel(const W* __restrict__ src, W* __restrict__ dst, bool batch_major, int64_t seq,
                              int64_t batch, int64_t vec, const int32_t* __restrict__ lens) {
  const int64_t total = seq * batch * vec;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % vec, r = i / vec;
    const int64_t n = batch_major ? r / seq : r % batch, t = batch_major ? r % seq : r / batch;
    const int64_t len = lens ? lens[n] : seq;
    dst[i] = t < len ? src[SeqAt(batch_major, seq, batch, vec, n, len - 1 - t, j)] : W(0);
  }
}

template <typename W>
__global__ void StateFixKernel(W* __restrict__ dst, const W* __restrict__ src, int64_t dirs, int64_t batch,
                               int64_t hidden, const int32_t* __restrict__ lens) {
  const int64_t total = dirs * batch * hidden;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = (i / hidden) % batch;
    if (lens[n] == 0) dst[i] = src ? src[i] : W(0);
  }
}

}  // namespace

void PackWeights(const std::vector<RnnWeightSegment>& segs, size_t esz, const void* w, const void* r, const void* b,
                 void* space, size_t space_bytes, void* stream) {
  Require(space && w && r, "ot::cuda::rnn::PackWeights: null pointer");
  int64_t max_count = 0;
  const SegTable t = TableOf(segs, &max_count);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const cudaError_t e = cudaMemsetAsync(space, 0, space_bytes, st);
  if (e != cudaSuccess) throw std::runtime_error(std::string("rnn PackWeights (memset): ") + cudaGetErrorString(e));
  if (t.n == 0 || max_count == 0) return;
  const dim3 grid(GridFor(max_count), static_cast<unsigned>(t.n));
  DispatchBits(esz, "ot::cuda::rnn::PackWeights", [&](auto tag) {
    using W = decltype(tag);
    PackKernel<W><<<grid, kThreads, 0, st>>>(t, static_cast<const W*>(w), static_cast<const W*>(r),
                                             static_cast<const W*>(b), static_cast<W*>(space));
  });
  CheckLaunch("rnn PackWeights");
}

void UnpackWeights(const std::vector<RnnWeightSegment>& segs, size_t esz, const void* space, void* dw, void* dr,
                   void* db, void* stream) {
  Require(space != nullptr, "ot::cuda::rnn::UnpackWeights: null space");
  int64_t max_count = 0;
  const SegTable t = TableOf(segs, &max_count);
  if (t.n == 0 || max_count == 0 || (!dw && !dr && !db)) return;
  const dim3 grid(GridFor(max_count), static_cast<unsigned>(t.n));
  DispatchBits(esz, "ot::cuda::rnn::UnpackWeights", [&](auto tag) {
    using W = decltype(tag);
    UnpackKernel<W><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        t, static_cast<const W*>(space), static_cast<W*>(dw), static_cast<W*>(dr), static_cast<W*>(db));
  });
  CheckLaunch("rnn UnpackWeights");
}

void PrepareLengths(const int32_t* lens, int64_t seq, int64_t batch, int32_t* out, void* stream) {
  if (batch <= 0) return;
  Require(out != nullptr, "ot::cuda::rnn::PrepareLengths: null output");
  LengthsKernel<<<GridFor(batch), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(lens, seq, batch, out);
  CheckLaunch("rnn PrepareLengths");
}

void SeqMask(void* data, size_t esz, bool batch_major, int64_t seq, int64_t batch, int64_t vec, const int32_t* lens,
             void* stream) {
  const int64_t total = seq * batch * vec;
  if (!lens || total <= 0) return;
  Require(data != nullptr, "ot::cuda::rnn::SeqMask: null data");
  DispatchBits(esz, "ot::cuda::rnn::SeqMask", [&](auto tag) {
    using W = decltype(tag);
    MaskKernel<W><<<GridFor(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<W*>(data), batch_major, seq, batch, vec, lens);
  });
  CheckLaunch("rnn SeqMask");
}

void SeqReverse(const void* src, void* dst, size_t esz, bool batch_major, int64_t seq, int64_t batch, int64_t vec,
                const int32_t* lens, void* stream) {
  const int64_t total = seq * batch * vec;
  if (total <= 0) return;
  Require(src && dst && src != dst, "ot::cuda::rnn::SeqReverse: null or aliased pointers");
  DispatchBits(esz, "ot::cuda::rnn::SeqReverse", [&](auto tag) {
    using W = decltype(tag);
    ReverseKernel<W><<<GridFor(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const W*>(src), static_cast<W*>(dst), batch_major, seq, batch, vec, lens);
  });
  CheckLaunch("rnn SeqReverse");
}

void StateFix(void* dst, const void* src, size_t esz, int64_t dirs, int64_t batch, int64_t hidden, const int32_t* lens,
              void* stream) {
  const int64_t total = dirs * batch * hidden;
  if (!lens || total <= 0) return;
  Require(dst != nullptr, "ot::cuda::rnn::StateFix: null destination");
  DispatchBits(esz, "ot::cuda::rnn::StateFix", [&](auto tag) {
    using W = decltype(tag);
    StateFixKernel<W><<<GridFor(total), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<W*>(dst), static_cast<const W*>(src), dirs, batch, hidden, lens);
  });
  CheckLaunch("rnn StateFix");
}

}  // namespace ot::cuda::rnn_detail
