#include "cpu_ops/transpose.h"

#include <algorithm>
#include <cstring>

#include "cpu_ops/broadcast.h"
#include "cpu_ops/parallel_split.h"
#include "cpu_ops/slice.h"

namespace ot::cpu {
namespace {

constexpr int64_t kTile = 32;

// out[c * os + r] = in[r * is + c] for r, c < 4, four-byte elements: four 16-byte loads, the 4x4 transpose in
// registers (eight shuffles), four 16-byte stores. A whole tile of these is about 1.6x as fast as the scalar
// copy through a tile buffer below ([32, 32, 64] -> [32, 64, 32]: 23 -> 14 us).
template <typename T>
inline void Transpose4x4(const T* in, int64_t is, T* out, int64_t os) {
  typedef uint32_t V4 __attribute__((vector_size(16)));
  V4 r0, r1, r2, r3;
  __builtin_memcpy(&r0, in, 16);
  __builtin_memcpy(&r1, in + is, 16);
  __builtin_memcpy(&r2, in + 2 * is, 16);
  __builtin_memcpy(&r3, in + 3 * is, 16);
  const V4 t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5), t1 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
  const V4 t2 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5), t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
  const V4 c0 = __builtin_shufflevector(t0, t2, 0, 1, 4, 5), c1 = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
  const V4 c2 = __builtin_shufflevector(t1, t3, 0, 1, 4, 5), c3 = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
  __builtin_memcpy(out, &c0, 16);
  __builtin_memcpy(out + os, &c1, 16);
  __builtin_memcpy(out + 2 * os, &c2, 16);
  __builtin_memcpy(out + 3 * os, &c3, 16);
}

// dims/in_strides are in output order; `j` is the output axis whose input stride is 1, and the last output
// axis has output stride 1. Each task transposes one kTile x kTile tile of one outer index.
template <typename T>
void TiledTranspose(const T* in, T* out, const std::vector<int64_t>& dims, const std::vector<int64_t>& is, int j) {
  const int rank = static_cast<int>(dims.size());
  const int last = rank - 1;
  const std::vector<int64_t> os = ContiguousStrides(dims);
  std::vector<int> outer_axes;
  for (int k = 0; k < rank; ++k)
    if (k != j && k != last) outer_axes.push_back(k);
  int64_t outer = 1;
  for (int k : outer_axes) outer *= dims[k];
  const int64_t X = dims[j], Y = dims[last];
  const int64_t sy = is[last], ox = os[j];
  const int64_t tx = (X + kTile - 1) / kTile, ty = (Y + kTile - 1) / kTile;
  const int64_t tasks = outer * tx * ty;
  auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t o = t / (tx * ty), rem = t % (tx * ty);
      int64_t x0 = (rem / ty) * kTile, y0 = (rem % ty) * kTile;
      int64_t ib = 0, ob = 0;
      for (int a = static_cast<int>(outer_axes.size()) - 1; a >= 0; --a) {
        int k = outer_axes[a];
        int64_t i = o % dims[k];
        o /= dims[k];
        ib += i * is[k];
        ob += i * os[k];
      }
      const int64_t x1 = std::min(X, x0 + kTile), y1 = std::min(Y, y0 + kTile);
      if constexpr (sizeof(T) == 4) {
        if ((x1 - x0) % 4 == 0 && (y1 - y0) % 4 == 0) {
          for (int64_t y = y0; y < y1; y += 4)
            for (int64_t x = x0; x < x1; x += 4) Transpose4x4(in + ib + y * sy + x, sy, out + ob + x * ox + y, ox);
          continue;
        }
      }
      // Read the tile row by row (contiguous in x) into a local buffer transposed, then write it out row by
      // row (contiguous in y): both sides of memory see runs, and power-of-two strides do not thrash a cache set.
      T tile[kTile][kTile];
      for (int64_t y = y0; y < y1; ++y) {
        const T* s = in + ib + y * sy;
        for (int64_t x = x0; x < x1; ++x) tile[x - x0][y - y0] = s[x];
      }
      for (int64_t x = x0; x < x1; ++x) std::memcpy(out + ob + x * ox + y0, tile[x - x0], (y1 - y0) * sizeof(T));
    }
  };
  if (outer * X * Y < (1 << 15)) {
    run(0, tasks);
    return;
  }
  ForFixedChunks(tasks, 16384 / (kTile * kTile), run);
}

