// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss over raw buffers.
// input / scores are [n, c, d] (d = product of the trailing dims, 1 for 2-D inputs), target [n, d].
// loss[i, k] = -input[i, t, k] * w[t] with t = target[i, k] (w = 1 without weights); 0 where t == ignore_index.
// Reduction: none -> out has n*d elements; sum -> out[0] = sum; mean -> out[0] = sum / sum of w[t] over the
// targets not ignored (the count of such targets without weights). Sums run sequentially in double in
// row-major order (deterministic). A target outside [0, c) that is not ignore_index throws std::out_of_range.
#pragma once
#include <cstdint>

namespace ot::cpu {

enum class LossReduction { kNone, kSum, kMean };

// T: float, double, float16, bfloat16; I: int32_t, int64_t. weight may be null.
template <typename T, typename I>
void NllLoss(LossReduction red, int64_t n, int64_t c, int64_t d, const T* input, const I* target, const T* weight,
             int64_t ignore_index, T* out);

// log_prob (n*c*d elements, written) = LogSoftmax over c of scores; then NllLoss(log_prob). log_prob may be null
// (not wanted): float rows (d = 1) then compute only the targets' log-probabilities, with the same bits.
template <typename T, typename I>
void SoftmaxCrossEntropyLoss(LossReduction red, int64_t n, int64_t c, int64_t d, const T* scores, const I* target,
                             const T* weight, int64_t ignore_index, T* out, T* log_prob);

}  // namespace ot::cpu
