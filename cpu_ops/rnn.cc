#include "cpu_ops/rnn.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_ops/elementwise_common.h"
#include "cpu_ops/parallel_split.h"
#include "kernel_common/half.h"

namespace ot::cpu {

namespace {

template <typename A>
A Sigmoid(A v) {
  return A(1) / (A(1) + std::exp(-v));
}

// One sequence of one direction: its operands as offsets into the caller's buffers.
template <typename T>
class Sequence {
 public:
  using A = ComputeType<T>;

  Sequence(const RnnSpec& s, const T* x, const T* w, const T* r, const T* b, const T* p, int d, int64_t n)
      : s_(s), x_(x), d_(d), n_(n), gh_(static_cast<int64_t>(s.gates()) * s.hidden) {
    w_ = w + d * gh_ * s.input;
    r_ = r + d * gh_ * s.hidden;
    bias_.assign(static_cast<size_t>(2 * gh_), A(0));
    if (b)
      for (int64_t j = 0; j < 2 * gh_; ++j) bias_[j] = static_cast<A>(b[d * 2 * gh_ + j]);
    peep_.assign(static_cast<size_t>(3 * s.hidden), A(0));
    if (p)
      for (int64_t j = 0; j < 3 * s.hidden; ++j) peep_[j] = static_cast<A>(p[d * 3 * s.hidden + j]);
    xg_.resize(static_cast<size_t>(gh_));
    hg_.resize(static_cast<size_t>(gh_));
    xrow_.resize(static_cast<size_t>(s.input));
    tmp_.resize(static_cast<size_t>(s.hidden));
  }

  // Runs the steps of a sequence of length len from state (h, c), updated in place; y_at(t) is where step t's h goes
  // (null: not stored).
  template <typename YAt>
  void Run(int64_t len, std::vector<A>& h, std::vector<A>& c, YAt y_at) {
    const bool reverse = s_.directions == 2 ? d_ == 1 : s_.reverse;
    for (int64_t k = 0; k < len; ++k) {
      const int64_t t = reverse ? len - 1 - k : k;
      const T* xt = x_ + (s_.batch_major ? (n_ * s_.seq + t) : (t * s_.batch + n_)) * s_.input;
      for (int64_t i = 0; i < s_.input; ++i) xrow_[i] = static_cast<A>(xt[i]);
      Step(h, c);
      if (T* yt = y_at(t))
        for (int64_t j = 0; j < s_.hidden; ++j) yt[j] = static_cast<T>(h[j]);
    }
  }

 private:
  A Clip(A v) const { return s_.clip > 0 ? std::min(std::max(v, A(-s_.clip)), A(s_.clip)) : v; }

  // xg = x W^T + Wb and, for the rows [lo, hi) of R, hg = v R^T + Rb.
  void InputGates() {
    for (int64_t j = 0; j < gh_; ++j) {
      const T* wj = w_ + j * s_.input;
      A acc = bias_[j];
      for (int64_t i = 0; i < s_.input; ++i) acc += xrow_[i] * static_cast<A>(wj[i]);
      xg_[j] = acc;
    }
  }
  void RecurrentGates(const std::vector<A>& v, int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      const T* rj = r_ + j * s_.hidden;
      A acc = bias_[gh_ + j];
      for (int64_t k = 0; k < s_.hidden; ++k) acc += v[k] * static_cast<A>(rj[k]);
      hg_[j] = acc;
    }
  }

