// Data kernels: see data_kernels.h.
#include <cuda_runtime.h>

#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda_ops/data_kernels.h"
#include "cuda_ops/launch_util.cuh"
#include "kernel_common/half.h"

namespace ot::cuda {

namespace {

using detail::Align256;
using detail::BlockSum;
using detail::CheckLaunch;
using detail::DispatchFloat;
using detail::DispatchIndex;
using detail::Require;

constexpr int kMaxRank = 8;
constexpr int kTile = 32, kTileRows = 8;

void CheckCuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
unsigned Clamp(int64_t v, int64_t hi) { return static_cast<unsigned>(v < 1 ? 1 : (v < hi ? v : hi)); }
unsigned GridFlat(int64_t n, int threads) { return Clamp((n + threads - 1) / threads, int64_t{1} << 20); }

template <typename T>
__device__ __forceinline__ float ToF(T v) {
  return static_cast<float>(v);
}
template <typename T>
__device__ __forceinline__ T FromF(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return T(v);
}

// ---- Transpose ----------------------------------------------------------------------------------------------------

struct TileArgs {
  int64_t dim_a, dim_b;  // A: the input axis innermost in the output; B: the innermost input axis
  int64_t in_stride_a;   // B's input stride is 1
  int64_t out_stride_b;  // A's output stride is 1
  int64_t tiles_a, tiles_b;
  int nrest;
  int64_t rest_count;
  int64_t rest_dims[kMaxRank], rest_in[kMaxRank], rest_out[kMaxRank];
};

template <typename E>
__global__ void TransposeTiledKernel(const E* in, E* out, TileArgs a) {
  __shared__ E tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t q = blockIdx.z; q < a.rest_count; q += gridDim.z) {
    int64_t rem = q, bin = 0, bout = 0;
    for (int d = a.nrest - 1; d >= 0; --d) {
      const int64_t c = rem % a.rest_dims[d];
      rem /= a.rest_dims[d];
      bin += c * a.rest_in[d];
      bout += c * a.rest_out[d];
    }
    for (int64_t ta = blockIdx.y; ta < a.tiles_a; ta += gridDim.y)
      for (int64_t tb = blockIdx.x; tb < a.tiles_b; tb += gridDim.x) {
        const int64_t a0 = ta * kTile, b0 = tb * kTile;
        // Read: rows of A, each 32 contiguous input elements along B. tile[a offset][b offset].
        for (int i = 0; i < kTile; i += kTileRows) {
          const int64_t ia = a0 + ty + i, ib = b0 + tx;
          if (ia < a.dim_a && ib < a.dim_b) tile[ty + i][tx] = in[bin + ia * a.in_stride_a + ib];
        }
        __syncthreads();
        // Write: rows of B, each 32 contiguous output elements along A.
        for (int i = 0; i < kTile; i += kTileRows) {
          const int64_t ib = b0 + ty + i, ia = a0 + tx;
          if (ia < a.dim_a && ib < a.dim_b) out[bout + ib * a.out_stride_b + ia] = tile[tx][ty + i];
        }
        __syncthreads();
      }
  }
}

struct GeneralArgs {
  int rank;
  int64_t numel;
  int64_t out_dims[kMaxRank], in_stride_by_out[kMaxRank];
};

template <typename E>
__global__ void TransposeGeneralKernel(const E* in, E* out, GeneralArgs g) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.numel;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = i, off = 0;
    for (int k = g.rank - 1; k >= 0; --k) {
      const int64_t c = rem % g.out_dims[k];
      rem /= g.out_dims[k];
      off += c * g.in_stride_by_out[k];
    }
    out[i] = in[off];
  }
}

// ---- Gather ---------------------------------------------------------------------------------------------------------

template <typename U, typename I>
__global__ void GatherKernel(const U* data, const I* idx, int64_t num, int64_t outer, int64_t axis_dim,
                             int64_t row_units, U* out, int* bad) {
  const int64_t rows = outer * num;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o = r / num, j = r - o * num;
    int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0) k += axis_dim;
    U* dst = out + r * row_units;
    if (k < 0 || k >= axis_dim) {
      for (int64_t u = threadIdx.x; u < row_units; u += blockDim.x) dst[u] = U{};
      if (bad && threadIdx.x == 0) *bad = 1;
      continue;
    }
    const U* src = data + (o * axis_dim + k) * row_units;
    for (int64_t u = threadIdx.x; u < row_units; u += blockDim.x) dst[u] = src[u];
  }
}

