#include "cpu_ops/shape_misc.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "cpu_ops/parallel_split.h"
#include "cpu_ops/slice.h"
#include "kernel_common/half.h"

namespace ot::cpu {

void Trilu(const void* in, void* out, int64_t batch, int64_t rows, int64_t cols, int64_t k, bool upper, size_t esz) {
  const int64_t e = static_cast<int64_t>(esz);
  CopyBytes(out, in, static_cast<size_t>(batch * rows * cols * e));
  auto* d = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < rows; ++i) {
      uint8_t* row = d + (b * rows + i) * cols * e;
      // Zeroed columns: upper keeps j >= i + k, so zero [0, i + k); lower keeps j <= i + k, zero (i + k, cols).
      if (upper) {
        int64_t z = std::clamp<int64_t>(i + k, 0, cols);
        std::memset(row, 0, static_cast<size_t>(z * e));
      } else {
        int64_t z = std::clamp<int64_t>(i + k + 1, 0, cols);
        std::memset(row + z * e, 0, static_cast<size_t>((cols - z) * e));
      }
    }
}

void OneHot(const int64_t* idx, int64_t outer, int64_t inner, int64_t depth, const void* off, const void* on, void* out,
            size_t esz) {
  FillElements(out, outer * depth * inner, off, esz);
  auto* d = static_cast<uint8_t*>(out);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t v = idx[o * inner + i];
      if (v < 0) v += depth;
      if (v < 0 || v >= depth) continue;
      std::memcpy(d + ((o * depth + v) * inner + i) * esz, on, esz);
    }
}

void EyeLike(void* out, int64_t rows, int64_t cols, int64_t k, const void* one, size_t esz) {
  std::memset(out, 0, static_cast<size_t>(rows * cols) * esz);
  auto* d = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < rows; ++i) {
    int64_t j = i + k;
    if (j >= 0 && j < cols) std::memcpy(d + (i * cols + j) * esz, one, esz);
  }
}

template <typename T>
void Range(T start, T delta, int64_t n, T* out) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    const float s = static_cast<float>(start), d = static_cast<float>(delta);
    for (int64_t i = 0; i < n; ++i) out[i] = T(s + static_cast<float>(i) * d);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  }
}

namespace {
template <typename T>
inline auto Key(T v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return static_cast<float>(v);
  else
    return v;
}
}  // namespace

template <typename T>
void TopK(const T* in, int64_t outer, int64_t axis_dim, int64_t inner, int64_t k, bool largest, bool sorted, T* values,
          int64_t* indices) {
  const int64_t lines = outer * inner;
  auto do_lines = [&](int64_t l0, int64_t l1) {
    std::vector<int64_t> order(axis_dim);
    for (int64_t l = l0; l < l1; ++l) {
      const int64_t o = l / inner, i = l % inner;
      const T* src = in + o * axis_dim * inner + i;
      std::iota(order.begin(), order.end(), 0);
      auto cmp = [&](int64_t a, int64_t b) {
        auto va = Key(src[a * inner]), vb = Key(src[b * inner]);
        // NaN orders above every number (first when largest, last when smallest), keeping a strict order.
        const bool na = va != va, nb = vb != vb;
        if (na || nb) return na && nb ? a < b : (largest ? na : nb);
        if (va != vb) return largest ? va > vb : va < vb;
        return a < b;
      };
      // Selection then sort gives the same order whether or not `sorted` is set (a valid unsorted order too).
      std::partial_sort(order.begin(), order.begin() + k, order.end(), cmp);
      (void)sorted;
      for (int64_t j = 0; j < k; ++j) {
        values[(o * k + j) * inner + i] = src[order[j] * inner];
        indices[(o * k + j) * inner + i] = order[j];
      }
    }
  };
  if (lines * axis_dim < (1 << 16)) {
    do_lines(0, lines);
    return;
  }
  ForFixedChunks(lines, (1 << 14) / std::max<int64_t>(1, axis_dim), do_lines);
}

#define OT_MISC_INSTANTIATE(T)               \
  template void Range<T>(T, T, int64_t, T*); \
  template void TopK<T>(const T*, int64_t, int64_t, int64_t, int64_t, bool, bool, T*, int64_t*);
OT_MISC_INSTANTIATE(float)
OT_MISC_INSTANTIATE(double)
OT_MISC_INSTANTIATE(int16_t)
OT_MISC_INSTANTIATE(int32_t)
OT_MISC_INSTANTIATE(int64_t)
#undef OT_MISC_INSTANTIATE
template void Range<float16>(float16, float16, int64_t, float16*);
template void Range<bfloat16>(bfloat16, bfloat16, int64_t, bfloat16*);
template void TopK<float16>(const float16*, int64_t, int64_t, int64_t, int64_t, bool, bool, float16*, int64_t*);
template void TopK<bfloat16>(const bfloat16*, int64_t, int64_t, int64_t, int64_t, bool, bool, bfloat16*, int64_t*);
template void TopK<int8_t>(const int8_t*, int64_t, int64_t, int64_t, int64_t, bool, bool, int8_t*, int64_t*);
template void TopK<uint8_t>(const uint8_t*, int64_t, int64_t, int64_t, int64_t, bool, bool, uint8_t*, int64_t*);
template void TopK<uint16_t>(const uint16_t*, int64_t, int64_t, int64_t, int64_t, bool, bool, uint16_t*, int64_t*);
template void TopK<uint32_t>(const uint32_t*, int64_t, int64_t, int64_t, int64_t, bool, bool, uint32_t*, int64_t*);
template void TopK<uint64_t>(const uint64_t*, int64_t, int64_t, int64_t, int64_t, bool, bool, uint64_t*, int64_t*);

}  // namespace ot::cpu
