#include "cpu_ops/elementwise_cast.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu_ops/elementwise_common.h"
#include "cpu_ops/half_convert.h"

namespace ot::cpu {
namespace {

template <typename D, typename S>
D Convert(S v) {
  if constexpr (std::is_same_v<S, D>) {
    return v;
  } else if constexpr (std::is_same_v<D, bool>) {
    return static_cast<ComputeType<S>>(v) != ComputeType<S>(0);
  } else if constexpr (std::is_same_v<S, bool>) {
    return static_cast<D>(static_cast<ComputeType<D>>(v ? 1 : 0));
  } else if constexpr (kIsFloat<D>) {
    if constexpr (kIsHalf<D> && (kIsHalf<S> || std::is_same_v<S, float> || sizeof(S) <= 2))
      return D(static_cast<float>(static_cast<ComputeType<S>>(v)));  // exact in float: one rounding
    else if constexpr (kIsHalf<D>)
      return D(RoundToOddFloat(static_cast<double>(v)));
    else
      return static_cast<D>(static_cast<ComputeType<S>>(v));
  } else if constexpr (kIsFloat<S>) {  // floating -> integer
    const double d = static_cast<double>(static_cast<ComputeType<S>>(v));
    if (std::isnan(d)) return D(0);
    if constexpr (std::is_same_v<D, uint64_t>) {
      if (d >= 18446744073709551616.0) return std::numeric_limits<uint64_t>::max();
      if (d >= 0) return static_cast<uint64_t>(d);
    }
    if (d >= 9223372036854775808.0 || d < -9223372036854775808.0)
      return static_cast<D>(std::numeric_limits<int64_t>::min());
    return static_cast<D>(static_cast<int64_t>(d));
  } else {  // integer -> integer
    return static_cast<D>(v);
  }
}

}  // namespace

template <typename S, typename D>
void Cast(const S* x, D* y, int64_t n) {
  if constexpr (std::is_same_v<S, D>) {
    if (static_cast<const void*>(x) != static_cast<void*>(y) && n > 0) std::memcpy(y, x, n * sizeof(S));
  } else if constexpr ((kIsHalf<S> || std::is_same_v<S, float>)&&(kIsHalf<D> || std::is_same_v<D, float>)) {
    // float <-> half and half <-> half: through float tiles with the vectorized conversions (widening is exact,
    // so each element is rounded once).
    ParallelChunks(n, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<S, float>) {
        StoreFloats(x + b, y + b, e - b);
      } else if constexpr (std::is_same_v<D, float>) {
        LoadFloats(x + b, y + b, e - b);
      } else {
        float buf[kHalfTile];
        for (int64_t t = b; t < e; t += kHalfTile) {
          const int64_t len = std::min(kHalfTile, e - t);
          LoadFloats(x + t, buf, len);
          StoreFloats(buf, y + t, len);
        }
      }
    });
  } else {
    ParallelChunks(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = Convert<D>(x[i]);
    });
  }
}

#define OT_CAST_INST(S, D) template void Cast<S, D>(const S*, D*, int64_t);
// An instantiation list: clang-format 14 reflows it differently on each run.
// clang-format off
#define OT_CAST_FROM(S)                                                                                 \
  OT_CAST_INST(S, float) OT_CAST_INST(S, double) OT_CAST_INST(S, float16) OT_CAST_INST(S, bfloat16)     \
  OT_CAST_INST(S, int8_t) OT_CAST_INST(S, int16_t) OT_CAST_INST(S, int32_t) OT_CAST_INST(S, int64_t)    \
  OT_CAST_INST(S, uint8_t) OT_CAST_INST(S, uint16_t) OT_CAST_INST(S, uint32_t) OT_CAST_INST(S, uint64_t) \
  OT_CAST_INST(S, bool)
// clang-format on
OT_CAST_FROM(float)
OT_CAST_FROM(double)
OT_CAST_FROM(float16)
OT_CAST_FROM(bfloat16)
OT_CAST_FROM(int8_t)
OT_CAST_FROM(int16_t)
OT_CAST_FROM(int32_t)
OT_CAST_FROM(int64_t)
OT_CAST_FROM(uint8_t)
OT_CAST_FROM(uint16_t)
OT_CAST_FROM(uint32_t)
OT_CAST_FROM(uint64_t)
OT_CAST_FROM(bool)

}  // namespace ot::cpu
