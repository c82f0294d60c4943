#include "cpu_ops/scatter.h"

#include <algorithm>
#include <type_traits>

#include "cpu_ops/broadcast.h"
#include "cpu_ops/slice.h"
#include "kernel_common/half.h"

namespace ot::cpu {
namespace {

template <typename T>
inline T Combine(T a, T b, ScatterReduction red) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    return T(static_cast<float>(Combine(static_cast<float>(a), static_cast<float>(b), red)));
  } else if constexpr (std::is_same_v<T, bool>) {
    switch (red) {
      case ScatterReduction::kAdd:
      case ScatterReduction::kMax:
        return a || b;
      case ScatterReduction::kMul:
      case ScatterReduction::kMin:
        return a && b;
      default:
        return b;
    }
  } else {
    switch (red) {
      case ScatterReduction::kAdd:
        return static_cast<T>(a + b);
      case ScatterReduction::kMul:
        return static_cast<T>(a * b);
      case ScatterReduction::kMax:
        return std::max(a, b);
      case ScatterReduction::kMin:
        return std::min(a, b);
      default:
        return b;
    }
  }
}

inline int64_t Wrap(int64_t i, int64_t dim) { return i < 0 ? i + dim : i; }

}  // namespace

template <typename T, typename I>
void ScatterElements(const T* data, const std::vector<int64_t>& data_dims, const I* idx, const T* upd,
                     const std::vector<int64_t>& idx_dims, int axis, ScatterReduction red, T* out) {
  CopyBytes(out, data, static_cast<size_t>(NumElementsOf(data_dims)) * sizeof(T));
  const int64_t n = NumElementsOf(idx_dims);
  if (n == 0) return;
  std::vector<int64_t> ds = ContiguousStrides(data_dims);
  const int64_t axis_stride = ds[axis], axis_dim = data_dims[axis];
  ds[axis] = 0;
  std::vector<std::vector<int64_t>> strides{ds};
  ForEachBroadcast(idx_dims, strides, 0, n, [&](int64_t i, const int64_t* off) {
    T& o = out[off[0] + Wrap(static_cast<int64_t>(idx[i]), axis_dim) * axis_stride];
    o = Combine(o, upd[i], red);
  });
}

template <typename T, typename I>
void ScatterND(const T* data, const std::vector<int64_t>& data_dims, const I* idx, const std::vector<int64_t>& idx_dims,
               const T* upd, ScatterReduction red, T* out) {
  CopyBytes(out, data, static_cast<size_t>(NumElementsOf(data_dims)) * sizeof(T));
  const int q = static_cast<int>(idx_dims.size());
  const int64_t k = idx_dims[q - 1];
  int64_t tuples = 1, slice = 1;
  for (int d = 0; d < q - 1; ++d) tuples *= idx_dims[d];
  for (size_t d = k; d < data_dims.size(); ++d) slice *= data_dims[d];
  const std::vector<int64_t> ds = ContiguousStrides(data_dims);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) off += Wrap(static_cast<int64_t>(idx[t * k + j]), data_dims[j]) * ds[j];
    T* o = out + off;
    const T* u = upd + t * slice;
    if (red == ScatterReduction::kNone) {
      std::copy(u, u + slice, o);
    } else {
      for (int64_t s = 0; s < slice; ++s) o[s] = Combine(o[s], u[s], red);
    }
  }
}

#define OT_SCATTER_INSTANTIATE2(T, I)                                                                         \
  template void ScatterElements<T, I>(const T*, const std::vector<int64_t>&, const I*, const T*,              \
                                      const std::vector<int64_t>&, int, ScatterReduction, T*);                \
  template void ScatterND<T, I>(const T*, const std::vector<int64_t>&, const I*, const std::vector<int64_t>&, \
                                const T*, ScatterReduction, T*);
#define OT_SCATTER_INSTANTIATE(T) OT_SCATTER_INSTANTIATE2(T, int32_t) OT_SCATTER_INSTANTIATE2(T, int64_t)
OT_SCATTER_INSTANTIATE(float)
OT_SCATTER_INSTANTIATE(double)
OT_SCATTER_INSTANTIATE(float16)
OT_SCATTER_INSTANTIATE(bfloat16)
OT_SCATTER_INSTANTIATE(int8_t)
OT_SCATTER_INSTANTIATE(int16_t)
OT_SCATTER_INSTANTIATE(int32_t)
OT_SCATTER_INSTANTIATE(int64_t)
OT_SCATTER_INSTANTIATE(uint8_t)
OT_SCATTER_INSTANTIATE(uint16_t)
OT_SCATTER_INSTANTIATE(uint32_t)
OT_SCATTER_INSTANTIATE(uint64_t)
OT_SCATTER_INSTANTIATE(bool)
#undef OT_SCATTER_INSTANTIATE
#undef OT_SCATTER_INSTANTIATE2

}  // namespace ot::cpu
