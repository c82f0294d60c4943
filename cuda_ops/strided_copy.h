// Strided copies on the GPU: Expand (numpy broadcast to a larger shape), Tile (repeat along each dim) and the general
// bounded strided copy they and ConvTranspose's crop (cudnn_conv_transpose.h) share -- the GPU side of
// cpu_ops/tile.h and cpu_ops/slice.h's StridedCopy, with the same views: Expand reads the input with stride 0 on
// every broadcast axis; Tile views the output as [r0, d0, r1, d1, ...] with stride 0 on every repeat axis.
// Elements of esz = 1, 2, 4 or 8 bytes are moved as bits (so any dtype of those sizes: f32/f16/bf16/f64, the
// integers, bool), never converted. Launchers are asynchronous on `stream` (a cudaStream_t; nullptr: the legacy
// default stream), check their arguments on the host first (std::invalid_argument, before any CUDA call, so the
// checks run without a GPU) and throw std::runtime_error when a launch fails; none synchronises with the host.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ot::cuda {

// The most axes a strided copy takes after SimplifyStrided (Tile of a rank-8 input has 16 before merging).
constexpr int kStridedCopyMaxRank = 16;

// A copy's iteration space reduced to its essentials (host-only): out dims of size 1 dropped, and each pair of
// adjacent axes (outer a, inner b) merged when one counter can walk both -- stride[a] == stride[b] * dims[b] (two
// broadcast axes, stride 0, always merge; two contiguous ones do) and b is unbounded (limits[b] == dims[b]; the
// merged limit is limits[a] * dims[b]). numel is the product of the dims (0: nothing to copy; then dims is empty).
struct StridedShape {
  std::vector<int64_t> dims, strides, limits;
  int64_t numel = 1;
};
// limits empty: every axis unbounded. Throws std::invalid_argument when the vectors' lengths differ, a dim is
// negative, a limit is outside [0, dims], or the rank after simplification exceeds kStridedCopyMaxRank.
StridedShape SimplifyStrided(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                             const std::vector<int64_t>& limits = {});

// The input strides (in elements) of Expand: in_dims right-aligned against out_dims, each in dim 1 (stride 0: that
// axis broadcasts) or equal to the out dim (its contiguous row-major stride); out axes beyond in's rank get stride
// 0. Throws std::invalid_argument when in_dims do not broadcast to out_dims (host-only).
std::vector<int64_t> ExpandStrides(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims);

// out (row-major over dims, every element written) [c] = in[base + sum_d c_d * strides[d]] when c_d < limits[d]
// on every axis d, else zero bits (a crop whose window runs past the input: ConvTranspose's output rows no input
// reaches). Strides and base in elements; they may be 0 (broadcast) but the caller guarantees every read is in
// bounds. out may not overlap in.
void StridedCopy(const void* in, int64_t base, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                 const std::vector<int64_t>& limits, void* out, size_t esz, void* stream);

// ONNX Expand: out [out_dims] = in [in_dims] broadcast (in_dims broadcast to out_dims; out_dims is the node's
// output, already max(in, shape) per axis). Any rank; empty outputs launch nothing.
void Expand(const void* in, const std::vector<int64_t>& in_dims, void* out, const std::vector<int64_t>& out_dims,
            size_t esz, void* stream);

// ONNX Tile: out dim k = in_dims[k] * repeats[k] (repeats >= 0), input rank <= 8.
void Tile(const void* in, const std::vector<int64_t>& in_dims, const std::vector<int64_t>& repeats, void* out,
          size_t esz, void* stream);

}  // namespace ot::cuda
