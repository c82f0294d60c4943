// Strided copies: see strided_copy.h. One kernel serves Expand, Tile and bounded crops: one thread per output
// element (grid-stride), its row-major coordinates decoded innermost first, the input offset summed from them.
// Consecutive threads write consecutive outputs, so writes are coalesced; reads are too along any axis with
// stride 1, and broadcast (stride 0) reads hit the same addresses across a warp (served from cache).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda_ops/launch_util.cuh"
#include "cuda_ops/strided_copy.h"

namespace ot::cuda {

namespace {

using detail::CheckLaunch;
using detail::Require;

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = int64_t{1} << 20;

// Passed by value (kernel parameter space, ~400 bytes): the simplified shape of one copy.
struct StridedArgs {
  int rank;
  int64_t numel;
  int64_t base;
  int64_t dims[kStridedCopyMaxRank], strides[kStridedCopyMaxRank], limits[kStridedCopyMaxRank];
};

// I: the index type of the output coordinates: uint32_t when numel < 2^31 (so i + the grid's stride cannot wrap),
// cheaper to divide; int64_t otherwise. Input offsets are always 64-bit (a large stride times a coordinate).
template <typename E, typename I>
__global__ void StridedCopyKernel(const E* __restrict__ in, E* __restrict__ out, StridedArgs a) {
  const I n = static_cast<I>(a.numel);
  const I step = static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x); i < n; i += step) {
    I rem = i;
    int64_t off = a.base;
    bool inside = true;
    for (int d = a.rank - 1; d >= 0; --d) {
      const I dim = static_cast<I>(a.dims[d]);
      const I c = rem % dim;
      rem /= dim;
      off += static_cast<int64_t>(c) * a.strides[d];
      inside = inside && static_cast<int64_t>(c) < a.limits[d];
    }
    out[i] = inside ? in[off] : E(0);
  }
}

void Launch(const void* in, int64_t base, const StridedShape& s, void* out, size_t esz, void* stream) {
  if (s.numel == 0) return;
  Require(in && out, "strided copy: null pointer");
  StridedArgs a{};
  a.rank = static_cast<int>(s.dims.size());
  a.numel = s.numel;
  a.base = base;
  for (int d = 0; d < a.rank; ++d) {
    a.dims[d] = s.dims[static_cast<size_t>(d)];
    a.strides[d] = s.strides[static_cast<size_t>(d)];
    a.limits[d] = s.limits[static_cast<size_t>(d)];
  }
  const int64_t blocks = (s.numel + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
  const bool small = s.numel < (int64_t{1} << 31);
  detail::DispatchBits(esz, "strided copy", [&](auto tag) {
    using E = decltype(tag);
    const E* src = static_cast<const E*>(in);
    E* dst = static_cast<E*>(out);
    if (small)
      StridedCopyKernel<E, uint32_t><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(src, dst, a);
    else
      StridedCopyKernel<E, int64_t><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(src, dst, a);
  });
  CheckLaunch("StridedCopy");
}

}  // namespace

StridedShape SimplifyStrided(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                             const std::vector<int64_t>& limits) {
  Require(strides.size() == dims.size() && (limits.empty() || limits.size() == dims.size()),
          "SimplifyStrided: dims, strides and limits differ in length");
  StridedShape s;
  for (size_t d = 0; d < dims.size(); ++d) {
    Require(dims[d] >= 0, "SimplifyStrided: a negative dim");
    const int64_t lim = limits.empty() ? dims[d] : limits[d];
    Require(lim >= 0 && lim <= dims[d], "SimplifyStrided: a limit outside [0, dim]");
    s.numel *= dims[d];
  }
  if (s.numel == 0) return StridedShape{{}, {}, {}, 0};
  for (size_t d = 0; d < dims.size(); ++d) {
    const int64_t lim = limits.empty() ? dims[d] : limits[d];
    // A size-1 axis moves no counter; dropped unless its limit (0) zeroes everything along it.
    if (dims[d] == 1 && lim == 1) continue;
    if (!s.dims.empty()) {
      int64_t& od = s.dims.back();
      int64_t& os = s.strides.back();
      int64_t& ol = s.limits.back();
      // The inner axis continues the outer one's walk (c_outer * dims + c_inner is one counter) and never clips.
      if (os == strides[d] * dims[d] && lim == dims[d]) {
        od *= dims[d];
        ol *= dims[d];
        os = strides[d];
        continue;
      }
    }
    s.dims.push_back(dims[d]);
    s.strides.push_back(strides[d]);
    s.limits.push_back(lim);
  }
  Require(static_cast<int>(s.dims.size()) <= kStridedCopyMaxRank,
          "SimplifyStrided: more than 16 axes remain after merging");
  return s;
}

std::vector<int64_t> ExpandStrides(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims) {
  Require(in_dims.size() <= out_dims.size(), "Expand: the input has a higher rank than the output");
  const size_t lead = out_dims.size() - in_dims.size();
  std::vector<int64_t> strides(out_dims.size(), 0);
  int64_t s = 1;
  for (size_t k = in_dims.size(); k-- > 0;) {
    const int64_t i = in_dims[k], o = out_dims[lead + k];
    Require(i >= 0 && o >= 0, "Expand: a negative dim");
    if (i != 1 && i != o)
      throw std::invalid_argument("Expand: input dim " + std::to_string(k) + " (" + std::to_string(i) +
                                  ") does not broadcast to " + std::to_string(o));
    strides[lead + k] = i == 1 ? 0 : s;  // an input dim of 1 repeats its one element
    s *= i;
  }
  return strides;
}

void StridedCopy(const void* in, int64_t base, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                 const std::vector<int64_t>& limits, void* out, size_t esz, void* stream) {
  Require(esz == 1 || esz == 2 || esz == 4 || esz == 8, "StridedCopy: element size must be 1, 2, 4 or 8 bytes");
  Launch(in, base, SimplifyStrided(dims, strides, limits), out, esz, stream);
}

void Expand(const void* in, const std::vector<int64_t>& in_dims, void* out, const std::vector<int64_t>& out_dims,
            size_t esz, void* stream) {
  Require(esz == 1 || esz == 2 || esz == 4 || esz == 8, "Expand: element size must be 1, 2, 4 or 8 bytes");
  Launch(in, 0, SimplifyStrided(out_dims, ExpandStrides(in_dims, out_dims)), out, esz, stream);
}

void Tile(const void* in, const std::vector<int64_t>& in_dims, const std::vector<int64_t>& repeats, void* out,
          size_t esz, void* stream) {
  Require(esz == 1 || esz == 2 || esz == 4 || esz == 8, "Tile: element size must be 1, 2, 4 or 8 bytes");
  Require(repeats.size() == in_dims.size(), "Tile: repeats and the input rank differ");
  Require(in_dims.size() <= 8, "Tile: input rank above 8");
  // out viewed as [r0, d0, r1, d1, ...]: each repeat axis re-reads the input (stride 0).
  std::vector<int64_t> dims, strides(2 * in_dims.size());
  int64_t s = 1;
  for (size_t k = in_dims.size(); k-- > 0;) {
    Require(repeats[k] >= 0 && in_dims[k] >= 0, "Tile: a negative dim or repeat");
    strides[2 * k] = 0;
    strides[2 * k + 1] = s;
    s *= in_dims[k];
  }
  for (size_t k = 0; k < in_dims.size(); ++k) {
    dims.push_back(repeats[k]);
    dims.push_back(in_dims[k]);
  }
  Launch(in, 0, SimplifyStrided(dims, strides), out, esz, stream);
}

}  // namespace ot::cuda
