#include "cpu_ops/broadcast.h"

namespace ot::cpu {

std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims) {
  const size_t rank = out_dims.size();
  std::vector<int64_t> s(rank, 0);
  const size_t off = rank - in_dims.size();
  int64_t stride = 1;
  for (size_t i = in_dims.size(); i-- > 0;) {
    s[off + i] = in_dims[i] == 1 ? 0 : stride;
    stride *= in_dims[i];
  }
  return s;
}

void CoalesceDims(std::vector<int64_t>& dims, std::vector<std::vector<int64_t>>& strides) {
  if (dims.empty()) return;
  std::vector<int64_t> nd{dims[0]};
  std::vector<std::vector<int64_t>> ns(strides.size());
  for (size_t k = 0; k < strides.size(); ++k) ns[k] = {strides[k][0]};
  for (size_t d = 1; d < dims.size(); ++d) {
    bool merge = true;
    for (size_t k = 0; k < strides.size(); ++k)
      if (ns[k].back() != strides[k][d] * dims[d]) merge = false;
    if (dims[d] == 1) {
      continue;  // a size-1 dim contributes nothing to offsets
    }
    if (nd.back() == 1) {
      nd.back() = dims[d];
      for (size_t k = 0; k < strides.size(); ++k) ns[k].back() = strides[k][d];
      continue;
    }
    if (merge) {
      nd.back() *= dims[d];
      for (size_t k = 0; k < strides.size(); ++k) ns[k].back() = strides[k][d];
    } else {
      nd.push_back(dims[d]);
      for (size_t k = 0; k < strides.size(); ++k) ns[k].push_back(strides[k][d]);
    }
  }
  dims = std::move(nd);
  strides = std::move(ns);
}

}  // namespace ot::cpu
