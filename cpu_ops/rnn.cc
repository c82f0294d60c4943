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

// What the backward needs of one step: the state it started from, each gate's input before the clip (pre) and its
// activation (act), the new cell state (LSTM) and, for GRU with linear_before_reset, h R_h^T + Rb_h.
template <typename A>
struct StepTape {
  int64_t t = 0;
  std::vector<A> x, h_prev, c_prev, c, pre, act, hh;
};

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
    pre_.resize(static_cast<size_t>(gh_));
    act_.resize(static_cast<size_t>(gh_));
    rh_.resize(static_cast<size_t>(s.hidden));
  }

  bool reverse() const { return s_.directions == 2 ? d_ == 1 : s_.reverse; }
  // The time index of the k-th step of a sequence of length len.
  int64_t TimeOf(int64_t k, int64_t len) const { return reverse() ? len - 1 - k : k; }

  // Runs the steps of a sequence of length len from state (h, c), updated in place; y_at(t) is where step t's h goes
  // (null: not stored); `tape`: when given, each step's record, in the order run.
  template <typename YAt>
  void Run(int64_t len, std::vector<A>& h, std::vector<A>& c, YAt y_at, std::vector<StepTape<A>>* tape = nullptr) {
    for (int64_t k = 0; k < len; ++k) {
      const int64_t t = TimeOf(k, len);
      const T* xt = x_ + (s_.batch_major ? (n_ * s_.seq + t) : (t * s_.batch + n_)) * s_.input;
      for (int64_t i = 0; i < s_.input; ++i) xrow_[i] = static_cast<A>(xt[i]);
      StepTape<A>* rec = nullptr;
      if (tape) {
        tape->emplace_back();
        rec = &tape->back();
        rec->t = t;
        rec->x = xrow_;
        rec->h_prev = h;
        rec->c_prev = c;
      }
      Step(h, c);
      if (rec) {
        rec->pre = pre_;
        rec->act = act_;
        rec->c = c;
        if (s_.cell == RnnCell::kGru && s_.linear_before_reset) rec->hh.assign(hg_.begin() + 2 * s_.hidden, hg_.end());
      }
      if (T* yt = y_at(t))
        for (int64_t j = 0; j < s_.hidden; ++j) yt[j] = static_cast<T>(h[j]);
    }
  }

  const T* w() const { return w_; }
  const T* r() const { return r_; }
  const std::vector<A>& peep() const { return peep_; }

 private:
  A Clip(A v) const { return s_.clip > 0 ? std::min(std::max(v, A(-s_.clip)), A(s_.clip)) : v; }

  // xg = x W^T + Wb, and hg = v R^T + Rb for the rows [lo, hi) of R.
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

  // One step: pre_ and act_ hold each gate's input (before the clip) and its activation.
  void Step(std::vector<A>& h, std::vector<A>& c) {
    const int64_t H = s_.hidden;
    InputGates();
    switch (s_.cell) {
      case RnnCell::kRnn:
        RecurrentGates(h, 0, H);
        for (int64_t j = 0; j < H; ++j) {
          pre_[j] = xg_[j] + hg_[j];
          act_[j] = h[j] = std::tanh(Clip(pre_[j]));
        }
        break;
      case RnnCell::kGru: {
        // Gates z (rows [0, H)), r ([H, 2H)), h ([2H, 3H)).
        RecurrentGates(h, 0, s_.linear_before_reset ? 3 * H : 2 * H);
        for (int64_t j = 0; j < 2 * H; ++j) {
          pre_[j] = xg_[j] + hg_[j];
          act_[j] = Sigmoid(Clip(pre_[j]));
        }
        if (!s_.linear_before_reset) {
          for (int64_t j = 0; j < H; ++j) rh_[j] = act_[H + j] * h[j];
          RecurrentGates(rh_, 2 * H, 3 * H);
        }
        for (int64_t j = 0; j < H; ++j) {
          const int64_t q = 2 * H + j;
          pre_[q] = s_.linear_before_reset ? xg_[q] + act_[H + j] * hg_[q] : xg_[q] + hg_[q];
          act_[q] = std::tanh(Clip(pre_[q]));
          h[j] = (A(1) - act_[j]) * act_[q] + act_[j] * h[j];
        }
        break;
      }
      case RnnCell::kLstm: {
        // Gates i ([0, H)), o ([H, 2H)), f ([2H, 3H)), c ([3H, 4H)); peepholes i, o, f.
        RecurrentGates(h, 0, 4 * H);
        for (int64_t j = 0; j < H; ++j) {
          const int64_t i = j, o = H + j, f = 2 * H + j, g = 3 * H + j;
          pre_[i] = xg_[i] + hg_[i] + peep_[i] * c[j];
          act_[i] = Sigmoid(Clip(pre_[i]));
          pre_[f] = xg_[f] + hg_[f] + peep_[f] * c[j];
          act_[f] = s_.input_forget ? A(1) - act_[i] : Sigmoid(Clip(pre_[f]));
          pre_[g] = xg_[g] + hg_[g];
          act_[g] = std::tanh(Clip(pre_[g]));
          c[j] = act_[f] * c[j] + act_[i] * act_[g];
          pre_[o] = xg_[o] + hg_[o] + peep_[o] * c[j];
          act_[o] = Sigmoid(Clip(pre_[o]));
          h[j] = act_[o] * std::tanh(c[j]);
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
  std::vector<A> bias_, peep_, xg_, hg_, xrow_, pre_, act_, rh_;
};

int64_t StateAt(const RnnSpec& s, int d, int64_t n) {
  return (s.batch_major ? n * s.directions + d : d * s.batch + n) * s.hidden;
}
int64_t YAt(const RnnSpec& s, int64_t t, int d, int64_t n) {
  const int64_t D = s.directions;
  return (s.batch_major ? ((n * s.seq + t) * D + d) : ((t * D + d) * s.batch + n)) * s.hidden;
}
int64_t XAt(const RnnSpec& s, int64_t t, int64_t n) {
  return (s.batch_major ? n * s.seq + t : t * s.batch + n) * s.input;
}

// The initial state of sequence n of direction d.
template <typename T, typename A>
void InitialState(const RnnSpec& s, const T* h0, const T* c0, int d, int64_t n, std::vector<A>& h, std::vector<A>& c) {
  h.assign(static_cast<size_t>(s.hidden), A(0));
  c.assign(static_cast<size_t>(s.hidden), A(0));
  const int64_t st = StateAt(s, d, n);
  if (h0)
    for (int64_t j = 0; j < s.hidden; ++j) h[j] = static_cast<A>(h0[st + j]);
  if (c0 && s.cell == RnnCell::kLstm)
    for (int64_t j = 0; j < s.hidden; ++j) c[j] = static_cast<A>(c0[st + j]);
}

}  // namespace

void CheckRnnLengths(const RnnSpec& s, const int32_t* lens) {
  if (!lens) return;
  for (int64_t n = 0; n < s.batch; ++n)
    if (lens[n] < 0 || lens[n] > s.seq)
      throw std::invalid_argument("sequence_lens[" + std::to_string(n) + "] = " + std::to_string(lens[n]) +
                                  " is outside [0, " + std::to_string(s.seq) + "]");
}

template <typename T>
void RnnForward(const RnnSpec& s, const T* x, const T* w, const T* r, const T* b, const int32_t* lens, const T* h0,
                const T* c0, const T* p, T* y, T* y_h, T* y_c) {
  using A = ComputeType<T>;
  const int64_t S = s.seq, N = s.batch, H = s.hidden;
  const int D = s.directions;
  CheckRnnLengths(s, lens);
  // Padded steps of Y stay zero.
  if (y) std::fill(y, y + S * D * N * H, static_cast<T>(A(0)));
  ForFixedChunks(D * N, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t k = b0; k < b1; ++k) {
      const int d = static_cast<int>(k / N);
      const int64_t n = k % N;
      std::vector<A> h, c;
      InitialState(s, h0, c0, d, n, h, c);
      Sequence<T> seq(s, x, w, r, b, s.cell == RnnCell::kLstm ? p : nullptr, d, n);
      seq.Run(lens ? lens[n] : S, h, c, [&](int64_t t) -> T* { return y ? y + YAt(s, t, d, n) : nullptr; });
      const int64_t st = StateAt(s, d, n);
      if (y_h)
        for (int64_t j = 0; j < H; ++j) y_h[st + j] = static_cast<T>(h[j]);
      if (y_c && s.cell == RnnCell::kLstm)
        for (int64_t j = 0; j < H; ++j) y_c[st + j] = static_cast<T>(c[j]);
    }
  });
}

