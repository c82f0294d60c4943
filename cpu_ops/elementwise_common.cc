#include "cpu_ops/elementwise_common.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <stdexcept>
#include <string>

#include "cpu_ops/broadcast.h"

namespace ot::cpu {

void ParallelChunks(int64_t n, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  if (n <= kElementwiseGrain) {
    f(0, n);
    return;
  }
  const int64_t chunks = (n + kElementwiseGrain - 1) / kElementwiseGrain;
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, chunks, 1),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t c = r.begin(); c < r.end(); ++c)
          f(c * kElementwiseGrain, std::min(n, (c + 1) * kElementwiseGrain));
      },
      tbb::simple_partitioner());
}

BroadcastPlan MakeBroadcastPlan(const std::vector<int64_t>& out_dims,
                                const std::vector<std::vector<int64_t>>& in_dims) {
  BroadcastPlan p;
  p.numel = 1;
  for (int64_t d : out_dims) p.numel *= d;
  p.all_contiguous = true;
  for (const auto& in : in_dims) {
    if (in.size() > out_dims.size())
      throw std::invalid_argument("broadcast: operand rank " + std::to_string(in.size()) + " exceeds output rank " +
                                  std::to_string(out_dims.size()));
    const size_t off = out_dims.size() - in.size();
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i] != out_dims[off + i] && in[i] != 1)
        throw std::invalid_argument("broadcast: operand dim " + std::to_string(in[i]) + " does not broadcast to " +
                                    std::to_string(out_dims[off + i]));
    int64_t n = 1;
    for (int64_t d : in) n *= d;
    if (n != p.numel) p.all_contiguous = false;
  }
  p.dims = out_dims;
  for (const auto& in : in_dims) p.strides.push_back(BroadcastStrides(in, out_dims));
  CoalesceDims(p.dims, p.strides);
  if (p.dims.empty()) {
    p.dims = {1};
    for (auto& s : p.strides) s = {0};
  }
  return p;
}

}  // namespace ot::cpu