// ---- GatherGrad
// -------------------------------------------------------------------------------------------------------

// keys[j] = the wrapped index (vocab for a bad one: sorted after every valid row), vals[j] = j.
template <typename I>
__global__ void GatherGradPrepKernel(const I* idx, int64_t num, int64_t vocab, uint32_t* keys, int32_t* vals,
                                     int* bad) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < num;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0) k += vocab;
    if (k < 0 || k >= vocab) {
      if (bad) *bad = 1;
      k = vocab;
    }
    keys[j] = static_cast<uint32_t>(k);
    vals[j] = static_cast<int32_t>(j);
  }
}

// Segment bounds of each row in the sorted keys (start = end = 0 for rows without entries: memset before).
__global__ void GatherGradBoundsKernel(const uint32_t* keys, int64_t num, int64_t vocab, int32_t* start, int32_t* end) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t k = keys[i];
    if (k >= static_cast<uint64_t>(vocab)) continue;
    if (i == 0 || keys[i - 1] != k) start[k] = static_cast<int32_t>(i);
    if (i == num - 1 || keys[i + 1] != k) end[k] = static_cast<int32_t>(i + 1);
  }
}

// One block per row of dx (grid-stride), one thread per element: the row's entries in sorted (= increasing j)
// order, added in float from 0.
template <typename T, typename D>
__global__ void GatherGradSumKernel(const T* dy, const int32_t* vals, const int32_t* start, const int32_t* end,
                                    int64_t vocab, int64_t dim, D* dx) {
  for (int64_t v = blockIdx.x; v < vocab; v += gridDim.x) {
    const int32_t s = start[v], e = end[v];
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      float acc = 0.f;
      for (int32_t i = s; i < e; ++i) acc += ToF(dy[static_cast<int64_t>(vals[i]) * dim + d]);
      dx[v * dim + d] = FromF<D>(acc);
    }
  }
}

struct GgWs {
  uint32_t *keys_in, *keys_out;
  int32_t *vals_in, *vals_out, *start, *end;
  void* temp;
  size_t temp_bytes;
};

size_t CubTempBytes(int64_t num) {
  size_t bytes = 0;
  CheckCuda(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint32_t*>(nullptr),
                                            static_cast<uint32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                            static_cast<int32_t*>(nullptr), static_cast<int>(num)),
            "GatherGrad: CUB temp size");
  return bytes;
}

GgWs LayoutGg(void* w, int64_t num, int64_t vocab, size_t temp_bytes) {
  char* b = static_cast<char*>(w);
  const size_t sn = Align256(static_cast<size_t>(num) * 4), sv = Align256(static_cast<size_t>(vocab) * 4);
  GgWs l;
  l.keys_in = reinterpret_cast<uint32_t*>(b);
  l.keys_out = reinterpret_cast<uint32_t*>(b + sn);
  l.vals_in = reinterpret_cast<int32_t*>(b + 2 * sn);
  l.vals_out = reinterpret_cast<int32_t*>(b + 3 * sn);
  l.start = reinterpret_cast<int32_t*>(b + 4 * sn);
  l.end = reinterpret_cast<int32_t*>(b + 4 * sn + sv);
  l.temp = b + 4 * sn + 2 * sv;
  l.temp_bytes = temp_bytes;
  return l;
}

// ---- Cast / Fill ----------------------------------------------------------------------------------------------------

template <typename F, typename T>
__global__ void CastKernel(const F* in, T* out, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = FromF<T>(ToF(in[i]));
}

template <typename E>
__global__ void FillKernel(E* out, E v, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = v;
}

}  // namespace

