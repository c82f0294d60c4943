#include "cpu_ops/einsum.h"

#include <tbb/parallel_for.h>

#include <type_traits>

#include "kernel_common/half.h"

namespace ot::cpu {

namespace {
template <typename T, typename Acc>
Acc ToAcc(T v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<Acc>(v);
}
}  // namespace

template <typename T>
void StridedReduceCopy(const T* src, const std::vector<int64_t>& out_dims, const std::vector<int64_t>& out_strides,
                       const std::vector<int64_t>& red_dims, const std::vector<int64_t>& red_strides, T* dst) {
  using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  int64_t total = 1, red_total = 1;
  for (int64_t d : out_dims) total *= d;
  for (int64_t d : red_dims) red_total *= d;
  if (total == 0) return;
  const int orank = static_cast<int>(out_dims.size()), rrank = static_cast<int>(red_dims.size());
  // Offsets of the reduction index space, precomputed once (small in practice).
  std::vector<int64_t> red_off(red_total, 0);
  for (int64_t r = 0; r < red_total; ++r) {
    int64_t rem = r, off = 0;
    for (int e = rrank - 1; e >= 0; --e) {
      off += (rem % red_dims[e]) * red_strides[e];
      rem /= red_dims[e];
    }
    red_off[r] = off;
  }
  const int64_t grain = 1024;
  tbb::parallel_for(int64_t{0}, (total + grain - 1) / grain, [&](int64_t chunk) {
    const int64_t begin = chunk * grain, end = std::min(total, begin + grain);
    std::vector<int64_t> idx(orank, 0);
    int64_t rem = begin, base = 0;
    for (int d = orank - 1; d >= 0; --d) {
      idx[d] = rem % out_dims[d];
      rem /= out_dims[d];
      base += idx[d] * out_strides[d];
    }
    for (int64_t o = begin; o < end; ++o) {
      if (red_total == 1) {
        dst[o] = src[base + red_off[0]];
      } else {
        Acc acc = 0;
        for (int64_t r = 0; r < red_total; ++r) acc += ToAcc<T, Acc>(src[base + red_off[r]]);
        dst[o] = static_cast<T>(acc);
      }
      for (int d = orank - 1; d >= 0; --d) {
        ++idx[d];
        base += out_strides[d];
        if (idx[d] < out_dims[d]) break;
        base -= idx[d] * out_strides[d];
        idx[d] = 0;
      }
    }
  });
}

#define OT_INST(T)                                                                                       \
  template void StridedReduceCopy<T>(const T*, const std::vector<int64_t>&, const std::vector<int64_t>&, \
                                     const std::vector<int64_t>&, const std::vector<int64_t>&, T*);
OT_INST(float)
OT_INST(double)
OT_INST(float16)
OT_INST(bfloat16)
OT_INST(int32_t)
OT_INST(int64_t)
OT_INST(uint32_t)
OT_INST(uint64_t)
#undef OT_INST

}  // namespace ot::cpu
