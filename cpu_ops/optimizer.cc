#include "cpu_ops/optimizer.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <algorithm>

#include "kernel_common/optim_math.h"

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

template <typename T>
void SumSquares(const T* x, int64_t b, int64_t e, double& sum, bool& finite) {
  double s = 0;
  bool ok = true;
  for (int64_t i = b; i < e; ++i) {
    const double v = static_cast<double>(x[i]);
    ok &= IsFiniteValue(v);
    s += v * v;
  }
  sum = s;
  finite = ok;
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

void CopyBuf(void* dst, const void* src, const OptimTensor& t) {
  if (dst && src && t.n) std::memcpy(dst, src, static_cast<size_t>(t.n) * (t.f64 ? 8 : 4));
}

// One chunk of the element-wise update. Compute in double; loads/stores convert per tensor dtype.
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
        po[i] = static_cast<T>(SgdStep<double>(p[i], clip * g[i], buf, first, lr, h.weight_decay, h.momentum, nesterov));
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
      for (int64_t i = b; i < e; ++i) {
        double mm = m[i], vv = v[i];
        po[i] = static_cast<T>(AdamStep<double>(p[i], clip * g[i], mm, vv, lr, h.beta1, h.beta2, h.eps,
                                                h.weight_decay, decoupled, bc1, bc2_sqrt));
        mo[i] = static_cast<T>(mm);
        vo[i] = static_cast<T>(vv);
      }
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
        po[i] = static_cast<T>(LambDirection<double>(p[i], clip * g[i], mm, vv, h.beta1, h.beta2, h.eps,
                                                     h.weight_decay, bc1, bc2));
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
    case OptimKind::kSgd: return 0;
    case OptimKind::kMomentum:
    case OptimKind::kNesterov: return 1;
    default: return 2;
  }
}

OptimResult MultiTensorUpdate(const OptimHyper& h, double lr, int64_t step, const std::vector<OptimTensor>& ts_in,
                              int64_t accumulate, int64_t micro) {
  const std::vector<Chunk> cs = MakeChunks(ts_in);
  std::vector<OptimTensor> ts = ts_in;
  if (accumulate > 1) {
    const bool last = micro + 1 >= accumulate;
    const double scale = last ? 1.0 / static_cast<double>(accumulate) : 1.0;
    ForChunks(cs, [&](size_t, const Chunk& k) {
      const OptimTensor& t = ts[k.tensor];
      for (int64_t i = k.begin; i < k.end; ++i)
        Store(t.acc_out, t.f64, i, (Load(t.acc, t.f64, i) + Load(t.g, t.f64, i)) * scale);
    });
    if (!last) {
      for (const OptimTensor& t : ts) {
        CopyBuf(t.p_out, t.p, t);
        CopyBuf(t.s0_out, t.s0, t);
        CopyBuf(t.s1_out, t.s1, t);
      }
      OptimResult res;
      res.applied = false;
      res.step = step;
      res.micro = micro + 1;
      return res;
    }
    for (OptimTensor& t : ts) t.g = t.acc_out;  // the mean gradient; zeroed below once used
    OptimResult res = MultiTensorUpdate(h, lr, step, ts);
    for (const OptimTensor& t : ts)
      if (t.acc_out && t.n) std::memset(t.acc_out, 0, static_cast<size_t>(t.n) * (t.f64 ? 8 : 4));
    res.micro = 0;
    return res;
  }
  std::vector<double> part(cs.size(), 0.0);
  std::vector<char> ok(cs.size(), 1);
  ForChunks(cs, [&](size_t c, const Chunk& k) {
    const OptimTensor& t = ts[k.tensor];
    bool f = true;
    if (t.f64)
      SumSquares(static_cast<const double*>(t.g), k.begin, k.end, part[c], f);
    else
      SumSquares(static_cast<const float*>(t.g), k.begin, k.end, part[c], f);
    ok[c] = f;
  });
  OptimResult res;
  double sum = 0;
  bool finite = true;
  for (size_t c = 0; c < cs.size(); ++c) {  // fixed order: deterministic
    sum += part[c];
    finite &= ok[c] != 0;
  }
  res.grad_norm = std::sqrt(sum);  // inf or NaN when some element is not finite
  if (!finite) {
    // Nothing changes: outputs are the inputs, bit for bit.
    for (const OptimTensor& t : ts) {
      CopyBuf(t.p_out, t.p, t);
      CopyBuf(t.s0_out, t.s0, t);
      CopyBuf(t.s1_out, t.s1, t);
    }
    res.skipped = true;
    res.step = step;
    return res;
  }
  const double clip = ClipCoefficient(res.grad_norm, h.clip_grad_norm);
  const double t1 = static_cast<double>(step + 1);
  const double bc1 = BiasCorrection(h.beta1, t1), bc2 = BiasCorrection(h.beta2, t1);
  const bool first = step == 0;
  ForChunks(cs, [&](size_t, const Chunk& k) {
    const OptimTensor& t = ts[k.tensor];
    if (t.f64)
      UpdateChunk<double>(h, t, k.begin, k.end, lr, clip, first, bc1, bc2);
    else
      UpdateChunk<float>(h, t, k.begin, k.end, lr, clip, first, bc1, bc2);
  });
  if (h.kind == OptimKind::kLamb) {
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
    for (size_t i = 0; i < ts.size(); ++i) ratio[i] = LambTrustRatio(std::sqrt(wn[i]), std::sqrt(un[i]), h.weight_decay);
    ForChunks(cs, [&](size_t, const Chunk& k) {
      const OptimTensor& t = ts[k.tensor];
      const double s = lr * ratio[k.tensor];
      for (int64_t i = k.begin; i < k.end; ++i) Store(t.p_out, t.f64, i, Load(t.p, t.f64, i) - s * Load(t.p_out, t.f64, i));
    });
  }
  res.step = step + 1;
  return res;
}

}  // namespace ot::cpu
