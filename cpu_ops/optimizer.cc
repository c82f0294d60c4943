#include "cpu_ops/optimizer.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu_ops/half_convert.h"
#include "kernel_common/optim_math.h"
#include "kernel_common/vec_math.h"

namespace ot::cpu {

namespace {

// Fixed chunk size: the partial sums, and so the reduced norms, do not depend on the thread count.
constexpr int64_t kChunk = 1 << 15;

struct Chunk {
  int tensor;
  int64_t begin, end;
};

std::vector<Chunk> MakeChunks(const std::vector<OptimTensor>& ts) {
  std::vector<Chunk> cs;
  for (size_t i = 0; i < ts.size(); ++i)
    for (int64_t b = 0; b < ts[i].n; b += kChunk) cs.push_back({static_cast<int>(i), b, std::min(ts[i].n, b + kChunk)});
  return cs;
}

template <typename F>
void ForChunks(const std::vector<Chunk>& cs, F f) {
  tbb::parallel_for(tbb::blocked_range<size_t>(0, cs.size(), 1), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t c = r.begin(); c != r.end(); ++c) f(c, cs[c]);
  });
}

// Step 1 over one chunk of a gradient: scales by `gs` (1/S; exact when S is a power of two), checks that every
// scaled element is finite and sums its squares in double. `zeros` (may be null) counts the elements as given
// that are exactly zero.
// Sixteen interleaved partial sums added in a fixed order (the same bits on every run; the loop vectorizes into two
// AVX-512 accumulators, so the adds' latency does not bound it as four sums in one vector did: SumSquares was a third
// of the update's time on ResNet-18-sized tensors). A float
// gradient is finite exactly when the sum of squares of its elements (scaled, in double) is: v^2 <= 1.2e77 for a
// finite float v and |gs| <= 1e100 (squares <= 1.2e277, fewer than 2^60 of them), so only an inf or NaN element
// makes the sum non-finite; a double gradient (or a larger gs) is checked element by element (squares may overflow).
template <typename T>
OT_VEC_CLONES void SumSquares(const T* x, int64_t b, int64_t e, double gs, double& sum, bool& finite, int64_t* zeros) {
  constexpr int kLanes = 16;
  double s[kLanes] = {};
  int64_t i = b;
  for (; i + kLanes <= e; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const double v = static_cast<double>(x[i + l]) * gs;
      s[l] += v * v;
    }
  for (; i < e; ++i) {
    const double v = static_cast<double>(x[i]) * gs;
    s[0] += v * v;
  }
  for (int w = kLanes / 2; w >= 1; w /= 2)  // pairwise, in a fixed order
    for (int l = 0; l < w; ++l) s[l] += s[l + w];
  sum = s[0];
  if (std::is_same_v<T, float> && std::fabs(gs) <= 1e100) {
    finite = IsFiniteValue(sum);
  } else {
    bool ok = true;
    for (int64_t k = b; k < e; ++k) ok &= IsFiniteValue(static_cast<double>(x[k]) * gs);
    finite = ok;
  }
  if (zeros) {
    int64_t z = 0;
    for (int64_t k = b; k < e; ++k) z += x[k] == T(0);
    *zeros = z;
  }
}

double Load(const void* p, bool f64, int64_t i) {
  return f64 ? static_cast<const double*>(p)[i] : static_cast<double>(static_cast<const float*>(p)[i]);
}
void Store(void* p, bool f64, int64_t i, double v) {
  if (f64)
    static_cast<double*>(p)[i] = v;
  else
    static_cast<float*>(p)[i] = static_cast<float>(v);
}

// Copies elements [b, e) of src to dst (both of the tensor's dtype).
void CopyRange(void* dst, const void* src, const OptimTensor& t, int64_t b, int64_t e) {
  const size_t es = t.f64 ? 8 : 4;
  // dst == src when the plan writes the next state in place (a skipped step then copies nothing).
  if (dst && src && dst != src && e > b)
    std::memcpy(static_cast<char*>(dst) + b * es, static_cast<const char*>(src) + b * es,
                static_cast<size_t>(e - b) * es);
}

