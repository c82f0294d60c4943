// Update rules of the ONNX ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum), as the ONNX spec and
// its reference implementation (onnx/reference/ops/aionnx_preview_training) define them. One call updates one
// tensor of `n` elements, float (f64 = false) or double (f64 = true); the arithmetic is done in double and
// rounded once. Outputs never alias inputs. r: learning rate, t: the training iteration count (T input).
#pragma once
#include <cstdint>

namespace ot::cpu {

struct AdagradAttrs {
  double decay_factor = 0, epsilon = 1e-6, norm_coefficient = 0;
};
// r' = r / (1 + t * decay_factor); g' = norm_coefficient * x + g; h_new = h + g'^2;
// x_new = x - r' * g' / (sqrt(h_new) + epsilon).
void PreviewAdagrad(const AdagradAttrs& a, double r, int64_t t, int64_t n, bool f64, const void* x, const void* g,
                    const void* h, void* x_out, void* h_out);

struct AdamAttrs {
  double alpha = 0.9, beta = 0.999, epsilon = 1e-6, norm_coefficient = 0, norm_coefficient_post = 0;
};
// g' = norm_coefficient * x + g; v_new = alpha v + (1 - alpha) g'; h_new = beta h + (1 - beta) g'^2;
// r' = t > 0 ? r sqrt(1 - beta^t) / (1 - alpha^t) : r; x_new = (1 - norm_coefficient_post) (x - r' v_new /
// (sqrt(h_new) + epsilon)).
void PreviewAdam(const AdamAttrs& a, double r, int64_t t, int64_t n, bool f64, const void* x, const void* g,
                 const void* v, const void* h, void* x_out, void* v_out, void* h_out);

struct MomentumAttrs {
  double alpha = 0, beta = 0, norm_coefficient = 0;
  bool nesterov = false;  // mode "nesterov" (else "standard")
};
// g' = norm_coefficient * x + g; b = t > 0 ? beta : 1; v_new = alpha v + b g';
// standard: x_new = x - r v_new; nesterov: x_new = x - r (g' + alpha v_new).
void PreviewMomentum(const MomentumAttrs& a, double r, int64_t t, int64_t n, bool f64, const void* x, const void* g,
                     const void* v, void* x_out, void* v_out);

}  // namespace ot::cpu