TransposeShape SimplifyTranspose(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& perm) {
  const int r = static_cast<int>(in_dims.size());
  Require(perm.size() == in_dims.size(), "Transpose: perm has another rank than the input");
  std::vector<char> seen(static_cast<size_t>(r), 0);
  for (int64_t p : perm) {
    Require(p >= 0 && p < r && !seen[static_cast<size_t>(p)], "Transpose: perm is not a permutation");
    seen[static_cast<size_t>(p)] = 1;
  }
  TransposeShape s;
  for (int64_t d : in_dims) {
    Require(d >= 0, "Transpose: negative dim");
    s.numel *= d;
  }
  if (s.numel == 0) return s;
  // Drop dims of 1.
  std::vector<int> map(static_cast<size_t>(r), -1);
  std::vector<int64_t> d;
  for (int a = 0; a < r; ++a)
    if (in_dims[a] != 1) {
      map[a] = static_cast<int>(d.size());
      d.push_back(in_dims[a]);
    }
  std::vector<int> p;
  for (int k = 0; k < r; ++k)
    if (in_dims[perm[k]] != 1) p.push_back(map[perm[k]]);
  // Merge runs of output axes that are consecutive input axes.
  struct Group {
    int first;
    int64_t dim;
  };
  std::vector<Group> g;
  for (size_t k = 0; k < p.size(); ++k) {
    if (k > 0 && p[k] == p[k - 1] + 1)
      g.back().dim *= d[p[k]];
    else
      g.push_back({p[k], d[p[k]]});
  }
  std::vector<int> order(g.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return g[a].first < g[b].first; });
  std::vector<int> rank(g.size());
  for (size_t q = 0; q < order.size(); ++q) rank[order[q]] = static_cast<int>(q);
  bool identity = true;
  for (size_t i = 0; i < g.size(); ++i) identity &= rank[i] == static_cast<int>(i);
  if (identity) return s;  // a copy
  for (size_t q = 0; q < order.size(); ++q) s.in_dims.push_back(g[order[q]].dim);
  for (size_t i = 0; i < g.size(); ++i) s.perm.push_back(rank[i]);
  return s;
}

void Transpose(const void* in, void* out, size_t esz, const std::vector<int64_t>& in_dims,
               const std::vector<int64_t>& perm, void* stream) {
  Require(esz == 1 || esz == 2 || esz == 4 || esz == 8, "Transpose: element size must be 1, 2, 4 or 8 bytes");
  Require(in_dims.size() <= static_cast<size_t>(kMaxRank), "Transpose: rank above 8");
  const TransposeShape s = SimplifyTranspose(in_dims, perm);
  if (s.numel == 0) return;
  Require(in && out, "Transpose: null in or out");
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (s.perm.empty()) {
    CheckCuda(cudaMemcpyAsync(out, in, static_cast<size_t>(s.numel) * esz, cudaMemcpyDeviceToDevice, st),
              "Transpose: copy");
    return;
  }
  const int r = static_cast<int>(s.perm.size());
  int64_t istr[kMaxRank], ostr[kMaxRank], ostr_in[kMaxRank];
  istr[r - 1] = 1;
  for (int a = r - 2; a >= 0; --a) istr[a] = istr[a + 1] * s.in_dims[a + 1];
  ostr[r - 1] = 1;
  for (int k = r - 2; k >= 0; --k) ostr[k] = ostr[k + 1] * s.in_dims[s.perm[k + 1]];
  for (int k = 0; k < r; ++k) ostr_in[s.perm[k]] = ostr[k];
  if (s.perm[r - 1] != r - 1) {
    TileArgs a{};
    const int A = s.perm[r - 1], B = r - 1;
    a.dim_a = s.in_dims[A];
    a.dim_b = s.in_dims[B];
    a.in_stride_a = istr[A];
    a.out_stride_b = ostr_in[B];
    a.tiles_a = (a.dim_a + kTile - 1) / kTile;
    a.tiles_b = (a.dim_b + kTile - 1) / kTile;
    a.nrest = 0;
    a.rest_count = 1;
    for (int ax = 0; ax < r; ++ax) {
      if (ax == A || ax == B) continue;
      a.rest_dims[a.nrest] = s.in_dims[ax];
      a.rest_in[a.nrest] = istr[ax];
      a.rest_out[a.nrest] = ostr_in[ax];
      a.rest_count *= s.in_dims[ax];
      ++a.nrest;
    }
    const dim3 grid(Clamp(a.tiles_b, int64_t{1} << 30), Clamp(a.tiles_a, 65535), Clamp(a.rest_count, 65535));
    detail::DispatchBits(esz, "data kernels", [&](auto tag) {
      using E = decltype(tag);
      TransposeTiledKernel<E>
          <<<grid, dim3(kTile, kTileRows), 0, st>>>(static_cast<const E*>(in), static_cast<E*>(out), a);
    });
    CheckLaunch("Transpose (tiled)");
    return;
  }
  GeneralArgs g{};
  g.rank = r;
  g.numel = s.numel;
  for (int k = 0; k < r; ++k) {
    g.out_dims[k] = s.in_dims[s.perm[k]];
    g.in_stride_by_out[k] = istr[s.perm[k]];
  }
  detail::DispatchBits(esz, "data kernels", [&](auto tag) {
    using E = decltype(tag);
    TransposeGeneralKernel<E>
        <<<GridFlat(s.numel, 256), 256, 0, st>>>(static_cast<const E*>(in), static_cast<E*>(out), g);
  });
  CheckLaunch("Transpose (general)");
}