// The end of every chunk's work, on p_out[b, e) just written (cache-hot): its half copy, and its sum of squares
// when `squares` (param_norm). The half copy rounds the float32 value (never the double the update computed), so
// it equals a Cast of the stored master weight.
double ChunkEpilogue(const OptimTensor& t, int64_t b, int64_t e, bool squares) {
  double s = 0;
  if (t.f64) {
    const double* p = static_cast<const double*>(t.p_out);
    if (squares)
      for (int64_t i = b; i < e; ++i) s += p[i] * p[i];
    return s;
  }
  const float* p = static_cast<const float*>(t.p_out);
  uint16_t* hp = static_cast<uint16_t*>(t.half_out);
  if (hp && t.half == HalfKind::kFloat16)
    for (int64_t i = b; i < e; ++i) hp[i] = FloatToHalfBits(p[i]);
  else if (hp && t.half == HalfKind::kBFloat16)
    for (int64_t i = b; i < e; ++i) hp[i] = FloatToBf16Bits(p[i]);
  if (squares)
    for (int64_t i = b; i < e; ++i) s += static_cast<double>(p[i]) * p[i];
  return s;
}

// Elements [b, e) of a half gradient (t.grad_half) widened to float32 in this thread's buffer (kChunk floats,
// reused by the thread's next chunk): exact, so every pass reads the values a float32 copy would hold.
const float* WidenGrad(const OptimTensor& t, int64_t b, int64_t e) {
  thread_local std::vector<float> buf(kChunk);
  const uint16_t* g = static_cast<const uint16_t*>(t.g) + b;
  if (t.grad_half == HalfKind::kFloat16)
    LoadFloats(reinterpret_cast<const float16*>(g), buf.data(), e - b);
  else
    LoadFloats(reinterpret_cast<const bfloat16*>(g), buf.data(), e - b);
  return buf.data();
}

// Elements [b, e) of t as a tensor of their own (every operand advanced by b elements), reading the float32
// gradient g: how the update loops see a chunk of a half gradient widened by WidenGrad.
OptimTensor ChunkView(const OptimTensor& t, int64_t b, int64_t e, const float* g) {
  const int64_t off = b * (t.f64 ? 8 : 4);
  auto in = [&](const void* p) { return p ? static_cast<const void*>(static_cast<const char*>(p) + off) : p; };
  auto out = [&](void* p) { return p ? static_cast<void*>(static_cast<char*>(p) + off) : p; };
  OptimTensor v = t;
  v.n = e - b;
  v.p = in(t.p);
  v.g = g;
  v.grad_half = HalfKind::kNone;
  v.s0 = in(t.s0);
  v.s1 = in(t.s1);
  v.p_out = out(t.p_out);
  v.s0_out = out(t.s0_out);
  v.s1_out = out(t.s1_out);
  v.acc = in(t.acc);
  v.acc_out = out(t.acc_out);
  v.half_out = t.half_out ? static_cast<void*>(static_cast<uint16_t*>(t.half_out) + b) : nullptr;
  return v;
}

// A step that changes nothing (skipped, or a micro-step): outputs are the inputs bit for bit, then the epilogue.
void CopyChunk(const OptimTensor& t, int64_t b, int64_t e) {
  CopyRange(t.p_out, t.p, t, b, e);
  CopyRange(t.s0_out, t.s0, t, b, e);
  CopyRange(t.s1_out, t.s1, t, b, e);
}

// Adam/AdamW on float32 storage: the weight decay, the moments and the parameter's step in double as AdamStep, the
// direction m / (sqrt(v) / sqrt(bc2) + eps) in float from the moments as they are stored (rounded to float32). In
// double, the square root and two divides per element made the update ~2.3x its memory traffic (BERT-base's 110M
// parameters: 237 ms); in float they cost a fourth of that. The float direction is within a few float ulps of the
// double one, so the step lr * dir moves by ~1e-7 of itself: far below the parameter's float32 rounding, which it
// changes only at near-ties (as PyTorch's own float32 Adam computes the whole step in float).
// mo, vo: the moments as stored; returns the new parameter in double.
template <bool kWd, bool kDec>
inline double AdamStepStored(double p, double g, float m, float v, float& mo, float& vo, double lr, double beta1,
                             double beta2, float eps, double wd, double step_size, float inv_bc2_sqrt) {
  if constexpr (kWd) {
    if constexpr (kDec)
      p *= 1.0 - lr * wd;
    else
      g += wd * p;
  }
  double mm = static_cast<double>(m), vv = static_cast<double>(v);
  mm += (g - mm) * (1.0 - beta1);  // torch: exp_avg.lerp_(grad, 1 - beta1)
  vv = beta2 * vv + (1.0 - beta2) * g * g;
  mo = static_cast<float>(mm);
  vo = static_cast<float>(vv);
  const float dir = mo / (std::sqrt(vo) * inv_bc2_sqrt + eps);
  return p - step_size * static_cast<double>(dir);
}

