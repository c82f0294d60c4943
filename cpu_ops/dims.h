// Small helpers over dims vectors shared by the convolution, pooling and GEMM kernels.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace ot::cpu {

// Product of the dims (1 for none).
inline int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Row-major strides of dims (a 0-sized dim counts as 1 so strides stay valid).
inline std::vector<int64_t> Contiguous(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * std::max<int64_t>(d[i + 1], 1);
  return s;
}

// 1-D/2-D/3-D geometry padded to 3 dims with leading `fill`s, so one loop nest serves every rank.
inline std::vector<int64_t> Pad3(const std::vector<int64_t>& v, int64_t fill) {
  std::vector<int64_t> r(3 - v.size(), fill);
  r.insert(r.end(), v.begin(), v.end());
  return r;
}

}  // namespace ot::cpu
