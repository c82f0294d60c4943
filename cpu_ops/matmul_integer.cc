#include "cpu_ops/matmul_integer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ot::cpu {

template <typename T, typename D>
void SubtractZeroPoint(const T* src, int64_t n, const T* zp, int64_t zp_count, int64_t inner, D* dst) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = static_cast<D>(src[i]) - (zp ? static_cast<D>(zp[(i / inner) % zp_count]) : D(0));
}

template <typename T, typename D>
void SubtractZeroPointCols(const T* src, int64_t n, const T* zp, int64_t zp_count, int64_t k, int64_t cols, D* dst) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = static_cast<D>(src[i]) - (zp ? static_cast<D>(zp[((i / (k * cols)) * cols + i % cols) % zp_count]) : D(0));
}

template <typename Q>
void Requantize(const double* acc, int64_t n, const float* mult, int64_t mult_count, int64_t inner, int32_t zp, Q* y) {
  const float lo = static_cast<float>(std::numeric_limits<Q>::min()),
              hi = static_cast<float>(std::numeric_limits<Q>::max());
  for (int64_t i = 0; i < n; ++i) {
    const float v =
        std::nearbyint(static_cast<float>(acc[i]) * mult[(i / inner) % mult_count]) + static_cast<float>(zp);
    y[i] = static_cast<Q>(std::clamp(v, lo, hi));
  }
}

template void SubtractZeroPoint<uint8_t, int64_t>(const uint8_t*, int64_t, const uint8_t*, int64_t, int64_t, int64_t*);
template void SubtractZeroPoint<int8_t, int64_t>(const int8_t*, int64_t, const int8_t*, int64_t, int64_t, int64_t*);
template void SubtractZeroPoint<uint8_t, double>(const uint8_t*, int64_t, const uint8_t*, int64_t, int64_t, double*);
template void SubtractZeroPoint<int8_t, double>(const int8_t*, int64_t, const int8_t*, int64_t, int64_t, double*);
template void SubtractZeroPointCols<uint8_t, int64_t>(const uint8_t*, int64_t, const uint8_t*, int64_t, int64_t,
                                                      int64_t, int64_t*);
template void SubtractZeroPointCols<int8_t, int64_t>(const int8_t*, int64_t, const int8_t*, int64_t, int64_t, int64_t,
                                                     int64_t*);
template void Requantize<uint8_t>(const double*, int64_t, const float*, int64_t, int64_t, int32_t, uint8_t*);
template void Requantize<int8_t>(const double*, int64_t, const float*, int64_t, int64_t, int32_t, int8_t*);

}  // namespace ot::cpu