namespace {

// The backward of one sequence of one direction through its tape, newest step first. Writes dX rows into dx (this
// direction's own buffer), the gradients of the initial state into dh0/dc0, and adds the parameters' gradients
// into this sequence's own sums (dw [G*H, I], dr [G*H, H], dbw and dbr [G*H], dp [3*H]).
template <typename T>
struct SequenceGrad {
  using A = ComputeType<T>;
  const RnnSpec& s;
  const Sequence<T>& seq;
  std::vector<A>& dw;
  std::vector<A>& dr;
  std::vector<A>& dbw;
  std::vector<A>& dbr;
  std::vector<A>& dp;

  A Mask(A pre) const { return s.clip > 0 && !(pre > -s.clip && pre < s.clip) ? A(0) : A(1); }

  // dh, dc: the gradient of the final state on entry, of the initial state on return. dy_at(t): the gradient of
  // Y's row t (null: none); dx_at(t): where the gradient of X's row t goes.
  template <typename DyAt, typename DxAt>
  void Run(const std::vector<StepTape<A>>& tape, std::vector<A>& dh, std::vector<A>& dc, DyAt dy_at, DxAt dx_at) {
    const int64_t H = s.hidden, I = s.input, GH = static_cast<int64_t>(s.gates()) * H;
    std::vector<A> dpre(GH), drpre(GH), dh_prev(H), dc_prev(H);
    for (size_t k = tape.size(); k-- > 0;) {
      const StepTape<A>& st = tape[k];
      if (const T* dy = dy_at(st.t))
        for (int64_t j = 0; j < H; ++j) dh[j] += static_cast<A>(dy[j]);
      std::fill(dh_prev.begin(), dh_prev.end(), A(0));
      std::fill(dc_prev.begin(), dc_prev.end(), A(0));
      Gates(st, dh, dc, dpre, drpre, dh_prev, dc_prev);
      // Through the GEMMs: x W^T (every gate) and v R^T (drpre; GRU's candidate without linear_before_reset reads
      // r * h_prev, its product handled in Gates).
      A* dxt = dx_at(st.t);
      for (int64_t j = 0; j < GH; ++j) {
        dbw[j] += dpre[j];
        dbr[j] += drpre[j];
        const T* wj = seq.w() + j * I;
        A* dwj = dw.data() + j * I;
        for (int64_t i = 0; i < I; ++i) {
          dwj[i] += dpre[j] * st.x[i];
          dxt[i] += dpre[j] * static_cast<A>(wj[i]);
        }
      }
      const bool gru_rh = s.cell == RnnCell::kGru && !s.linear_before_reset;
      for (int64_t j = 0; j < GH; ++j) {
        if (gru_rh && j >= 2 * H) continue;  // done in Gates (it reads r * h_prev)
        const T* rj = seq.r() + j * H;
        A* drj = dr.data() + j * H;
        for (int64_t q = 0; q < H; ++q) {
          drj[q] += drpre[j] * st.h_prev[q];
          dh_prev[q] += drpre[j] * static_cast<A>(rj[q]);
        }
      }
      dh.swap(dh_prev);
      dc.swap(dc_prev);
    }
  }

