#include "cpu_ops/norm.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cpu_ops/scalar_io.h"
#include "kernel_common/half.h"

namespace ot::cpu {

namespace {


// Tasks of about `work` elements each (a fixed split: it depends only on the sizes).
int64_t Grain(int64_t work_per_item) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(work_per_item, 1)); }

template <typename F>
void ParallelItems(int64_t items, int64_t work_per_item, F&& f) {
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, items, Grain(work_per_item)),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t i = r.begin(); i < r.end(); ++i) f(i);
      },
      tbb::simple_partitioner());
}

}  // namespace

template <typename T>
void RowMoments(int64_t rows, int64_t cols, const T* x, double* mean, double* var) {
  ParallelItems(rows, cols, [&](int64_t r) {
    const T* p = x + r * cols;
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += Load(p[j]);
    const double m = cols ? s / cols : 0.0;
    double v = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = Load(p[j]) - m;
      v += d * d;
    }
    mean[r] = m;
    var[r] = cols ? v / cols : 0.0;
  });
}

template <typename T>
void ChannelMoments(int64_t n, int64_t c, int64_t spatial, const T* x, double* mean, double* var) {
  const int64_t count = n * spatial;
  ParallelItems(c, count, [&](int64_t ch) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T* p = x + (i * c + ch) * spatial;
      for (int64_t j = 0; j < spatial; ++j) s += Load(p[j]);
    }
    const double m = count ? s / count : 0.0;
    double v = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T* p = x + (i * c + ch) * spatial;
      for (int64_t j = 0; j < spatial; ++j) {
        const double d = Load(p[j]) - m;
        v += d * d;
      }
    }
    mean[ch] = m;
    var[ch] = count ? v / count : 0.0;
  });
}

template <typename T>
void BatchNormApply(int64_t n, int64_t c, int64_t spatial, const T* x, const double* scale, const double* bias,
                    const double* mean, const double* var, double eps, T* y) {
  ParallelItems(n * c, spatial, [&](int64_t nc) {
    const int64_t ch = nc % c;
    const double a = scale[ch] / std::sqrt(var[ch] + eps), m = mean[ch], b = bias[ch];
    const T* p = x + nc * spatial;
    T* q = y + nc * spatial;
    for (int64_t j = 0; j < spatial; ++j) q[j] = Store<T>((Load(p[j]) - m) * a + b);
  });
}

template <typename T>
void LayerNorm(int64_t rows, int64_t cols, const T* x, const T* scale, const T* bias,
               const std::vector<int64_t>& scale_idx, const std::vector<int64_t>& bias_idx, double eps, T* y,
               float* mean_out, float* invstd_out) {
  ParallelItems(rows, cols, [&](int64_t r) {
    const T* p = x + r * cols;
    T* q = y + r * cols;
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += Load(p[j]);
    const double m = cols ? s / cols : 0.0;
    double v = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = Load(p[j]) - m;
      v += d * d;
    }
    const double inv = 1.0 / std::sqrt((cols ? v / cols : 0.0) + eps);
    for (int64_t j = 0; j < cols; ++j) {
      double o = (Load(p[j]) - m) * inv * Load(scale[scale_idx.empty() ? j : scale_idx[j]]);
      if (bias) o += Load(bias[bias_idx.empty() ? j : bias_idx[j]]);
      q[j] = Store<T>(o);
    }
    if (mean_out) mean_out[r] = static_cast<float>(m);
    if (invstd_out) invstd_out[r] = static_cast<float>(inv);
  });
}

