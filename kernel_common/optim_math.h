// Scalar optimizer math shared by the CPU and CUDA update kernels (torch.optim / NVIDIA Apex semantics).
// Every function updates one element; M is the compute type (the CPU uses double, a CUDA kernel may use float).
// The per-step scalars (bias corrections, clip coefficient, LAMB trust ratio) are computed once per step by the
// caller and passed in, so these functions are pure element-wise arithmetic.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernel_common/half.h"

namespace ot {

// The optimizer kinds, one enum for the passes that build the update and both backends' update kernels.
enum class OptimizerKind : int { kSgd, kMomentum, kNesterov, kAdam, kAdamW, kLamb };

// torch.nn.utils.clip_grad_norm_: the factor every gradient is multiplied by (1 when no clipping applies;
// max_norm <= 0 turns clipping off).
template <typename M>
OT_HD M ClipCoefficient(M total_norm, M max_norm) {
  if (!(max_norm > M(0))) return M(1);
  const M coef = max_norm / (total_norm + M(1e-6));
  return coef < M(1) ? coef : M(1);
}

// torch.optim.SGD with momentum `mu` (0: plain SGD), dampening 0, L2 weight decay added to the gradient.
// `first`: the momentum buffer does not exist yet (first step): it is initialised to the gradient, as PyTorch
// does. Returns the new parameter; updates `buf` when mu != 0.
template <typename M>
OT_HD M SgdStep(M p, M g, M& buf, bool first, M lr, M weight_decay, M mu, bool nesterov) {
  M d = g;
  if (weight_decay != M(0)) d += weight_decay * p;
  if (mu != M(0)) {
    buf = first ? d : mu * buf + d;
    d = nesterov ? d + mu * buf : buf;
  }
  return p - lr * d;
}

// Bias corrections of Adam/LAMB at step t (1-based): 1 - beta^t.
template <typename M>
OT_HD M BiasCorrection(M beta, double t) {
  return M(1) - static_cast<M>(pow(static_cast<double>(beta), t));
}

// torch.optim.Adam (decoupled = false; weight decay is L2 added to the gradient) and torch.optim.AdamW
// (decoupled = true; p *= 1 - lr*wd before the Adam step). eps is added after the square root:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
template <typename M>
OT_HD M AdamStep(M p, M g, M& m, M& v, M lr, M beta1, M beta2, M eps, M weight_decay, bool decoupled, M bc1,
                 M bc2_sqrt) {
  if (weight_decay != M(0)) {
    if (decoupled)
      p *= M(1) - lr * weight_decay;
    else
      g += weight_decay * p;
  }
  m += (g - m) * (M(1) - beta1);  // torch: exp_avg.lerp_(grad, 1 - beta1)
  v = beta2 * v + (M(1) - beta2) * g * g;
  const M denom = sqrt(v) / bc2_sqrt + eps;
  return p - (lr / bc1) * m / denom;
}

// NVIDIA Apex FusedLAMB, stage 1 (adam_w_mode = True, grad_averaging = True, bias correction on): updates the
// moments and returns the update direction  m_hat / (sqrt(v_hat) + eps) + wd * p.
template <typename M>
OT_HD M LambDirection(M p, M g, M& m, M& v, M beta1, M beta2, M eps, M weight_decay, M bc1, M bc2) {
  m = beta1 * m + (M(1) - beta1) * g;
  v = beta2 * v + (M(1) - beta2) * g * g;
  const M denom = sqrt(v / bc2) + eps;
  return (m / bc1) / denom + weight_decay * p;
}

// Apex FusedLAMB, stage 2: the per-tensor trust ratio ||w|| / ||update||, 1 when either norm is 0. Like Apex
// without use_nvlamb, the ratio applies only when weight decay is on; otherwise it is 1 (plain Adam step).
template <typename M>
OT_HD M LambTrustRatio(M param_norm, M update_norm, M weight_decay) {
  if (weight_decay == M(0)) return M(1);
  return (param_norm != M(0) && update_norm != M(0)) ? param_norm / update_norm : M(1);
}

// True for finite x (no inf, no NaN); works for float and double on host and device.
template <typename M>
OT_HD bool IsFiniteValue(M x) {
  return (x - x) == (x - x);
}

// Dynamic loss scaling (PyTorch GradScaler / Apex; with `overflows` > 1 TF's ExponentialUpdateLossScaleManager),
// applied once per optimizer step (never on a micro-step that only accumulated). `finite`: the step's (mean)
// gradients were all finite and the update was applied.
//   not finite: bad += 1, good = 0; when bad >= overflows: scale = max(min_scale, scale * backoff), bad = 0.
//   finite:     good += 1; when good >= growth_interval: scale *= growth (only if the product is finite, so the
//               scale never becomes inf), good = 0, bad = 0.
// A finite step below the interval leaves bad as it is: `overflows` counts overflows since the last change of
// the scale, as TF does. M is float on both backends (the scale is float32 state).
template <typename M>
OT_HD void LossScaleUpdate(bool finite, M& scale, int64_t& good, int64_t& bad, M growth, M backoff,
                           int64_t growth_interval, int64_t overflows, M min_scale) {
  if (!finite) {
    good = 0;
    bad += 1;
    if (bad >= overflows) {
      const M s = scale * backoff;
      scale = s > min_scale ? s : min_scale;
      bad = 0;
    }
    return;
  }
  good += 1;
  if (good >= growth_interval) {
    const M s = scale * growth;
    if (IsFiniteValue(s)) scale = s;
    good = 0;
    bad = 0;
  }
}

// Learning-rate schedule factor for the update that follows `done` optimizer steps (0 for the first), with
// `warmup` warm-up steps and `total` steps in all; the schedules of Hugging Face transformers'
// get_{constant,linear,cosine}_schedule_with_warmup (a LambdaLR of the step count, so the first warm-up step has
// factor 0). kind: 0 constant, 1 linear decay to 0 at `total`, 2 cosine (half a period) to 0 at `total`.
// Host and device: the CUDA update kernels evaluate it from the device's step counter. Unqualified cos: the C
// library's cos(double) on the host (what std::cos(double) is), CUDA's on the device.
OT_HD double LrScheduleFactor(int kind, int64_t done, int64_t warmup, int64_t total) {
  const double s = static_cast<double>(done);
  if (done < warmup) return s / static_cast<double>(warmup);
  const double span = static_cast<double>(total - warmup > 1 ? total - warmup : 1);
  const double progress = (s - static_cast<double>(warmup)) / span;
  switch (kind) {
    case 1:
      return progress >= 1 ? 0.0 : 1.0 - progress;
    case 2:
      return progress >= 1 ? 0.0 : 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
    default:
      return 1.0;
  }
}

}  // namespace ot
