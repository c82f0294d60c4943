#include "cpu_ops/gather.h"

#include <algorithm>
#include <cstring>

#include "cpu_ops/broadcast.h"
#include "cpu_ops/parallel_split.h"
#include "cpu_ops/slice.h"

namespace ot::cpu {
namespace {

inline int64_t Wrap(int64_t i, int64_t dim) { return i < 0 ? i + dim : i; }

}  // namespace

template <typename I>
int64_t FindBadIndex(const I* idx, int64_t n, int64_t dim) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = static_cast<int64_t>(idx[i]);
    if (v < -dim || v >= dim) return i;
  }
  return -1;
}

template <typename I>
int64_t FindBadIndexND(const I* idx, int64_t n, const std::vector<int64_t>& dims) {
  const int64_t k = static_cast<int64_t>(dims.size());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = static_cast<int64_t>(idx[t * k + j]);
      if (v < -dims[j] || v >= dims[j]) return t * k + j;
    }
  return -1;
}

template <typename I>
void Gather(const void* data, const I* idx, int64_t n, void* out, int64_t outer, int64_t axis_dim,
            int64_t inner_bytes) {
  const auto* src = static_cast<const uint8_t*>(data);
  auto* dst = static_cast<uint8_t*>(out);
  ForRowChunks(outer * n, inner_bytes, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t o = r / n, j = r % n;
      int64_t i = Wrap(static_cast<int64_t>(idx[j]), axis_dim);
      std::memcpy(dst + r * inner_bytes, src + (o * axis_dim + i) * inner_bytes, static_cast<size_t>(inner_bytes));
    }
  });
}

template <typename I>
void GatherElements(const void* data, const std::vector<int64_t>& data_dims, const I* idx,
                    const std::vector<int64_t>& idx_dims, int axis, void* out, size_t esz) {
  const int64_t n = NumElementsOf(idx_dims);
  if (n == 0) return;
  std::vector<int64_t> ds = ContiguousStrides(data_dims);
  const int64_t axis_stride = ds[axis], axis_dim = data_dims[axis];
  ds[axis] = 0;
  const auto* src = static_cast<const uint8_t*>(data);
  auto* dst = static_cast<uint8_t*>(out);
  const int64_t e = static_cast<int64_t>(esz);
  std::vector<std::vector<int64_t>> strides{ds};
  ForRowChunks(n, e, [&](int64_t i0, int64_t i1) {
    ForEachBroadcast(idx_dims, strides, i0, i1, [&](int64_t i, const int64_t* off) {
      int64_t j = Wrap(static_cast<int64_t>(idx[i]), axis_dim);
      std::memcpy(dst + i * e, src + (off[0] + j * axis_stride) * e, esz);
    });
  });
}

template <typename I>
void GatherND(const void* data, const std::vector<int64_t>& data_dims, const I* idx,
              const std::vector<int64_t>& idx_dims, int batch_dims, void* out, size_t esz) {
  const int q = static_cast<int>(idx_dims.size());
  const int64_t k = idx_dims[q - 1];
  int64_t batch = 1, tuples = 1, slice = 1;
  for (int d = 0; d < batch_dims; ++d) batch *= idx_dims[d];
  for (int d = batch_dims; d < q - 1; ++d) tuples *= idx_dims[d];
  for (size_t d = batch_dims + k; d < data_dims.size(); ++d) slice *= data_dims[d];
  const std::vector<int64_t> ds = ContiguousStrides(data_dims);
  const int64_t batch_stride = batch_dims > 0 ? ds[batch_dims - 1] : 0;
  const int64_t e = static_cast<int64_t>(esz), slice_bytes = slice * e;
  const auto* src = static_cast<const uint8_t*>(data);
  auto* dst = static_cast<uint8_t*>(out);
  ForRowChunks(batch * tuples, slice_bytes, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t off = (t / tuples) * batch_stride;
      for (int64_t j = 0; j < k; ++j)
        off += Wrap(static_cast<int64_t>(idx[t * k + j]), data_dims[batch_dims + j]) * ds[batch_dims + j];
      std::memcpy(dst + t * slice_bytes, src + off * e, static_cast<size_t>(slice_bytes));
    }
  });
}

#define OT_GATHER_INSTANTIATE(I)                                                                                   \
  template int64_t FindBadIndex<I>(const I*, int64_t, int64_t);                                                    \
  template int64_t FindBadIndexND<I>(const I*, int64_t, const std::vector<int64_t>&);                              \
  template void Gather<I>(const void*, const I*, int64_t, void*, int64_t, int64_t, int64_t);                       \
  template void GatherElements<I>(const void*, const std::vector<int64_t>&, const I*, const std::vector<int64_t>&, \
                                  int, void*, size_t);                                                             \
  template void GatherND<I>(const void*, const std::vector<int64_t>&, const I*, const std::vector<int64_t>&, int,  \
                            void*, size_t);
OT_GATHER_INSTANTIATE(int32_t)
OT_GATHER_INSTANTIATE(int64_t)
#undef OT_GATHER_INSTANTIATE

}  // namespace ot::cpu