template <typename T>
void InstanceNorm(int64_t n, int64_t c, int64_t spatial, const T* x, const T* scale, const T* bias, double eps,
                  T* y) {
  ParallelItems(n * c, spatial, [&](int64_t nc) {
    const int64_t ch = nc % c;
    const T* p = x + nc * spatial;
    T* q = y + nc * spatial;
    double s = 0;
    for (int64_t j = 0; j < spatial; ++j) s += Load(p[j]);
    const double m = spatial ? s / spatial : 0.0;
    double v = 0;
    for (int64_t j = 0; j < spatial; ++j) {
      const double d = Load(p[j]) - m;
      v += d * d;
    }
    const double a = Load(scale[ch]) / std::sqrt((spatial ? v / spatial : 0.0) + eps), b = Load(bias[ch]);
    for (int64_t j = 0; j < spatial; ++j) q[j] = Store<T>((Load(p[j]) - m) * a + b);
  });
}

template <typename T>
void MeanVarianceNorm(const std::vector<int64_t>& dims, const std::vector<bool>& reduce, const T* x, T* y) {
  const ReduceGeometry g = MakeReduceGeometry(dims, reduce);
  const int64_t inner = g.inner;
  if (g.out_numel() == 0 || g.count == 0) return;
  // One task per output row; the inner run is handled as a vector of statistics.
  ParallelItems(g.rows, inner * g.count, [&](int64_t row) {
    const int64_t base = RowBase(g, row);
    std::vector<double> s(inner, 0.0), s2(inner, 0.0);
    ForEachReducedRun(g, [&](int64_t off, int64_t n, int64_t stride) {
      for (int64_t k = 0; k < n; ++k) {
        const T* p = x + base + off + k * stride;
        for (int64_t j = 0; j < inner; ++j) {
          const double v = Load(p[j]);
          s[j] += v;
          s2[j] += v * v;
        }
      }
    });
    for (int64_t j = 0; j < inner; ++j) {
      const double m = s[j] / g.count;
      s[j] = m;
      s2[j] = 1.0 / (std::sqrt(std::max(0.0, s2[j] / g.count - m * m)) + 1e-9);
    }
    ForEachReducedRun(g, [&](int64_t off, int64_t n, int64_t stride) {
      for (int64_t k = 0; k < n; ++k) {
        const T* p = x + base + off + k * stride;
        T* q = y + base + off + k * stride;
        for (int64_t j = 0; j < inner; ++j) q[j] = Store<T>((Load(p[j]) - s[j]) * s2[j]);
      }
    });
  });
}

template <typename T>
void LpNorm(int p, int64_t outer, int64_t n, int64_t inner, const T* x, T* y) {
  ParallelItems(outer * inner, n, [&](int64_t o) {
    const int64_t i = o / inner, j = o % inner;
    const T* a = x + i * n * inner + j;
    T* b = y + i * n * inner + j;
    double norm = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double v = Load(a[k * inner]);
      norm += p == 1 ? std::fabs(v) : v * v;
    }
    if (p == 2) norm = std::sqrt(norm);
    const double inv = norm == 0 ? 0.0 : 1.0 / norm;
    for (int64_t k = 0; k < n; ++k) b[k * inner] = Store<T>(Load(a[k * inner]) * inv);
  });
}

#define OT_INSTANTIATE(T)                                                                                    \
  template void RowMoments<T>(int64_t, int64_t, const T*, double*, double*);                                 \
  template void ChannelMoments<T>(int64_t, int64_t, int64_t, const T*, double*, double*);                    \
  template void BatchNormApply<T>(int64_t, int64_t, int64_t, const T*, const double*, const double*,         \
                                  const double*, const double*, double, T*);                                 \
  template void LayerNorm<T>(int64_t, int64_t, const T*, const T*, const T*, const std::vector<int64_t>&,    \
                             const std::vector<int64_t>&, double, T*, float*, float*);                       \
  template void InstanceNorm<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, double, T*);        \
  template void MeanVarianceNorm<T>(const std::vector<int64_t>&, const std::vector<bool>&, const T*, T*);    \
  template void LpNorm<T>(int, int64_t, int64_t, int64_t, const T*, T*);
OT_INSTANTIATE(float)
OT_INSTANTIATE(double)
OT_INSTANTIATE(float16)
OT_INSTANTIATE(bfloat16)
#undef OT_INSTANTIATE

}  // namespace ot::cpu