// Adam/AdamW over [b, e): float32 storage through AdamStepStored, float64 through AdamStep in double; the weight-decay
// form is a template argument (kWd: weight decay on, kDec: decoupled), so the loop has no branch. Blocks of 64 elements
// go through local arrays: the outputs may be the inputs' storage (in-place state), which would stop the vectorizer's
// alias checks over seven pointers; every block is read whole before any of it is written, which in-place allows.
template <typename T, bool kWd, bool kDec>
OT_VEC_CLONES void AdamLoop(const T* p, const T* g, const T* m, const T* v, T* po, T* mo, T* vo, int64_t b, int64_t e,
                            double clip, double lr, double beta1, double beta2, double eps, double wd, double bc1,
                            double bc2_sqrt) {
  constexpr int64_t kB = 64;
  T pp[kB], gg[kB], mm[kB], vv[kB];
  const double step_size = lr / bc1;
  const float inv_c2 = static_cast<float>(1.0 / bc2_sqrt), eps_f = static_cast<float>(eps);
  for (int64_t i0 = b; i0 < e; i0 += kB) {
    const int64_t n = std::min(kB, e - i0);
    for (int64_t k = 0; k < n; ++k) pp[k] = p[i0 + k];
    for (int64_t k = 0; k < n; ++k) gg[k] = g[i0 + k];
    for (int64_t k = 0; k < n; ++k) mm[k] = m[i0 + k];
    for (int64_t k = 0; k < n; ++k) vv[k] = v[i0 + k];
    for (int64_t k = 0; k < n; ++k) {
      if constexpr (std::is_same_v<T, float>) {
        pp[k] =
            static_cast<float>(AdamStepStored<kWd, kDec>(pp[k], clip * static_cast<double>(gg[k]), mm[k], vv[k], mm[k],
                                                         vv[k], lr, beta1, beta2, eps_f, wd, step_size, inv_c2));
      } else {
        pp[k] = AdamStep<double>(pp[k], clip * gg[k], mm[k], vv[k], lr, beta1, beta2, eps, kWd ? wd : 0.0, kDec, bc1,
                                 bc2_sqrt);
      }
    }
    for (int64_t k = 0; k < n; ++k) po[i0 + k] = pp[k];
    for (int64_t k = 0; k < n; ++k) mo[i0 + k] = mm[k];
    for (int64_t k = 0; k < n; ++k) vo[i0 + k] = vv[k];
  }
}

// AdamLoop in place (the plan's usual call: every output the storage of its input), on four pointers that cannot
// alias, which vectorizes without alias checks or the blocks' copies: the same arithmetic, so the same bits. The
// blocked loop took ~2.5x the update's memory traffic on ResNet-18's 11.7M parameters, this ~1.3x.
template <typename T, bool kWd, bool kDec>
OT_VEC_CLONES void AdamLoopInPlace(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, int64_t b,
                                   int64_t e, double clip, double lr, double beta1, double beta2, double eps, double wd,
                                   double bc1, double bc2_sqrt) {
  const double step_size = lr / bc1;
  const float inv_c2 = static_cast<float>(1.0 / bc2_sqrt), eps_f = static_cast<float>(eps);
  for (int64_t i = b; i < e; ++i) {
    if constexpr (std::is_same_v<T, float>) {
      float mo, vo;
      p[i] = static_cast<float>(AdamStepStored<kWd, kDec>(p[i], clip * static_cast<double>(g[i]), m[i], v[i], mo, vo,
                                                          lr, beta1, beta2, eps_f, wd, step_size, inv_c2));
      m[i] = mo;
      v[i] = vo;
    } else {
      double mm = m[i], vv = v[i];
      p[i] = AdamStep<double>(p[i], clip * g[i], mm, vv, lr, beta1, beta2, eps, kWd ? wd : 0.0, kDec, bc1, bc2_sqrt);
      m[i] = mm;
      v[i] = vv;
    }
  }
}

