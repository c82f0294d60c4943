#include "cpu_ops/slice.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cpu_ops/broadcast.h"
#include "cpu_ops/parallel_split.h"

namespace ot::cpu {
namespace {

constexpr size_t kParallelBytes = 1 << 18;  // below this a copy runs on the calling thread
constexpr int64_t kChunkBytes = 1 << 16;    // bytes per task of a parallel copy

template <typename T>
void FillT(T* dst, int64_t n, T v) {
  std::fill(dst, dst + n, v);
}

// Copies n elements from src (stride s elements) to contiguous dst.
void CopyRow(const uint8_t* src, int64_t s, uint8_t* dst, int64_t n, size_t esz) {
  if (s == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * esz);
    return;
  }
  if (s == 0) {
    FillElements(dst, n, src, esz);
    return;
  }
  switch (esz) {
    case 1:
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i * s];
      break;
    case 2: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      auto* p = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) d[i] = p[i * s];
      break;
    }
    case 4: {
      auto* d = reinterpret_cast<uint32_t*>(dst);
      auto* p = reinterpret_cast<const uint32_t*>(src);
      for (int64_t i = 0; i < n; ++i) d[i] = p[i * s];
      break;
    }
    case 8: {
      auto* d = reinterpret_cast<uint64_t*>(dst);
      auto* p = reinterpret_cast<const uint64_t*>(src);
      for (int64_t i = 0; i < n; ++i) d[i] = p[i * s];
      break;
    }
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * esz, src + i * s * static_cast<int64_t>(esz), esz);
  }
}

}  // namespace

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

int64_t NumElementsOf(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

void CopyBytes(void* dst, const void* src, size_t n) {
  if (n == 0 || dst == src) return;
  if (n < kParallelBytes) {
    std::memcpy(dst, src, n);
    return;
  }
  ForFixedChunks(static_cast<int64_t>(n), kChunkBytes, [&](int64_t b, int64_t e) {
    std::memcpy(static_cast<uint8_t*>(dst) + b, static_cast<const uint8_t*>(src) + b, static_cast<size_t>(e - b));
  });
}

void FillElements(void* dst, int64_t n, const void* value, size_t esz) {
  if (n <= 0) return;
  switch (esz) {
    case 1:
      std::memset(dst, *static_cast<const uint8_t*>(value), static_cast<size_t>(n));
      return;
    case 2: {
      uint16_t v;
      std::memcpy(&v, value, 2);
      FillT(static_cast<uint16_t*>(dst), n, v);
      return;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, value, 4);
      FillT(static_cast<uint32_t*>(dst), n, v);
      return;
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, value, 8);
      FillT(static_cast<uint64_t*>(dst), n, v);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(static_cast<uint8_t*>(dst) + i * esz, value, esz);
  }
}

void StridedCopy(const void* in, int64_t base, void* out, size_t esz, std::vector<int64_t> dims,
                 std::vector<int64_t> in_strides) {
  for (int64_t d : dims)
    if (d == 0) return;
  const auto* src = static_cast<const uint8_t*>(in) + base * static_cast<int64_t>(esz);
  auto* dst = static_cast<uint8_t*>(out);
  if (dims.empty()) {
    std::memcpy(dst, src, esz);
    return;
  }
  std::vector<std::vector<int64_t>> strides{std::move(in_strides), ContiguousStrides(dims)};
  CoalesceDims(dims, strides);
  const std::vector<int64_t>& is = strides[0];
  const int rank = static_cast<int>(dims.size());
  const int64_t n = dims[rank - 1];
  const int64_t s = is[rank - 1];
  int64_t rows = 1;
  for (int k = 0; k + 1 < rank; ++k) rows *= dims[k];
  if (rows == 1 && s == 1) {
    CopyBytes(dst, src, static_cast<size_t>(n) * esz);
    return;
  }
  const int64_t eszi = static_cast<int64_t>(esz);
  // Rows [r0, r1): an odometer over the outer dims keeps the input offset without divisions in the loop. Short
  // contiguous rows of a power-of-two size (attention's heads, [b, T, h, 16] -> [b, h, T, 16]: 64 bytes) are copied
  // with the size known to the compiler -- a few vector moves in place of a memcpy call per row ([32, 32, 4, 16]
  // -> [32, 4, 32, 16]: 20-30 -> 8-10 us).
  auto rows_of = [&](auto fixed, int64_t r0, int64_t r1) {
    constexpr size_t kFixed = decltype(fixed)::value;
    std::vector<int64_t> idx(rank, 0);
    int64_t off = 0, rem = r0;
    for (int k = rank - 2; k >= 0; --k) {
      idx[k] = rem % dims[k];
      rem /= dims[k];
      off += idx[k] * is[k];
    }
    if constexpr (kFixed > 0) {
      // Runs along the second-innermost axis in a loop of their own, its stride in a local: the byte stores
      // would otherwise make the compiler reload the odometer's vectors after every row.
      const int64_t inner_dim = rank >= 2 ? dims[rank - 2] : 1, inner_step = rank >= 2 ? is[rank - 2] * eszi : 0;
      for (int64_t r = r0; r < r1;) {
        const int64_t run = std::min(r1 - r, inner_dim - (rank >= 2 ? idx[rank - 2] : 0));
        const uint8_t* sp = src + off * eszi;
        uint8_t* dp = dst + r * static_cast<int64_t>(kFixed);
        // Rows a few hundred bytes apart defeat the hardware prefetcher (a channels-last activation's channel
        // slice: 128 of every 896 bytes): each row is asked for kAhead rows before it is copied.
        constexpr int64_t kAhead = 16;
        const int64_t ahead = std::max<int64_t>(0, run - kAhead);
        int64_t q = 0;
        for (; q < ahead; ++q, sp += inner_step, dp += kFixed) {
          for (size_t b = 0; b < kFixed; b += 64) __builtin_prefetch(sp + kAhead * inner_step + b);
          std::memcpy(dp, sp, kFixed);
        }
        for (; q < run; ++q, sp += inner_step, dp += kFixed) std::memcpy(dp, sp, kFixed);
        r += run;
        for (int k = rank - 2; k >= 0; --k) {  // the odometer advanced by `run` rows: the last carries over
          const int64_t step = k == rank - 2 ? run : 1;
          off += step * is[k];
          idx[k] += step;
          if (idx[k] < dims[k]) break;
          off -= idx[k] * is[k];
          idx[k] = 0;
        }
      }
    } else {
      for (int64_t r = r0; r < r1; ++r) {
        CopyRow(src + off * eszi, s, dst + r * n * eszi, n, esz);
        for (int k = rank - 2; k >= 0; --k) {
          off += is[k];
          if (++idx[k] < dims[k]) break;
          off -= idx[k] * is[k];
          idx[k] = 0;
        }
      }
    }
  };
  const int64_t fixed_bytes = s == 1 ? n * eszi : 0;
  auto do_rows = [&](int64_t r0, int64_t r1) {
    switch (fixed_bytes) {
      case 16:
        rows_of(std::integral_constant<size_t, 16>{}, r0, r1);
        break;
      case 32:
        rows_of(std::integral_constant<size_t, 32>{}, r0, r1);
        break;
      case 64:
        rows_of(std::integral_constant<size_t, 64>{}, r0, r1);
        break;
      case 128:
        rows_of(std::integral_constant<size_t, 128>{}, r0, r1);
        break;
      default:
        rows_of(std::integral_constant<size_t, 0>{}, r0, r1);
        break;
    }
  };
  ForRowChunks(rows, n * eszi, do_rows);
}