void Gather(const void* data, int64_t outer, int64_t axis_dim, int64_t inner, size_t esz, IndexType it, const void* idx,
            int64_t num, void* out, int* bad_index, void* stream) {
  Require(outer >= 0 && axis_dim >= 0 && inner >= 0 && num >= 0, "Gather: negative size");
  Require(esz == 1 || esz == 2 || esz == 4 || esz == 8, "Gather: element size must be 1, 2, 4 or 8 bytes");
  if (outer == 0 || num == 0 || inner == 0) return;
  Require(data || axis_dim == 0, "Gather: null data");
  Require(idx && out, "Gather: null idx or out");
  const int64_t row_bytes = inner * static_cast<int64_t>(esz);
  // The widest word that divides the row and both base addresses.
  const uintptr_t addr = reinterpret_cast<uintptr_t>(data) | reinterpret_cast<uintptr_t>(out);
  int64_t unit = 16;
  while (unit > 1 && (row_bytes % unit != 0 || addr % static_cast<uintptr_t>(unit) != 0)) unit /= 2;
  const int64_t row_units = row_bytes / unit;
  int threads = 32;
  while (threads < 256 && threads < row_units) threads *= 2;
  const unsigned grid = Clamp(outer * num, int64_t{1} << 20);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  DispatchIndex(it, [&](auto itag) {
    using I = decltype(itag);
    const I* ix = static_cast<const I*>(idx);
    auto launch = [&](auto utag) {
      using U = decltype(utag);
      GatherKernel<U, I><<<grid, threads, 0, st>>>(static_cast<const U*>(data), ix, num, outer, axis_dim, row_units,
                                                   static_cast<U*>(out), bad_index);
    };
    switch (unit) {
      case 16:
        launch(uint4{});
        break;
      case 8:
        launch(uint64_t{});
        break;
      case 4:
        launch(uint32_t{});
        break;
      case 2:
        launch(uint16_t{});
        break;
      default:
        launch(uint8_t{});
        break;
    }
  });
  CheckLaunch("Gather");
}

size_t GatherGradWorkspaceBytes(int64_t num, int64_t vocab) {
  Require(num >= 0 && vocab >= 0 && num < (int64_t{1} << 31) && vocab < (int64_t{1} << 31),
          "GatherGradWorkspaceBytes: sizes must lie in [0, 2^31)");
  return 4 * Align256(static_cast<size_t>(num) * 4) + 2 * Align256(static_cast<size_t>(vocab) * 4) +
         Align256(CubTempBytes(num));
}

