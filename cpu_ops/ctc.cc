#include "cpu_ops/ctc.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_ops/parallel_split.h"

namespace ot::cpu {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double Lse(double a, double b) {
  const double m = std::max(a, b);
  if (m == kNegInf) return kNegInf;
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}

double Lse(double a, double b, double c) {
  const double m = std::max({a, b, c});
  if (m == kNegInf) return kNegInf;
  return m + std::log(std::exp(a - m) + std::exp(b - m) + std::exp(c - m));
}

void Check(const CtcSpec& s, const int64_t* labels, const int64_t* logit_lens, const int64_t* label_lens) {
  for (int64_t b = 0; b < s.batch; ++b) {
    const std::string sample = "sample " + std::to_string(b) + ": ";
    if (logit_lens[b] < 0 || logit_lens[b] > s.frames)
      throw std::invalid_argument(sample + "logit length " + std::to_string(logit_lens[b]) + " is outside [0, " +
                                  std::to_string(s.frames) + "], the logits' frames");
    if (label_lens[b] < 0 || label_lens[b] > s.max_labels)
      throw std::invalid_argument(sample + "label length " + std::to_string(label_lens[b]) + " is outside [0, " +
                                  std::to_string(s.max_labels) + "], the labels' width");
    for (int64_t i = 0; i < label_lens[b]; ++i) {
      const int64_t l = labels[b * s.max_labels + i];
      if (l < 0 || l >= s.classes || l == s.blank)
        throw std::invalid_argument(
            sample + "label " + std::to_string(i) + " is " + std::to_string(l) +
            (l == s.blank ? ", the blank" : ", outside [0, " + std::to_string(s.classes) + ")"));
    }
  }
}

// One sample: its log-softmax, alpha and (for the gradient) beta, all in double.
template <typename T>
class Sample {
 public:
  Sample(const CtcSpec& s, const T* logits, const int64_t* labels, int64_t b, int64_t frames, int64_t nlabels)
      : s_(s), frames_(frames), states_(2 * nlabels + 1), ext_(static_cast<size_t>(states_), s.blank) {
    for (int64_t i = 0; i < nlabels; ++i) ext_[static_cast<size_t>(2 * i + 1)] = labels[b * s.max_labels + i];
    const int64_t C = s.classes;
    lp_.resize(static_cast<size_t>(frames * C));
    for (int64_t t = 0; t < frames; ++t) {
      const T* row = logits + (s.batch_major ? (b * s.frames + t) * C : (t * s.batch + b) * C);
      double* out = &lp_[static_cast<size_t>(t * C)];
      double m = kNegInf;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(row[c]));
      double sum = 0;
      for (int64_t c = 0; c < C; ++c) sum += std::exp(static_cast<double>(row[c]) - m);
      const double lz = m + std::log(sum);
      for (int64_t c = 0; c < C; ++c) out[c] = static_cast<double>(row[c]) - lz;
    }
  }

  double Nll() {
    if (frames_ == 0) return states_ == 1 ? 0.0 : std::numeric_limits<double>::infinity();
    Alpha();
    const double* last = &alpha_[static_cast<size_t>((frames_ - 1) * states_)];
    const double ll = states_ == 1 ? last[0] : Lse(last[states_ - 1], last[states_ - 2]);
    return -ll;
  }

  // Writes weight * d nll / d logits of this sample's frames (rows of `dlogits` at its frames; the caller zeroes the
  // rest). `nll` is Nll()'s finite value.
  void Grad(double nll, double weight, T* dlogits, int64_t b) {
    Beta();
    const int64_t C = s_.classes;
    std::vector<double> occ(static_cast<size_t>(C));
    for (int64_t t = 0; t < frames_; ++t) {
      std::fill(occ.begin(), occ.end(), kNegInf);
      const double* a = &alpha_[static_cast<size_t>(t * states_)];
      const double* be = &beta_[static_cast<size_t>(t * states_)];
      for (int64_t q = 0; q < states_; ++q) {
        double& o = occ[static_cast<size_t>(ext_[static_cast<size_t>(q)])];
        o = Lse(o, a[q] + be[q]);
      }
      const double* lp = &lp_[static_cast<size_t>(t * C)];
      T* out = dlogits + (s_.batch_major ? (b * s_.frames + t) * C : (t * s_.batch + b) * C);
      for (int64_t c = 0; c < C; ++c) {
        const double gamma =
            occ[static_cast<size_t>(c)] == kNegInf ? 0.0 : std::exp(occ[static_cast<size_t>(c)] - lp[c] + nll);
        out[c] = static_cast<T>(weight * (std::exp(lp[c]) - gamma));
      }
    }
  }