// One chunk of the element-wise update. Compute in double (Adam's direction on float32 storage in float: AdamLoop);
// loads/stores convert per tensor dtype. `clip` is the
// factor every gradient element is multiplied by: the clip coefficient times the unscale factor 1/S.
template <typename T>
void UpdateChunk(const OptimHyper& h, const OptimTensor& t, int64_t b, int64_t e, double lr, double clip, bool first,
                 double bc1, double bc2) {
  const T* p = static_cast<const T*>(t.p);
  const T* g = static_cast<const T*>(t.g);
  T* po = static_cast<T*>(t.p_out);
  switch (h.kind) {
    case OptimKind::kSgd:
      for (int64_t i = b; i < e; ++i) {
        double buf = 0;
        po[i] = static_cast<T>(SgdStep<double>(p[i], clip * g[i], buf, first, lr, h.weight_decay, 0.0, false));
      }
      break;
    case OptimKind::kMomentum:
    case OptimKind::kNesterov: {
      const T* s = static_cast<const T*>(t.s0);
      T* so = static_cast<T*>(t.s0_out);
      const bool nesterov = h.kind == OptimKind::kNesterov;
      for (int64_t i = b; i < e; ++i) {
        double buf = s[i];
        po[i] =
            static_cast<T>(SgdStep<double>(p[i], clip * g[i], buf, first, lr, h.weight_decay, h.momentum, nesterov));
        so[i] = static_cast<T>(buf);
      }
      break;
    }
    case OptimKind::kAdam:
    case OptimKind::kAdamW: {
      const T* m = static_cast<const T*>(t.s0);
      const T* v = static_cast<const T*>(t.s1);
      T* mo = static_cast<T*>(t.s0_out);
      T* vo = static_cast<T*>(t.s1_out);
      const bool decoupled = h.kind == OptimKind::kAdamW;
      const double bc2_sqrt = std::sqrt(bc2);
      if (po == p && mo == m && vo == v) {
        if (h.weight_decay == 0)
          AdamLoopInPlace<T, false, false>(po, g, mo, vo, b, e, clip, lr, h.beta1, h.beta2, h.eps, 0, bc1, bc2_sqrt);
        else if (decoupled)
          AdamLoopInPlace<T, true, true>(po, g, mo, vo, b, e, clip, lr, h.beta1, h.beta2, h.eps, h.weight_decay, bc1,
                                         bc2_sqrt);
        else
          AdamLoopInPlace<T, true, false>(po, g, mo, vo, b, e, clip, lr, h.beta1, h.beta2, h.eps, h.weight_decay, bc1,
                                          bc2_sqrt);
        break;
      }
      // One loop per weight-decay form, each with its branch folded away, so the loop vectorizes.
      if (h.weight_decay == 0)
        AdamLoop<T, false, false>(p, g, m, v, po, mo, vo, b, e, clip, lr, h.beta1, h.beta2, h.eps, 0, bc1, bc2_sqrt);
      else if (decoupled)
        AdamLoop<T, true, true>(p, g, m, v, po, mo, vo, b, e, clip, lr, h.beta1, h.beta2, h.eps, h.weight_decay, bc1,
                                bc2_sqrt);
      else
        AdamLoop<T, true, false>(p, g, m, v, po, mo, vo, b, e, clip, lr, h.beta1, h.beta2, h.eps, h.weight_decay, bc1,
                                 bc2_sqrt);
      break;
    }
    case OptimKind::kLamb: {
      // Stage 1: the update direction goes to p_out (overwritten in stage 2).
      const T* m = static_cast<const T*>(t.s0);
      const T* v = static_cast<const T*>(t.s1);
      T* mo = static_cast<T*>(t.s0_out);
      T* vo = static_cast<T*>(t.s1_out);
      for (int64_t i = b; i < e; ++i) {
        double mm = m[i], vv = v[i];
        po[i] = static_cast<T>(
            LambDirection<double>(p[i], clip * g[i], mm, vv, h.beta1, h.beta2, h.eps, h.weight_decay, bc1, bc2));
        mo[i] = static_cast<T>(mm);
        vo[i] = static_cast<T>(vv);
      }
      break;
    }
  }
}

}  // namespace

