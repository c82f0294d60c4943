// Internal to cpu_ops: the broadcast loops the binary/ternary kernels share (templates over storage types and
// a scalar function). Fast paths: all operands contiguous (one flat loop), and runs where each operand steps
// by 1 or is constant (scalar and row broadcasts).
#pragma once
#include <algorithm>

#include "cpu_ops/elementwise_binary.h"
#include "cpu_ops/elementwise_common.h"
#include "cpu_ops/half_convert.h"

namespace ot::cpu {

template <typename A, typename B, typename O, typename F>
void BinaryLoop(const A* a, const B* b, O* out, const BroadcastPlan& p, F f) {
  if (p.all_contiguous) {
    ParallelChunks(p.numel, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) out[i] = f(a[i], b[i]);
    });
    return;
  }
  ForEachRun(p, [&](int64_t o, int64_t len, const int64_t* off, const int64_t* st) {
    const A* pa = a + off[0];
    const B* pb = b + off[1];
    O* po = out + o;
    const int64_t sa = st[0], sb = st[1];
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < len; ++i) po[i] = f(pa[i], pb[i]);
    } else if (sa == 1 && sb == 0) {
      const B bv = *pb;
      for (int64_t i = 0; i < len; ++i) po[i] = f(pa[i], bv);
    } else if (sa == 0 && sb == 1) {
      const A av = *pa;
      for (int64_t i = 0; i < len; ++i) po[i] = f(av, pb[i]);
    } else {
      for (int64_t i = 0; i < len; ++i) po[i] = f(pa[i * sa], pb[i * sb]);
    }
  });
}

// BinaryLoop for half storage T (float16/bfloat16) and g(float, float) -> float: each run is cut into tiles
// that are widened to float (a broadcast operand once per run), combined by the fp32 loop and rounded once when
// stored.
template <typename T, typename G>
void BinaryLoopHalf(const T* a, const T* b, T* out, const BroadcastPlan& p, G g) {
  auto tiles = [&](const T* pa, int64_t sa, const T* pb, int64_t sb, T* po, int64_t len) {
    float fa[kHalfTile], fb[kHalfTile];
    const float av = static_cast<float>(*pa), bv = static_cast<float>(*pb);
    for (int64_t t = 0; t < len; t += kHalfTile) {
      const int64_t n = std::min(kHalfTile, len - t);
      if (sa == 1)
        LoadFloats(pa + t, fa, n);
      else if (sa != 0)
        for (int64_t i = 0; i < n; ++i) fa[i] = static_cast<float>(pa[(t + i) * sa]);
      if (sb == 1)
        LoadFloats(pb + t, fb, n);
      else if (sb != 0)
        for (int64_t i = 0; i < n; ++i) fb[i] = static_cast<float>(pb[(t + i) * sb]);
      if (sa == 0 && sb == 0) {
        for (int64_t i = 0; i < n; ++i) fa[i] = g(av, bv);
      } else if (sa == 0) {
        for (int64_t i = 0; i < n; ++i) fa[i] = g(av, fb[i]);
      } else if (sb == 0) {
        for (int64_t i = 0; i < n; ++i) fa[i] = g(fa[i], bv);
      } else {
        for (int64_t i = 0; i < n; ++i) fa[i] = g(fa[i], fb[i]);
      }
      StoreFloats(fa, po + t, n);
    }
  };
  if (p.all_contiguous) {
    ParallelChunks(p.numel, [&](int64_t s, int64_t e) { tiles(a + s, 1, b + s, 1, out + s, e - s); });
    return;
  }
  ForEachRun(p, [&](int64_t o, int64_t len, const int64_t* off, const int64_t* st) {
    tiles(a + off[0], st[0], b + off[1], st[1], out + o, len);
  });
}

// Comparison/logic half of Binary (defined in elementwise_compare.cc).
template <typename T>
void CompareBinary(BinaryOp op, const T* a, const T* b, bool* out, const BroadcastPlan& plan);

}  // namespace ot::cpu