 private:
  double Lp(int64_t t, int64_t q) const {
    return lp_[static_cast<size_t>(t * s_.classes + ext_[static_cast<size_t>(q)])];
  }
  // State q may be reached from q-2: a label unlike the one before it.
  bool Skip(int64_t q) const {
    return q >= 2 && ext_[static_cast<size_t>(q)] != s_.blank &&
           ext_[static_cast<size_t>(q)] != ext_[static_cast<size_t>(q - 2)];
  }

  void Alpha() {
    alpha_.assign(static_cast<size_t>(frames_ * states_), kNegInf);
    alpha_[0] = Lp(0, 0);
    if (states_ > 1) alpha_[1] = Lp(0, 1);
    for (int64_t t = 1; t < frames_; ++t) {
      const double* prev = &alpha_[static_cast<size_t>((t - 1) * states_)];
      double* cur = &alpha_[static_cast<size_t>(t * states_)];
      for (int64_t q = 0; q < states_; ++q) {
        const double a = Lse(prev[q], q >= 1 ? prev[q - 1] : kNegInf, Skip(q) ? prev[q - 2] : kNegInf);
        cur[q] = a == kNegInf ? kNegInf : a + Lp(t, q);
      }
    }
  }

  void Beta() {
    beta_.assign(static_cast<size_t>(frames_ * states_), kNegInf);
    double* last = &beta_[static_cast<size_t>((frames_ - 1) * states_)];
    last[states_ - 1] = Lp(frames_ - 1, states_ - 1);
    if (states_ > 1) last[states_ - 2] = Lp(frames_ - 1, states_ - 2);
    for (int64_t t = frames_ - 2; t >= 0; --t) {
      const double* next = &beta_[static_cast<size_t>((t + 1) * states_)];
      double* cur = &beta_[static_cast<size_t>(t * states_)];
      for (int64_t q = 0; q < states_; ++q) {
        const double a = Lse(next[q], q + 1 < states_ ? next[q + 1] : kNegInf,
                             q + 2 < states_ && Skip(q + 2) ? next[q + 2] : kNegInf);
        cur[q] = a == kNegInf ? kNegInf : a + Lp(t, q);
      }
    }
  }

  const CtcSpec& s_;
  int64_t frames_, states_;
  std::vector<int64_t> ext_;
  std::vector<double> lp_, alpha_, beta_;
};

}  // namespace

int64_t CtcMinFrames(const int64_t* labels, int64_t n) {
  int64_t need = n;
  for (int64_t i = 1; i < n; ++i) need += labels[i] == labels[i - 1];
  return need;
}

template <typename T>
void CtcLoss(const CtcSpec& s, const T* logits, const int64_t* labels, const int64_t* logit_lens,
             const int64_t* label_lens, double* nll) {
  Check(s, labels, logit_lens, label_lens);
  ForFixedChunks(s.batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      Sample<T> smp(s, logits, labels, b, logit_lens[b], label_lens[b]);
      const double v = smp.Nll();
      nll[b] = std::isinf(v) && s.zero_infinity ? 0.0 : v;
    }
  });
}

template <typename T>
void CtcLossGrad(const CtcSpec& s, const T* logits, const int64_t* labels, const int64_t* logit_lens,
                 const int64_t* label_lens, const double* weight, T* dlogits) {
  Check(s, labels, logit_lens, label_lens);
  const int64_t C = s.classes;
  ForFixedChunks(s.batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t frames = logit_lens[b];
      for (int64_t t = frames; t < s.frames; ++t) {
        T* out = dlogits + (s.batch_major ? (b * s.frames + t) * C : (t * s.batch + b) * C);
        std::fill(out, out + C, T(0));
      }
      if (frames == 0) continue;  // nothing to write (an infinite nll without frames has no gradient either)
      Sample<T> smp(s, logits, labels, b, frames, label_lens[b]);
      const double v = smp.Nll();
      if (std::isinf(v)) {
        // zero_infinity: no gradient; otherwise the loss is already infinite and the gradient is not a number.
        const T fill = s.zero_infinity ? T(0) : static_cast<T>(std::numeric_limits<double>::quiet_NaN());
        for (int64_t t = 0; t < frames; ++t) {
          T* out = dlogits + (s.batch_major ? (b * s.frames + t) * C : (t * s.batch + b) * C);
          std::fill(out, out + C, fill);
        }
        continue;
      }
      smp.Grad(v, weight[b], dlogits, b);
    }
  });
}

template void CtcLoss<float>(const CtcSpec&, const float*, const int64_t*, const int64_t*, const int64_t*, double*);
template void CtcLoss<double>(const CtcSpec&, const double*, const int64_t*, const int64_t*, const int64_t*, double*);
template void CtcLossGrad<float>(const CtcSpec&, const float*, const int64_t*, const int64_t*, const int64_t*,
                                 const double*, float*);
template void CtcLossGrad<double>(const CtcSpec&, const double*, const int64_t*, const int64_t*, const int64_t*,
                                  const double*, double*);

}  // namespace ot::cpu
