#include "cpu_ops/training_preview.h"

#include <cmath>

namespace ot::cpu {

namespace {

// Calls f(i, load, store) for every element, with load(ptr, i) -> double and store(ptr, i, double) of the
// buffer's element type.
template <typename F>
void ForEachElement(bool f64, int64_t n, F&& f) {
  if (f64) {
    auto load = [](const void* p, int64_t i) { return static_cast<const double*>(p)[i]; };
    auto store = [](void* p, int64_t i, double x) { static_cast<double*>(p)[i] = x; };
    for (int64_t i = 0; i < n; ++i) f(i, load, store);
  } else {
    auto load = [](const void* p, int64_t i) { return static_cast<double>(static_cast<const float*>(p)[i]); };
    auto store = [](void* p, int64_t i, double x) { static_cast<float*>(p)[i] = static_cast<float>(x); };
    for (int64_t i = 0; i < n; ++i) f(i, load, store);
  }
}

}  // namespace

void PreviewAdagrad(const AdagradAttrs& a, double r, int64_t t, int64_t n, bool f64, const void* x, const void* g,
                    const void* h, void* x_out, void* h_out) {
  const double rr = r / (1.0 + static_cast<double>(t) * a.decay_factor);
  ForEachElement(f64, n, [&](int64_t i, auto load, auto store) {
    const double xi = load(x, i);
    const double gr = a.norm_coefficient * xi + load(g, i);
    const double hn = load(h, i) + gr * gr;
    store(h_out, i, hn);
    store(x_out, i, xi - rr * gr / (std::sqrt(hn) + a.epsilon));
  });
}

void PreviewAdam(const AdamAttrs& a, double r, int64_t t, int64_t n, bool f64, const void* x, const void* g,
                 const void* v, const void* h, void* x_out, void* v_out, void* h_out) {
  const double td = static_cast<double>(t);
  const double rr = t > 0 ? r * std::sqrt(1.0 - std::pow(a.beta, td)) / (1.0 - std::pow(a.alpha, td)) : r;
  ForEachElement(f64, n, [&](int64_t i, auto load, auto store) {
    const double xi = load(x, i);
    const double gr = a.norm_coefficient * xi + load(g, i);
    const double vn = a.alpha * load(v, i) + (1.0 - a.alpha) * gr;
    const double hn = a.beta * load(h, i) + (1.0 - a.beta) * gr * gr;
    store(v_out, i, vn);
    store(h_out, i, hn);
    store(x_out, i, (1.0 - a.norm_coefficient_post) * (xi - rr * (vn / (std::sqrt(hn) + a.epsilon))));
  });
}

void PreviewMomentum(const MomentumAttrs& a, double r, int64_t t, int64_t n, bool f64, const void* x, const void* g,
                     const void* v, void* x_out, void* v_out) {
  const double b = t > 0 ? a.beta : 1.0;
  ForEachElement(f64, n, [&](int64_t i, auto load, auto store) {
    const double xi = load(x, i);
    const double gr = a.norm_coefficient * xi + load(g, i);
    const double vn = a.alpha * load(v, i) + b * gr;
    store(v_out, i, vn);
    store(x_out, i, a.nesterov ? xi - r * (gr + a.alpha * vn) : xi - r * vn);
  });
}

}  // namespace ot::cpu