int OptimStatesPerParam(OptimKind k) {
  switch (k) {
    case OptimKind::kSgd:
      return 0;
    case OptimKind::kMomentum:
    case OptimKind::kNesterov:
      return 1;
    default:
      return 2;
  }
}

namespace {

double SumInOrder(const std::vector<double>& part) {
  double s = 0;
  for (double v : part) s += v;  // chunk order: deterministic
  return s;
}

void CopyStep(const std::vector<OptimTensor>& ts, const std::vector<Chunk>& cs, bool stats, std::vector<double>& psq) {
  ForChunks(cs, [&](size_t c, const Chunk& k) {
    const OptimTensor& t = ts[k.tensor];
    CopyChunk(t, k.begin, k.end);
    psq[c] = ChunkEpilogue(t, k.begin, k.end, stats);
  });
}

// One optimizer step on gradients ts[i].g times gs. zeros: per-chunk zero counts of the gradients (null: not
// counted, the caller has). psq: per-chunk sums of squares of p_out (filled when stats).
OptimResult Apply(const OptimHyper& h, double lr, int64_t step, const std::vector<OptimTensor>& ts,
                  const std::vector<Chunk>& cs, double gs, bool stats, std::vector<int64_t>* zeros,
                  std::vector<double>& psq, const std::function<void(double*, int)>& reduce) {
  std::vector<double> part(cs.size(), 0.0);
  std::vector<char> ok(cs.size(), 1);
  ForChunks(cs, [&](size_t c, const Chunk& k) {
    const OptimTensor& t = ts[k.tensor];
    bool f = true;
    int64_t* z = zeros ? &(*zeros)[c] : nullptr;
    if (t.grad_half != HalfKind::kNone)
      SumSquares(WidenGrad(t, k.begin, k.end), 0, k.end - k.begin, gs, part[c], f, z);
    else if (t.f64)
      SumSquares(static_cast<const double*>(t.g), k.begin, k.end, gs, part[c], f, z);
    else
      SumSquares(static_cast<const float*>(t.g), k.begin, k.end, gs, part[c], f, z);
    ok[c] = f;
  });
  OptimResult res;
  bool finite = true;
  for (char c : ok) finite &= c != 0;
  double sum = SumInOrder(part);
  if (reduce) {
    double v[2] = {sum, finite ? 0.0 : 1.0};
    reduce(v, 2);
    sum = v[0];
    finite = v[1] == 0.0;
  }
  res.grad_norm = std::sqrt(sum);  // inf or NaN when some element is not finite
  if (!finite) {
    // Nothing changes: outputs are the inputs, bit for bit.
    CopyStep(ts, cs, stats, psq);
    res.skipped = true;
    res.step = step;
    return res;
  }
  // The gradient factor: clipping (of the unscaled norm) and unscaling in one multiplier.
  const double gmul = ClipCoefficient(res.grad_norm, h.clip_grad_norm) * gs;
  const double t1 = static_cast<double>(step + 1);
  const double bc1 = BiasCorrection(h.beta1, t1), bc2 = BiasCorrection(h.beta2, t1);
  const bool first = step == 0;
  const bool lamb = h.kind == OptimKind::kLamb;
  ForChunks(cs, [&](size_t c, const Chunk& k) {
    const OptimTensor& t = ts[k.tensor];
    if (t.grad_half != HalfKind::kNone)
      UpdateChunk<float>(h, ChunkView(t, k.begin, k.end, WidenGrad(t, k.begin, k.end)), 0, k.end - k.begin, lr, gmul,
                         first, bc1, bc2);
    else if (t.f64)
      UpdateChunk<double>(h, t, k.begin, k.end, lr, gmul, first, bc1, bc2);
    else
      UpdateChunk<float>(h, t, k.begin, k.end, lr, gmul, first, bc1, bc2);
    if (!lamb) psq[c] = ChunkEpilogue(t, k.begin, k.end, stats);  // LAMB: p_out holds the direction still
  });
  if (lamb) {
    // Stage 2: per-tensor ||w|| and ||update|| (chunk partials in order), then p -= lr * ratio * update.
    std::vector<double> wpart(cs.size()), upart(cs.size());
    ForChunks(cs, [&](size_t c, const Chunk& k) {
      const OptimTensor& t = ts[k.tensor];
      double ws = 0, us = 0;
      for (int64_t i = k.begin; i < k.end; ++i) {
        const double w = Load(t.p, t.f64, i), u = Load(t.p_out, t.f64, i);
        ws += w * w;
        us += u * u;
      }
      wpart[c] = ws;
      upart[c] = us;
    });
    std::vector<double> wn(ts.size(), 0.0), un(ts.size(), 0.0);
    for (size_t c = 0; c < cs.size(); ++c) {
      wn[cs[c].tensor] += wpart[c];
      un[cs[c].tensor] += upart[c];
    }
    std::vector<double> ratio(ts.size());
    for (size_t i = 0; i < ts.size(); ++i)
      ratio[i] = LambTrustRatio(std::sqrt(wn[i]), std::sqrt(un[i]), h.weight_decay);
    ForChunks(cs, [&](size_t c, const Chunk& k) {
      const OptimTensor& t = ts[k.tensor];
      const double s = lr * ratio[k.tensor];
      for (int64_t i = k.begin; i < k.end; ++i)
        Store(t.p_out, t.f64, i, Load(t.p, t.f64, i) - s * Load(t.p_out, t.f64, i));
      psq[c] = ChunkEpilogue(t, k.begin, k.end, stats);
    });
  }
  res.step = step + 1;
  return res;
}

}  // namespace

