#include "cpu_ops/pad.h"

#include <algorithm>
#include <cstring>

#include "cpu_ops/parallel_split.h"
#include "cpu_ops/slice.h"

namespace ot::cpu {

int64_t PadSourceIndex(int64_t i, int64_t d, PadMode mode) {
  if (i >= 0 && i < d) return i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return i < 0 ? 0 : d - 1;
    case PadMode::kWrap:
      return ((i % d) + d) % d;
    case PadMode::kReflect: {
      if (d == 1) return 0;
      const int64_t p = 2 * (d - 1);
      i = ((i % p) + p) % p;
      return i >= d ? p - i : i;
    }
  }
  return -1;
}

void Pad(const void* in, const std::vector<int64_t>& in_dims, void* out, const std::vector<int64_t>& out_dims,
         const std::vector<int64_t>& pads_begin, PadMode mode, const void* value, size_t esz) {
  const int rank = static_cast<int>(out_dims.size());
  const int64_t total = NumElementsOf(out_dims);
  if (total == 0) return;
  if (rank == 0) {
    std::memcpy(out, in, esz);
    return;
  }
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  const int64_t e = static_cast<int64_t>(esz);
  const std::vector<int64_t> is = ContiguousStrides(in_dims);
  const int64_t n_out = out_dims[rank - 1], n_in = in_dims[rank - 1], pb = pads_begin[rank - 1];
  const int64_t rows = total / n_out;
  // The contiguous middle of each row: output [lo, hi) reads input [lo - pb, hi - pb).
  const int64_t lo = std::clamp<int64_t>(pb, 0, n_out), hi = std::clamp<int64_t>(pb + n_in, lo, n_out);
  auto do_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      uint8_t* d = dst + r * n_out * e;
      int64_t off = 0, rem = r;
      bool constant_row = false;
      for (int k = rank - 2; k >= 0; --k) {
        int64_t o = rem % out_dims[k];
        rem /= out_dims[k];
        int64_t i = PadSourceIndex(o - pads_begin[k], in_dims[k], mode);
        if (i < 0) {
          constant_row = true;
          break;
        }
        off += i * is[k];
      }
      if (constant_row) {
        FillElements(d, n_out, value, esz);
        continue;
      }
      const uint8_t* s = src + off * e;
      if (hi > lo) std::memcpy(d + lo * e, s + (lo - pb) * e, static_cast<size_t>((hi - lo) * e));
      for (int64_t o = 0; o < n_out; ++o) {
        if (o == lo && hi > lo) {
          o = hi - 1;
          continue;
        }
        int64_t i = PadSourceIndex(o - pb, n_in, mode);
        if (i < 0)
          std::memcpy(d + o * e, value, esz);
        else
          std::memcpy(d + o * e, s + i * e, esz);
      }
    }
  };
  ForRowChunks(rows, n_out * e, do_rows);
}

}  // namespace ot::cpu