void Slice(const void* in, void* out, size_t esz, const std::vector<int64_t>& in_dims,
           const std::vector<int64_t>& starts, const std::vector<int64_t>& steps,
           const std::vector<int64_t>& out_dims) {
  std::vector<int64_t> cs = ContiguousStrides(in_dims);
  std::vector<int64_t> strides(in_dims.size());
  int64_t base = 0;
  for (size_t k = 0; k < in_dims.size(); ++k) {
    strides[k] = cs[k] * steps[k];
    if (out_dims[k] > 0) base += starts[k] * cs[k];
  }
  StridedCopy(in, base, out, esz, out_dims, std::move(strides));
}

void SliceBackward(const void* in, void* out, size_t esz, const std::vector<int64_t>& in_dims,
                   const std::vector<int64_t>& starts, const std::vector<int64_t>& steps,
                   const std::vector<int64_t>& out_dims) {
  const int64_t eszi = static_cast<int64_t>(esz);
  const int64_t out_n = NumElementsOf(out_dims), in_n = NumElementsOf(in_dims);
  auto* dst = static_cast<uint8_t*>(out);
  if (in_n == out_n && std::all_of(steps.begin(), steps.end(), [](int64_t st) { return st == 1; })) {
    // Every element taken in order (a full slice with steps of 1).
    CopyBytes(dst, in, static_cast<size_t>(in_n * eszi));
    return;
  }
  // Zeros first (the whole output: the taken elements are overwritten below), in parallel chunks when large.
  const size_t zero_bytes = static_cast<size_t>(out_n * eszi);
  if (zero_bytes < kParallelBytes) {
    std::memset(dst, 0, zero_bytes);
  } else {
    ForFixedChunks(static_cast<int64_t>(zero_bytes), kChunkBytes,
                   [&](int64_t b, int64_t e) { std::memset(dst + b, 0, static_cast<size_t>(e - b)); });
  }
  if (in_n == 0) return;
  // The taken elements: in's row-major order, out's strides (a step multiplies its axis' stride).
  std::vector<int64_t> cs = ContiguousStrides(out_dims);
  std::vector<int64_t> dims = in_dims, os(in_dims.size());
  int64_t base = 0;
  for (size_t k = 0; k < in_dims.size(); ++k) {
    os[k] = cs[k] * steps[k];
    base += starts[k] * cs[k];
  }
  if (dims.empty()) {
    std::memcpy(dst + base * eszi, in, esz);
    return;
  }
  std::vector<std::vector<int64_t>> strides{std::move(os), ContiguousStrides(dims)};
  CoalesceDims(dims, strides);
  const std::vector<int64_t>& ost = strides[0];
  const int rank = static_cast<int>(dims.size());
  const int64_t n = dims[rank - 1], s = ost[rank - 1];
  int64_t rows = 1;
  for (int k = 0; k + 1 < rank; ++k) rows *= dims[k];
  const auto* src = static_cast<const uint8_t*>(in);
  auto do_rows = [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> idx(rank, 0);
    int64_t off = base, rem = r0;
    for (int k = rank - 2; k >= 0; --k) {
      idx[k] = rem % dims[k];
      rem /= dims[k];
      off += idx[k] * ost[k];
    }
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* sp = src + r * n * eszi;
      uint8_t* dp = dst + off * eszi;
      if (s == 1) {
        std::memcpy(dp, sp, static_cast<size_t>(n * eszi));
      } else {
        for (int64_t i = 0; i < n; ++i) std::memcpy(dp + i * s * eszi, sp + i * eszi, esz);
      }
      for (int k = rank - 2; k >= 0; --k) {
        off += ost[k];
        if (++idx[k] < dims[k]) break;
        off -= idx[k] * ost[k];
        idx[k] = 0;
      }
    }
  };
  ForRowChunks(rows, n * eszi, do_rows);
}

}  // namespace ot::cpu