OptimResult MultiTensorUpdate(const OptimHyper& h, double lr, int64_t step, const std::vector<OptimTensor>& ts_in,
                              int64_t accumulate, int64_t micro, const OptimStepOptions& x) {
  const std::vector<Chunk> cs = MakeChunks(ts_in);
  std::vector<OptimTensor> ts = ts_in;
  std::vector<int64_t> zeros(cs.size(), 0);
  std::vector<double> psq(cs.size(), 0.0);
  const double gs = x.grad_scale;
  OptimResult res;
  if (accumulate > 1) {
    const bool last = micro + 1 >= accumulate;
    const double scale = last ? 1.0 / static_cast<double>(accumulate) : 1.0;
    // The sums hold unscaled gradients (gs applied here), so S may change between optimizer steps; a non-finite
    // micro-step poisons its sum and the K-th step skips.
    ForChunks(cs, [&](size_t c, const Chunk& k) {
      const OptimTensor& t = ts[k.tensor];
      const float* wide = t.grad_half != HalfKind::kNone ? WidenGrad(t, k.begin, k.end) : nullptr;
      int64_t z = 0;
      for (int64_t i = k.begin; i < k.end; ++i) {
        const double g = wide ? static_cast<double>(wide[i - k.begin]) : Load(t.g, t.f64, i);
        z += g == 0.0;
        Store(t.acc_out, t.f64, i, (Load(t.acc, t.f64, i) + g * gs) * scale);
      }
      zeros[c] = z;
    });
    if (!last) {
      CopyStep(ts, cs, x.stats, psq);
      res.applied = false;
      res.step = step;
      res.micro = micro + 1;
    } else {
      for (OptimTensor& t : ts) {
        t.g = t.acc_out;  // the mean gradient, unscaled already (its dtype the parameter's); zeroed below once used
        t.grad_half = HalfKind::kNone;
      }
      res = Apply(h, lr, step, ts, cs, 1.0, x.stats, nullptr, psq, x.reduce);
      for (const OptimTensor& t : ts)
        if (t.acc_out && t.n) std::memset(t.acc_out, 0, static_cast<size_t>(t.n) * (t.f64 ? 8 : 4));
      res.micro = 0;
    }
  } else {
    res = Apply(h, lr, step, ts, cs, gs, x.stats, x.stats ? &zeros : nullptr, psq, x.reduce);
  }
  if (x.stats) {
    int64_t z = 0, total = 0;
    for (int64_t c : zeros) z += c;
    for (const OptimTensor& t : ts_in) total += t.n;
    double v[3] = {SumInOrder(psq), static_cast<double>(z), static_cast<double>(total)};
    if (x.reduce) x.reduce(v, 3);
    res.param_norm = std::sqrt(v[0]);
    res.zero_fraction = v[2] > 0 ? v[1] / v[2] : 0.0;
  }
  return res;
}

}  // namespace ot::cpu