// Batches of small contiguous matrices, dst_b = src_b^T for src_b [Y, X] row-major (out [X, Y]), where one side is
// K <= 8 elements: ShuffleNet's channel shuffle ([rows, 2, C/2] -> [rows, C/2, 2]) and its gradient. The tiled path
// spends its time on 32 x K tiles; here the small side is a compile-time loop and the long side the vectorized one.
template <typename T, int K>
void SmallSideTranspose(const T* in, T* out, int64_t batch, int64_t X, int64_t Y) {
  const int64_t m = X * Y;
  ForFixedChunks(batch, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, m)), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const T* __restrict src = in + b * m;
      T* __restrict dst = out + b * m;
      if (Y == K) {  // interleave K rows of X
        for (int64_t x = 0; x < X; ++x)
          for (int y = 0; y < K; ++y) dst[x * K + y] = src[y * X + x];
      } else {  // X == K: split rows of K into K rows of Y
        for (int x = 0; x < K; ++x)
          for (int64_t y = 0; y < Y; ++y) dst[x * Y + y] = src[y * K + x];
      }
    }
  });
}

template <typename T>
bool SmallSide(const T* in, T* out, int64_t batch, int64_t X, int64_t Y) {
  switch (std::min(X, Y)) {
    case 2:
      SmallSideTranspose<T, 2>(in, out, batch, X, Y);
      return true;
    case 3:
      SmallSideTranspose<T, 3>(in, out, batch, X, Y);
      return true;
    case 4:
      SmallSideTranspose<T, 4>(in, out, batch, X, Y);
      return true;
    case 8:
      SmallSideTranspose<T, 8>(in, out, batch, X, Y);
      return true;
    default:
      return false;
  }
}

// The batched small-side case of Transpose, when dims/is (output order, coalesced) are [batch, X, Y] with input
// strides [X * Y, 1, X] (or [X, Y] alone); false otherwise.
bool TrySmallSide(const void* in, void* out, size_t esz, const std::vector<int64_t>& dims,
                  const std::vector<int64_t>& is) {
  const size_t r = dims.size();
  if (r < 2 || r > 3) return false;
  const int64_t X = dims[r - 2], Y = dims[r - 1], batch = r == 3 ? dims[0] : 1;
  if (is[r - 2] != 1 || is[r - 1] != X || (r == 3 && is[0] != X * Y)) return false;
  switch (esz) {
    case 2:
      return SmallSide(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), batch, X, Y);
    case 4:
      return SmallSide(static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out), batch, X, Y);
    case 8:
      return SmallSide(static_cast<const uint64_t*>(in), static_cast<uint64_t*>(out), batch, X, Y);
    default:
      return false;
  }
}

}  // namespace

void Transpose(const void* in, void* out, size_t esz, const std::vector<int64_t>& in_dims,
               const std::vector<int64_t>& perm) {
  const int rank = static_cast<int>(in_dims.size());
  const std::vector<int64_t> cs = ContiguousStrides(in_dims);
  std::vector<int64_t> dims, is;
  for (int k = 0; k < rank; ++k) {
    int64_t d = in_dims[perm[k]];
    if (d == 0) return;
    if (d == 1) continue;
    dims.push_back(d);
    is.push_back(cs[perm[k]]);
  }
  if (dims.empty()) {
    std::memcpy(out, in, esz);
    return;
  }
  std::vector<std::vector<int64_t>> strides{is, ContiguousStrides(dims)};
  CoalesceDims(dims, strides);
  is = strides[0];
  const int r = static_cast<int>(dims.size());
  int j = -1;
  for (int k = 0; k < r; ++k)
    if (is[k] == 1) j = k;
  if (j == r - 1 || j < 0) {  // innermost axis stays innermost: contiguous rows
    StridedCopy(in, 0, out, esz, dims, is);
    return;
  }
  if (TrySmallSide(in, out, esz, dims, is)) return;
  switch (esz) {
    case 1:
      TiledTranspose(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), dims, is, j);
      return;
    case 2:
      TiledTranspose(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), dims, is, j);
      return;
    case 4:
      TiledTranspose(static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out), dims, is, j);
      return;
    case 8:
      TiledTranspose(static_cast<const uint64_t*>(in), static_cast<uint64_t*>(out), dims, is, j);
      return;
    default:
      StridedCopy(in, 0, out, esz, dims, is);
  }
}

}  // namespace ot::cpu
