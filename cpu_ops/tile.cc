#include "cpu_ops/tile.h"

#include "cpu_ops/broadcast.h"
#include "cpu_ops/slice.h"

namespace ot::cpu {

void Expand(const void* in, const std::vector<int64_t>& in_dims, void* out, const std::vector<int64_t>& out_dims,
            size_t esz) {
  StridedCopy(in, 0, out, esz, out_dims, BroadcastStrides(in_dims, out_dims));
}

void Tile(const void* in, const std::vector<int64_t>& in_dims, const std::vector<int64_t>& repeats, void* out,
          size_t esz) {
  const std::vector<int64_t> cs = ContiguousStrides(in_dims);
  std::vector<int64_t> dims, strides;
  for (size_t k = 0; k < in_dims.size(); ++k) {
    dims.push_back(repeats[k]);
    strides.push_back(0);
    dims.push_back(in_dims[k]);
    strides.push_back(cs[k]);
  }
  StridedCopy(in, 0, out, esz, dims, strides);
}

}  // namespace ot::cpu
