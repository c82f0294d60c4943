#include "cpu_ops/concat.h"

#include <algorithm>
#include <cstring>

#include "cpu_ops/parallel_split.h"
#include "cpu_ops/slice.h"

namespace ot::cpu {

void Concat(const std::vector<const void*>& ins, const std::vector<int64_t>& row_bytes, void* out, int64_t outer) {
  int64_t total = 0;
  for (int64_t b : row_bytes) total += b;
  if (outer == 1) {  // one big copy per input
    int64_t off = 0;
    for (size_t k = 0; k < ins.size(); ++k) {
      CopyBytes(static_cast<uint8_t*>(out) + off, ins[k], static_cast<size_t>(row_bytes[k]));
      off += row_bytes[k];
    }
    return;
  }
  ForRowChunks(outer, total, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      uint8_t* d = static_cast<uint8_t*>(out) + o * total;
      for (size_t k = 0; k < ins.size(); ++k) {
        if (row_bytes[k] == 0) continue;
        std::memcpy(d, static_cast<const uint8_t*>(ins[k]) + o * row_bytes[k], static_cast<size_t>(row_bytes[k]));
        d += row_bytes[k];
      }
    }
  });
}

void Split(const void* in, const std::vector<void*>& outs, const std::vector<int64_t>& row_bytes, int64_t outer) {
  int64_t total = 0;
  for (int64_t b : row_bytes) total += b;
  if (outer == 1) {
    int64_t off = 0;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (outs[k]) CopyBytes(outs[k], static_cast<const uint8_t*>(in) + off, static_cast<size_t>(row_bytes[k]));
      off += row_bytes[k];
    }
    return;
  }
  ForRowChunks(outer, total, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const uint8_t* s = static_cast<const uint8_t*>(in) + o * total;
      for (size_t k = 0; k < outs.size(); ++k) {
        if (outs[k] && row_bytes[k] > 0)
          std::memcpy(static_cast<uint8_t*>(outs[k]) + o * row_bytes[k], s, static_cast<size_t>(row_bytes[k]));
        s += row_bytes[k];
      }
    }
  });
}

}  // namespace ot::cpu