void GatherGrad(FloatType dyt, const void* dy, IndexType it, const void* idx, int64_t num, int64_t vocab, int64_t dim,
                FloatType dxt, void* dx, int* bad_index, void* workspace, size_t workspace_bytes, void* stream) {
  Require(num >= 0 && vocab >= 0 && dim >= 0, "GatherGrad: negative size");
  Require(num < (int64_t{1} << 31) && vocab < (int64_t{1} << 31), "GatherGrad: num and vocab must be below 2^31");
  if (vocab == 0 || dim == 0) return;
  Require(dx != nullptr, "GatherGrad: null dx");
  Require(num == 0 || (dy && idx), "GatherGrad: null dy or idx");
  const size_t temp = CubTempBytes(num);
  const size_t need =
      4 * Align256(static_cast<size_t>(num) * 4) + 2 * Align256(static_cast<size_t>(vocab) * 4) + Align256(temp);
  Require(workspace && workspace_bytes >= need, "GatherGrad: workspace too small (GatherGradWorkspaceBytes)");
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const GgWs w = LayoutGg(workspace, num, vocab, temp);
  CheckCuda(cudaMemsetAsync(w.start, 0, static_cast<size_t>(vocab) * 4, st), "GatherGrad: memset");
  CheckCuda(cudaMemsetAsync(w.end, 0, static_cast<size_t>(vocab) * 4, st), "GatherGrad: memset");
  if (num > 0) {
    DispatchIndex(it, [&](auto itag) {
      using I = decltype(itag);
      GatherGradPrepKernel<I>
          <<<GridFlat(num, 256), 256, 0, st>>>(static_cast<const I*>(idx), num, vocab, w.keys_in, w.vals_in, bad_index);
    });
    CheckLaunch("GatherGrad prep");
    int end_bit = 1;
    while (end_bit < 32 && (uint64_t{1} << end_bit) <= static_cast<uint64_t>(vocab)) ++end_bit;  // keys <= vocab
    size_t tb = w.temp_bytes;
    CheckCuda(cub::DeviceRadixSort::SortPairs(w.temp, tb, w.keys_in, w.keys_out, w.vals_in, w.vals_out,
                                              static_cast<int>(num), 0, end_bit, st),
              "GatherGrad: radix sort");
    GatherGradBoundsKernel<<<GridFlat(num, 256), 256, 0, st>>>(w.keys_out, num, vocab, w.start, w.end);
    CheckLaunch("GatherGrad bounds");
  }
  int threads = 32;
  while (threads < 256 && threads < dim) threads *= 2;
  const unsigned grid = Clamp(vocab, int64_t{1} << 20);
  DispatchFloat(dyt, [&](auto tag) {
    using T = decltype(tag);
    DispatchFloat(dxt, [&](auto dtag) {
      using D = decltype(dtag);
      GatherGradSumKernel<T, D><<<grid, threads, 0, st>>>(static_cast<const T*>(dy), w.vals_out, w.start, w.end, vocab,
                                                          dim, static_cast<D*>(dx));
    });
  });
  CheckLaunch("GatherGrad sum");
}

void Cast(FloatType from, const void* in, FloatType to, void* out, int64_t n, void* stream) {
  Require(n >= 0, "Cast: negative size");
  if (n == 0) return;
  Require(in && out, "Cast: null in or out");
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (from == to) {
    if (in != out)
      CheckCuda(cudaMemcpyAsync(out, in, static_cast<size_t>(n) * FloatTypeSize(from), cudaMemcpyDeviceToDevice, st),
                "Cast: copy");
    return;
  }
  DispatchFloat(from, [&](auto ftag) {
    using F = decltype(ftag);
    DispatchFloat(to, [&](auto ttag) {
      using T = decltype(ttag);
      CastKernel<F, T><<<GridFlat(n, 256), 256, 0, st>>>(static_cast<const F*>(in), static_cast<T*>(out), n);
    });
  });
  CheckLaunch("Cast");
}

void Fill(void* out, size_t esz, uint64_t bits, int64_t n, void* stream) {
  Require(n >= 0, "Fill: negative size");
  if (n == 0) return;
  Require(out != nullptr, "Fill: null out");
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  detail::DispatchBits(esz, "data kernels", [&](auto tag) {
    using E = decltype(tag);
    FillKernel<E><<<GridFlat(n, 256), 256, 0, st>>>(static_cast<E*>(out), static_cast<E>(bits), n);
  });
  CheckLaunch("Fill");
}

void FillFloat(FloatType t, void* out, float value, int64_t n, void* stream) {
  uint64_t bits = 0;
  switch (t) {
    case FloatType::kF32:
      bits = FloatBits(value);
      break;
    case FloatType::kF16:
      bits = FloatToHalfBits(value);
      break;
    case FloatType::kBF16:
      bits = FloatToBf16Bits(value);
      break;
  }
  Fill(out, FloatTypeSize(t), bits, n, stream);
}

}  // namespace ot::cuda