  // A step's gate gradients: dpre (of each gate's input), drpre (of its h R^T + Rb part, where that differs), and the
  // parts of dh_prev and dc_prev that do not go through R.
  void Gates(const StepTape<A>& st, const std::vector<A>& dh, const std::vector<A>& dc, std::vector<A>& dpre,
             std::vector<A>& drpre, std::vector<A>& dh_prev, std::vector<A>& dc_prev) {
    const int64_t H = s.hidden;
    const std::vector<A>& a = st.act;
    switch (s.cell) {
      case RnnCell::kRnn:
        for (int64_t j = 0; j < H; ++j) dpre[j] = drpre[j] = dh[j] * (A(1) - a[j] * a[j]) * Mask(st.pre[j]);
        break;
      case RnnCell::kGru: {
        std::vector<A> dr_gate(H, A(0));
        for (int64_t j = 0; j < H; ++j) {
          const int64_t z = j, q = 2 * H + j;
          const A dn = dh[j] * (A(1) - a[z]);
          dh_prev[j] += dh[j] * a[z];
          const A dz = dh[j] * (st.h_prev[j] - a[q]);
          dpre[q] = dn * (A(1) - a[q] * a[q]) * Mask(st.pre[q]);
          dpre[z] = dz * a[z] * (A(1) - a[z]) * Mask(st.pre[z]);
          if (s.linear_before_reset) {
            drpre[q] = dpre[q] * a[H + j];
            dr_gate[j] = dpre[q] * st.hh[j];
          } else {
            drpre[q] = dpre[q];
          }
        }
        if (!s.linear_before_reset) {
          // The candidate reads (r * h_prev) R_h^T: its gradient d(rh) = R_h^T dpre_h.
          std::vector<A> drh(H, A(0));
          for (int64_t j = 0; j < H; ++j) {
            const int64_t q = 2 * H + j;
            const T* rj = seq.r() + q * H;
            A* drj = dr.data() + q * H;
            for (int64_t k = 0; k < H; ++k) {
              drj[k] += dpre[q] * a[H + k] * st.h_prev[k];
              drh[k] += dpre[q] * static_cast<A>(rj[k]);
            }
          }
          for (int64_t k = 0; k < H; ++k) {
            dr_gate[k] = drh[k] * st.h_prev[k];
            dh_prev[k] += drh[k] * a[H + k];
          }
        }
        for (int64_t j = 0; j < H; ++j) {
          const int64_t r = H + j;
          dpre[r] = dr_gate[j] * a[r] * (A(1) - a[r]) * Mask(st.pre[r]);
          drpre[j] = dpre[j];
          drpre[r] = dpre[r];
        }
        break;
      }
      case RnnCell::kLstm: {
        const std::vector<A>& P = seq.peep();
        for (int64_t j = 0; j < H; ++j) {
          const int64_t i = j, o = H + j, f = 2 * H + j, g = 3 * H + j;
          const A tc = std::tanh(st.c[j]);
          const A d_o = dh[j] * tc;
          A dct = dc[j] + dh[j] * a[o] * (A(1) - tc * tc);
          dpre[o] = d_o * a[o] * (A(1) - a[o]) * Mask(st.pre[o]);
          dct += dpre[o] * P[o];
          dp[o] += dpre[o] * st.c[j];
          A df = dct * st.c_prev[j];
          A di = dct * a[g];
          const A dg = dct * a[i];
          dc_prev[j] += dct * a[f];
          if (s.input_forget) {
            di -= df;
            df = A(0);
          }
          dpre[g] = dg * (A(1) - a[g] * a[g]) * Mask(st.pre[g]);
          dpre[i] = di * a[i] * (A(1) - a[i]) * Mask(st.pre[i]);
          dpre[f] = s.input_forget ? A(0) : df * a[f] * (A(1) - a[f]) * Mask(st.pre[f]);
          dc_prev[j] += dpre[i] * P[i] + dpre[f] * P[f];
          dp[i] += dpre[i] * st.c_prev[j];
          dp[f] += dpre[f] * st.c_prev[j];
        }
        drpre = dpre;
        break;
      }
    }
  }
};

}  // namespace

