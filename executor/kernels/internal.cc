// CPU kernels of the internal ops (graph/ops/internal.cc).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu_ops/broadcast.h"
#include "cpu_ops/reduce.h"
#include "executor/kernel_registry.h"
#include "graph/graph.h"
#include "graph/tensor.h"

namespace ot {

namespace {

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

KernelInfo ReduceToShapeKernel(const KernelContext& ctx) {
  const std::vector<int64_t> in = ctx.in(0).dims, out = ctx.out(0).dims;
  const DataType t = ctx.in(0).dtype;
  if (!IsFloat(t)) ctx.Unsupported("ReduceToShape of " + DataTypeName(t));
  std::vector<int64_t> strides = cpu::BroadcastStrides(out, in);
  const int64_t n = NumElements(in), m = NumElements(out);
  // Whole leading axes reduced, the trailing ones kept (a bias gradient: [B, T, N] -> [N]): a sum of n / m rows of
  // m contiguous elements, column by column in row order.
  std::vector<int64_t> core(out.begin(), out.end());
  while (!core.empty() && core.front() == 1) core.erase(core.begin());
  const bool rows = m > 0 && n > m && in.size() >= core.size() &&
                    std::equal(core.begin(), core.end(), in.end() - static_cast<std::ptrdiff_t>(core.size()));
  // Leading axes kept, middle ones reduced, trailing ones kept ([N, H, W, C] -> [N, 1, 1, C]: a squeeze-and-excite
  // scale's gradient on channels-last activations): per leading index, a sum of rows as above.
  int64_t lead = 1, mid = 1, cols = 1;
  bool batched = false;
  if (!rows && m > 0 && n > m) {
    std::vector<int64_t> o(in.size() - std::min(in.size(), out.size()), 1);
    o.insert(o.end(), out.begin(), out.end());
    if (o.size() == in.size()) {
      size_t i = 0;
      for (; i < in.size() && o[i] == in[i] && in[i] != 1; ++i) lead *= in[i];
      for (; i < in.size() && o[i] == 1; ++i) mid *= in[i];
      for (; i < in.size() && o[i] == in[i]; ++i) cols *= in[i];
      batched = i == in.size() && lead > 1 && mid > 1;
    }
  }
  KernelInfo k;
  k.fn = [=](const KernelIO& io) {
    DispatchDType(t, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        const T* g = io.In<T>(0);
        T* y = io.Out<T>(0);
        if (batched) {
          cpu::SumRowsToColumnsBatched<T>(g, lead, mid, cols, y);
          return;
        }
        if (n == m) {
          if (y != g) std::memcpy(y, g, static_cast<size_t>(n) * sizeof(T));
          return;
        }
        if (rows) {
          // Each column summed over the rows in order, in double (the same order and type as below, so the same
          // bits; also GemmSum's sum, executor/kernels/linalg.cc).
          cpu::SumRowsToColumns<T>(g, n / m, m, y);
          return;
        }
        // Sequential accumulation in a fixed order (deterministic), in double.
        std::vector<double> acc(static_cast<size_t>(m), 0.0);
        cpu::ForEachBroadcast(in, {strides}, 0, n, [&](int64_t i, const int64_t* off) {
          acc[off[0]] += static_cast<double>(static_cast<Acc<T>>(g[i]));
        });
        for (int64_t j = 0; j < m; ++j) y[j] = static_cast<T>(static_cast<Acc<T>>(acc[j]));
      }
    });
  };
  // To the same element count (the shapes differ only by leading 1s): the gradient's bytes, unchanged -- the
  // memory plan may make the output the input's memory (in place or a view; the memcpy above is then skipped).
  if (n == m && ctx.out(0).dtype == t) {
    k.inplace.push_back({0, 0});
    k.views.push_back({0, 0});
  }
  return k;
}

KernelInfo ReluGradKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (!IsFloat(t) || ctx.in(1).dtype != t) ctx.Unsupported("ReluGrad of " + DataTypeName(t));
  if (ctx.in(0).dims != ctx.in(1).dims) ctx.Unsupported("ReluGrad with broadcasting");
  const int64_t n = ctx.in(0).numel();
  KernelInfo k;
  k.fn = [=](const KernelIO& io) {
    DispatchDType(t, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        const T* dy = io.In<T>(0);
        const T* y = io.In<T>(1);
        T* dx = io.Out<T>(0);
        // Element-wise: split into fixed blocks of 32K elements across the threads.
        if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
          // y > 0 on the bits, no conversion: positive finite or +inf is 1 <= bits <= +inf's bits (sign clear,
          // not zero, not NaN); dY is copied bit for bit (the select rounds nothing).
          const uint16_t inf_bits = std::is_same_v<T, float16> ? 0x7c00 : 0x7f80;
          const uint16_t* yb = reinterpret_cast<const uint16_t*>(y);
          const uint16_t* db = reinterpret_cast<const uint16_t*>(dy);
          uint16_t* xb = reinterpret_cast<uint16_t*>(dx);
          tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 15), [&](const tbb::blocked_range<int64_t>& r) {
            // Pointers copied into restrict locals and both operands loaded unconditionally: the loop is a
            // branchless select the compiler vectorizes (through the closure it reloaded them every element).
            const uint16_t* __restrict ys = yb + r.begin();
            const uint16_t* __restrict ds = db + r.begin();
            uint16_t* __restrict xs = xb + r.begin();
            const int64_t len = r.end() - r.begin();
            for (int64_t i = 0; i < len; ++i) {
              const uint16_t d = ds[i];
              xs[i] = static_cast<uint16_t>(ys[i] - 1u) < inf_bits ? d : uint16_t{0};
            }
          });
        } else {
          // Same select for float/double: y > 0 is false for NaN, dY copied unchanged (an exact select).
          tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 15), [&](const tbb::blocked_range<int64_t>& r) {
            const T* __restrict ys = y + r.begin();
            const T* __restrict ds = dy + r.begin();
            T* __restrict xs = dx + r.begin();
            const int64_t len = r.end() - r.begin();
            for (int64_t i = 0; i < len; ++i) {
              const T d = ds[i];
              xs[i] = ys[i] > T(0) ? d : T(0);
            }
          });
        }
      }
    });
  };
  return k;
}

}  // namespace

void RegisterInternalKernels(KernelRegistry& r) {
  r.Register("ReduceToShape", ReduceToShapeKernel, kInternalDomain);
  r.Register("ReluGrad", ReluGradKernel, kInternalDomain);
}

}  // namespace ot
