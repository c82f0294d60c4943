#include "cpu_ops/loss.h"

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu_ops/scalar_io.h"
#include "cpu_ops/softmax.h"
#include "kernel_common/half.h"

namespace ot::cpu {

namespace {

// The reduction both losses share, in one order: position i's term is -value(i, t) * w[t] for its target t (ignored:
// 0, and no weight in the mean's divisor); a target outside [0, c) throws.
template <typename T, typename I, typename Value>
void ReduceNll(LossReduction red, int64_t count, int64_t c, const I* target, const T* weight, int64_t ignore_index,
               Value value, T* out) {
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t = static_cast<int64_t>(target[i]);
    double l = 0;
    if (t != ignore_index) {
      if (t < 0 || t >= c)
        throw std::out_of_range("target " + std::to_string(t) + " at element " + std::to_string(i) +
                                " is outside [0, " + std::to_string(c) + ")");
      const double w = weight ? Load(weight[t]) : 1.0;
      l = -value(i, t) * w;
      wsum += w;
    }
    if (red == LossReduction::kNone)
      out[i] = Store<T>(l);
    else
      sum += l;
  }
  if (red == LossReduction::kSum) out[0] = Store<T>(sum);
  if (red == LossReduction::kMean) out[0] = Store<T>(sum / wsum);
}

}  // namespace

template <typename T, typename I>
void NllLoss(LossReduction red, int64_t n, int64_t c, int64_t d, const T* input, const I* target, const T* weight,
             int64_t ignore_index, T* out) {
  ReduceNll<T, I>(
      red, n * d, c, target, weight, ignore_index,
      [&](int64_t q, int64_t t) { return Load(input[((q / d) * c + t) * d + q % d]); }, out);
}

template <typename T, typename I>
void SoftmaxCrossEntropyLoss(LossReduction red, int64_t n, int64_t c, int64_t d, const T* scores, const I* target,
                             const T* weight, int64_t ignore_index, T* out, T* log_prob) {
  if constexpr (std::is_same_v<T, float>) {
    if (!log_prob && d == 1) {
      // Only the target's log-probability of each row: the same bits as the whole row's, in one read of the scores
      // instead of a read and a write of n x c log-probabilities; then NllLoss over rows of one "class".
      std::vector<int64_t> col(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t t = static_cast<int64_t>(target[i]);
        col[i] = t == ignore_index || t < 0 || t >= c ? -1 : t;  // out of range: ReduceNll throws below
      }
      std::vector<float> picked(static_cast<size_t>(n));
      LogSoftmaxPickF32(n, c, scores, col.data(), picked.data());
      ReduceNll<float, I>(
          red, n, c, target, weight, ignore_index, [&](int64_t i, int64_t) { return static_cast<double>(picked[i]); },
          out);
      return;
    }
  }
  std::vector<T> own;
  if (!log_prob) {
    own.resize(static_cast<size_t>(n * c * d));
    log_prob = own.data();
  }
  Softmax<T>(SoftmaxKind::kLogSoftmax, n, c, d, scores, log_prob);
  NllLoss<T, I>(red, n, c, d, log_prob, target, weight, ignore_index, out);
}

#define OT_INSTANTIATE(T, I)                                                                                          \
  template void NllLoss<T, I>(LossReduction, int64_t, int64_t, int64_t, const T*, const I*, const T*, int64_t, T*);   \
  template void SoftmaxCrossEntropyLoss<T, I>(LossReduction, int64_t, int64_t, int64_t, const T*, const I*, const T*, \
                                              int64_t, T*, T*);
OT_INSTANTIATE(float, int32_t)
OT_INSTANTIATE(float, int64_t)
OT_INSTANTIATE(double, int32_t)
OT_INSTANTIATE(double, int64_t)
OT_INSTANTIATE(float16, int32_t)
OT_INSTANTIATE(float16, int64_t)
OT_INSTANTIATE(bfloat16, int32_t)
OT_INSTANTIATE(bfloat16, int64_t)
#undef OT_INSTANTIATE

}  // namespace ot::cpu