  void Step(std::vector<A>& h, std::vector<A>& c) {
    const int64_t H = s_.hidden;
    InputGates();
    switch (s_.cell) {
      case RnnCell::kRnn:
        RecurrentGates(h, 0, H);
        for (int64_t j = 0; j < H; ++j) h[j] = std::tanh(Clip(xg_[j] + hg_[j]));
        break;
      case RnnCell::kGru: {
        // Gates z (rows [0, H)), r ([H, 2H)), h ([2H, 3H)).
        RecurrentGates(h, 0, 2 * H);
        if (s_.linear_before_reset) RecurrentGates(h, 2 * H, 3 * H);
        std::vector<A>& z = tmp_;
        for (int64_t j = 0; j < H; ++j) z[j] = Sigmoid(Clip(xg_[j] + hg_[j]));
        std::vector<A> rh(static_cast<size_t>(H));
        for (int64_t j = 0; j < H; ++j) {
          const A rj = Sigmoid(Clip(xg_[H + j] + hg_[H + j]));
          rh[j] = s_.linear_before_reset ? rj : rj * h[j];
        }
        if (!s_.linear_before_reset) RecurrentGates(rh, 2 * H, 3 * H);
        for (int64_t j = 0; j < H; ++j) {
          const A pre =
              s_.linear_before_reset ? xg_[2 * H + j] + rh[j] * hg_[2 * H + j] : xg_[2 * H + j] + hg_[2 * H + j];
          const A cand = std::tanh(Clip(pre));
          h[j] = (A(1) - z[j]) * cand + z[j] * h[j];
        }
        break;
      }
      case RnnCell::kLstm: {
        // Gates i ([0, H)), o ([H, 2H)), f ([2H, 3H)), c ([3H, 4H)); peepholes i, o, f.
        RecurrentGates(h, 0, 4 * H);
        for (int64_t j = 0; j < H; ++j) {
          const A i = Sigmoid(Clip(xg_[j] + hg_[j] + peep_[j] * c[j]));
          const A f =
              s_.input_forget ? A(1) - i : Sigmoid(Clip(xg_[2 * H + j] + hg_[2 * H + j] + peep_[2 * H + j] * c[j]));
          const A g = std::tanh(Clip(xg_[3 * H + j] + hg_[3 * H + j]));
          c[j] = f * c[j] + i * g;
          const A o = Sigmoid(Clip(xg_[H + j] + hg_[H + j] + peep_[H + j] * c[j]));
          h[j] = o * std::tanh(c[j]);
        }
        break;
      }
    }
  }

  const RnnSpec& s_;
  const T* x_;
  const T* w_;
  const T* r_;
  int d_;
  int64_t n_, gh_;
  std::vector<A> bias_, peep_, xg_, hg_, xrow_, tmp_;
};

}  // namespace

template <typename T>
void RnnForward(const RnnSpec& s, const T* x, const T* w, const T* r, const T* b, const int32_t* lens, const T* h0,
                const T* c0, const T* p, T* y, T* y_h, T* y_c) {
  using A = ComputeType<T>;
  const int64_t S = s.seq, N = s.batch, H = s.hidden;
  const int D = s.directions;
  if (lens)
    for (int64_t n = 0; n < N; ++n)
      if (lens[n] < 0 || lens[n] > S)
        throw std::invalid_argument("sequence_lens[" + std::to_string(n) + "] = " + std::to_string(lens[n]) +
                                    " is outside [0, " + std::to_string(S) + "]");
  // Padded steps of Y stay zero.
  if (y) std::fill(y, y + S * D * N * H, static_cast<T>(A(0)));
  auto state_at = [&](int d, int64_t n) { return (s.batch_major ? n * D + d : d * N + n) * H; };
  ForFixedChunks(D * N, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t k = b0; k < b1; ++k) {
      const int d = static_cast<int>(k / N);
      const int64_t n = k % N;
      std::vector<A> h(static_cast<size_t>(H), A(0)), c(static_cast<size_t>(H), A(0));
      const int64_t st = state_at(d, n);
      if (h0)
        for (int64_t j = 0; j < H; ++j) h[j] = static_cast<A>(h0[st + j]);
      if (c0 && s.cell == RnnCell::kLstm)
        for (int64_t j = 0; j < H; ++j) c[j] = static_cast<A>(c0[st + j]);
      Sequence<T> seq(s, x, w, r, b, s.cell == RnnCell::kLstm ? p : nullptr, d, n);
      seq.Run(lens ? lens[n] : S, h, c, [&](int64_t t) -> T* {
        if (!y) return nullptr;
        return y + (s.batch_major ? ((n * S + t) * D + d) : ((t * D + d) * N + n)) * H;
      });
      if (y_h)
        for (int64_t j = 0; j < H; ++j) y_h[st + j] = static_cast<T>(h[j]);
      if (y_c && s.cell == RnnCell::kLstm)
        for (int64_t j = 0; j < H; ++j) y_c[st + j] = static_cast<T>(c[j]);
    }
  });
}

#define OT_RNN_INST(T)                                                                                          \
  template void RnnForward<T>(const RnnSpec&, const T*, const T*, const T*, const T*, const int32_t*, const T*, \
                              const T*, const T*, T*, T*, T*);
OT_RNN_INST(float)
OT_RNN_INST(double)
OT_RNN_INST(float16)
OT_RNN_INST(bfloat16)

}  // namespace ot::cpu
