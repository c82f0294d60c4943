#include "cpu_ops/scatter_add.h"

#include <algorithm>

namespace ot::cpu {

template <typename T, typename I>
bool GatherGrad(const T* dy, const I* idx, int64_t num_idx, int64_t outer, int64_t axis_dim, int64_t inner, T* dx) {
  std::fill_n(dx, outer * axis_dim * inner, T(0));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < num_idx; ++j) {
      int64_t k = static_cast<int64_t>(idx[j]);
      if (k < 0) k += axis_dim;
      if (k < 0 || k >= axis_dim) {
        std::fill_n(dx, outer * axis_dim * inner, T(0));
        return false;
      }
      const T* src = dy + (o * num_idx + j) * inner;
      T* dst = dx + (o * axis_dim + k) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
    }
  return true;
}

template bool GatherGrad<float, int64_t>(const float*, const int64_t*, int64_t, int64_t, int64_t, int64_t, float*);
template bool GatherGrad<float, int32_t>(const float*, const int32_t*, int64_t, int64_t, int64_t, int64_t, float*);
template bool GatherGrad<double, int64_t>(const double*, const int64_t*, int64_t, int64_t, int64_t, int64_t, double*);
template bool GatherGrad<double, int32_t>(const double*, const int32_t*, int64_t, int64_t, int64_t, int64_t, double*);

}  // namespace ot::cpu