template <typename T>
void RnnBackward(const RnnSpec& s, const T* x, const T* w, const T* r, const T* b, const int32_t* lens, const T* h0,
                 const T* c0, const T* p, const T* dy, const T* dy_h, const T* dy_c, T* dx, T* dw, T* dr, T* db, T* dh0,
                 T* dc0, T* dp) {
  using A = ComputeType<T>;
  const int64_t S = s.seq, N = s.batch, H = s.hidden, I = s.input, GH = static_cast<int64_t>(s.gates()) * H;
  const int D = s.directions;
  const bool lstm = s.cell == RnnCell::kLstm;
  CheckRnnLengths(s, lens);
  // Per sequence and direction: its own sums of the parameters' gradients (added in a fixed order below, so the
  // result does not depend on scheduling), and per direction its own dX.
  struct Sums {
    std::vector<A> dw, dr, dbw, dbr, dp;
  };
  std::vector<Sums> sums(static_cast<size_t>(D * N));
  std::vector<std::vector<A>> dxd(static_cast<size_t>(D), std::vector<A>(static_cast<size_t>(S * N * I), A(0)));
  ForFixedChunks(D * N, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t k = b0; k < b1; ++k) {
      const int d = static_cast<int>(k / N);
      const int64_t n = k % N;
      Sums& sm = sums[k];
      sm.dw.assign(static_cast<size_t>(GH * I), A(0));
      sm.dr.assign(static_cast<size_t>(GH * H), A(0));
      sm.dbw.assign(static_cast<size_t>(GH), A(0));
      sm.dbr.assign(static_cast<size_t>(GH), A(0));
      sm.dp.assign(static_cast<size_t>(3 * H), A(0));
      std::vector<A> h, c;
      InitialState(s, h0, c0, d, n, h, c);
      Sequence<T> seq(s, x, w, r, b, lstm ? p : nullptr, d, n);
      std::vector<StepTape<A>> tape;
      seq.Run(
          lens ? lens[n] : S, h, c, [](int64_t) -> T* { return nullptr; }, &tape);
      const int64_t st = StateAt(s, d, n);
      std::vector<A> gh(static_cast<size_t>(H), A(0)), gc(static_cast<size_t>(H), A(0));
      if (dy_h)
        for (int64_t j = 0; j < H; ++j) gh[j] = static_cast<A>(dy_h[st + j]);
      if (dy_c && lstm)
        for (int64_t j = 0; j < H; ++j) gc[j] = static_cast<A>(dy_c[st + j]);
      SequenceGrad<T> grad{s, seq, sm.dw, sm.dr, sm.dbw, sm.dbr, sm.dp};
      grad.Run(
          tape, gh, gc, [&](int64_t t) -> const T* { return dy ? dy + YAt(s, t, d, n) : nullptr; },
          [&](int64_t t) -> A* { return dxd[d].data() + XAt(s, t, n); });
      if (dh0)
        for (int64_t j = 0; j < H; ++j) dh0[st + j] = static_cast<T>(gh[j]);
      if (dc0 && lstm)
        for (int64_t j = 0; j < H; ++j) dc0[st + j] = static_cast<T>(gc[j]);
    }
  });
  if (dx)
    for (int64_t e = 0; e < S * N * I; ++e) {
      A v = A(0);
      for (int d = 0; d < D; ++d) v += dxd[d][e];
      dx[e] = static_cast<T>(v);
    }
  for (int d = 0; d < D; ++d) {
    auto reduce = [&](T* out, int64_t len, std::vector<A> Sums::*field, int64_t offset) {
      if (!out) return;
      for (int64_t e = 0; e < len; ++e) {
        A v = A(0);
        for (int64_t n = 0; n < N; ++n) v += (sums[d * N + n].*field)[e];
        out[offset + e] = static_cast<T>(v);
      }
    };
    reduce(dw, GH * I, &Sums::dw, d * GH * I);
    reduce(dr, GH * H, &Sums::dr, d * GH * H);
    reduce(db, GH, &Sums::dbw, d * 2 * GH);
    reduce(db, GH, &Sums::dbr, d * 2 * GH + GH);
    if (lstm) reduce(dp, 3 * H, &Sums::dp, d * 3 * H);
  }
  if (dc0 && !lstm) std::fill(dc0, dc0 + D * N * H, static_cast<T>(A(0)));
}

#define OT_RNN_INST(T)                                                                                           \
  template void RnnForward<T>(const RnnSpec&, const T*, const T*, const T*, const T*, const int32_t*, const T*,  \
                              const T*, const T*, T*, T*, T*);                                                   \
  template void RnnBackward<T>(const RnnSpec&, const T*, const T*, const T*, const T*, const int32_t*, const T*, \
                               const T*, const T*, const T*, const T*, const T*, T*, T*, T*, T*, T*, T*, T*);
OT_RNN_INST(float)
OT_RNN_INST(double)
OT_RNN_INST(float16)
OT_RNN_INST(bfloat16)

}  // namespace ot::cpu
