#include "cpu_ops/rnn_gemm.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_ops/matmul.h"
#include "cpu_ops/parallel_split.h"
#include "kernel_common/vec_math.h"

namespace ot::cpu {

namespace {

using math::VecExp;
using math::VecTanh;

constexpr int64_t kMaxStack = 512;  // hidden sizes up to this keep a step's tanh(c) on the stack

// In place over n floats, compiled per ISA (OT_VEC_CLONES) so that the vec_math formulas vectorize.
OT_VEC_CLONES void SigmoidN(float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = 1.f / (1.f + VecExp(-v[i]));
}
OT_VEC_CLONES void TanhN(float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = VecTanh(v[i]);
}
void ClampN(float* v, int64_t n, float clip) {
  for (int64_t i = 0; i < n; ++i) v[i] = std::min(std::max(v[i], -clip), clip);
}

MatMulSpec Gemm(int64_t m, int64_t k, int64_t n, bool trans_a, bool trans_b, bool accumulate = false) {
  MatMulSpec s;
  s.type = DnnType::kF32;
  s.m = m;
  s.k = k;
  s.n = n;
  s.trans_a = trans_a;
  s.trans_b = trans_b;
  s.accumulate = accumulate;
  return s;
}

// A GEMM of fixed sizes; none when a size is 0 (then C is zeros, or unchanged when accumulating).
class Mm {
 public:
  Mm() = default;
  explicit Mm(const MatMulSpec& s) : spec_(s) {
    if (s.m > 0 && s.n > 0 && s.k > 0) mm_ = std::make_unique<DnnlMatMul>(s);
  }
  void operator()(const float* a, const float* b, float* c) const {
    if (mm_)
      mm_->Run(a, b, c);
    else if (!spec_.accumulate)
      std::fill(c, c + spec_.m * spec_.n, 0.f);
  }

 private:
  MatMulSpec spec_;
  std::unique_ptr<DnnlMatMul> mm_;
};

// What one direction's forward keeps for its backward, rows in X's order: each step's previous state, cell state
// after the step (LSTM), gate activations, gate inputs (only with clip), h R_h^T + Rb_h (GRU, linear_before_reset)
// and r * h_prev (GRU without it).
struct Tape {
  std::vector<float> h_prev, c_prev, c, tc, act, pre, hh, rh;
};

// Column sums of a [rows, cols] matrix into out (+=), rows in order.
void AddColumnSums(const float* m, int64_t rows, int64_t cols, float* out) {
  std::vector<double> acc(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) acc[j] += m[r * cols + j];
  for (int64_t j = 0; j < cols; ++j) out[j] += static_cast<float>(acc[j]);
}

}  // namespace

struct RnnGemm::Impl {
  RnnSpec s;
  int64_t S, N, H, I, GH, rows;
  bool lstm, gru_rh;  // gru_rh: GRU without linear_before_reset (the candidate reads (r * h) R_h^T)
  Mm xw, hr, hr_c, dh, dh_c, dx, dx_acc, dw, dr, dr_c;

  explicit Impl(const RnnSpec& sp)
      : s(sp),
        S(sp.seq),
        N(sp.batch),
        H(sp.hidden),
        I(sp.input),
        GH(sp.gates() * sp.hidden),
        rows(sp.seq * sp.batch),
        lstm(sp.cell == RnnCell::kLstm),
        gru_rh(sp.cell == RnnCell::kGru && !sp.linear_before_reset),
        xw(Gemm(rows, I, GH, false, true)),
        hr(Gemm(N, H, gru_rh ? 2 * H : GH, false, true)),
        dh(Gemm(N, GH, H, false, false)),
        dx(Gemm(rows, GH, I, false, false)),
        dx_acc(Gemm(rows, GH, I, false, false, true)),
        dw(Gemm(GH, rows, I, true, false)),
        dr(Gemm(GH, rows, H, true, false)) {
    if (gru_rh) {
      hr_c = Mm(Gemm(N, H, H, false, true));
      dh_c = Mm(Gemm(N, H, H, false, false));
      dr_c = Mm(Gemm(H, rows, H, true, false));
    }
  }

  int64_t Row(int64_t t, int64_t n) const { return s.batch_major ? n * S + t : t * N + n; }
  int64_t StateAt(int d, int64_t n) const { return (s.batch_major ? n * s.directions + d : d * N + n) * H; }
  int64_t YAt(int64_t t, int d, int64_t n) const {
    const int64_t D = s.directions;
    return (s.batch_major ? ((n * S + t) * D + d) : ((t * D + d) * N + n)) * H;
  }
  bool Reverse(int d) const { return s.directions == 2 ? d == 1 : s.reverse; }
  int64_t Len(const int32_t* lens, int64_t n) const { return lens ? lens[n] : S; }
  float Mask(float pre) const { return s.clip > 0 && !(pre > -s.clip && pre < s.clip) ? 0.f : 1.f; }
  // Where one step of one sequence keeps what the backward reads (null: not kept).
  struct TapeRow {
    float* c = nullptr;   // cell state after the step (LSTM)
    float* tc = nullptr;  // its tanh (LSTM)
    float* hh = nullptr;  // h R_h^T + Rb_h (GRU, linear_before_reset)
  };
  enum Act { kSigmoid, kTanh };
  // act[lo, hi) = activation(clip(xr + hgr)) over gate columns [lo, hi); pre keeps the sums before the clip.
  void Gates(const float* xr, const float* hgr, float* act, float* pre, int64_t lo, int64_t hi, Act f) const {
    for (int64_t j = lo; j < hi; ++j) act[j] = xr[j] + hgr[j];
    Activate(act, pre, lo, hi, f);
  }
  void Activate(float* act, float* pre, int64_t lo, int64_t hi, Act f) const {
    if (pre) std::memcpy(pre + lo, act + lo, sizeof(float) * (hi - lo));
    if (s.clip > 0) ClampN(act + lo, hi - lo, s.clip);
    if (f == kSigmoid)
      SigmoidN(act + lo, hi - lo);
    else
      TanhN(act + lo, hi - lo);
  }
  // One step of one sequence: the gates from its rows of X W^T + Wb (xr) and h R^T + Rb (hgr; hgc: (r * h) R_h^T +
  // Rb_h for GRU without linear_before_reset), the state (hn, cn) updated in place.
  void Cell(const float* xr, const float* hgr, const float* hgc, const float* pd, float* hn, float* cn, float* act,
            float* pre, TapeRow tr) const;

  // Runs body(n0, n1) over the batch in fixed chunks.
  template <typename F>
  void ForBatch(F&& body) const {
    ForFixedChunks(N, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, GH)), body);
  }

  void Direction(int d, const float* x, const float* w, const float* r, const float* b, const int32_t* lens,
                 const float* h0, const float* c0, const float* p, float* y, float* y_h, float* y_c, Tape* tape) const;
  void DirectionGrad(int d, const float* x, const float* w, const float* r, const float* b, const int32_t* lens,
                     const float* h0, const float* c0, const float* p, const float* dy, const float* dy_h,
                     const float* dy_c, float* dx_out, float* dw_out, float* dr_out, float* db_out, float* dh0,
                     float* dc0, float* dp_out) const;
};

void RnnGemm::Impl::Cell(const float* xr, const float* hgr, const float* hgc, const float* pd, float* hn, float* cn,
                         float* act, float* pre, TapeRow tr) const {
  switch (s.cell) {
    case RnnCell::kRnn:
      Gates(xr, hgr, act, pre, 0, H, kTanh);
      std::memcpy(hn, act, sizeof(float) * H);
      break;
    case RnnCell::kGru: {
      // z, r (already done when the candidate reads (r * h) R_h^T), then the candidate.
      float* cand = act + 2 * H;
      if (!hgc) {
        Gates(xr, hgr, act, pre, 0, 2 * H, kSigmoid);
        for (int64_t j = 0; j < H; ++j) cand[j] = xr[2 * H + j] + act[H + j] * hgr[2 * H + j];
        if (tr.hh) std::memcpy(tr.hh, hgr + 2 * H, sizeof(float) * H);
      } else {
        for (int64_t j = 0; j < H; ++j) cand[j] = xr[2 * H + j] + hgc[j];
      }
      Activate(act, pre, 2 * H, 3 * H, kTanh);
      for (int64_t j = 0; j < H; ++j) hn[j] = (1.f - act[j]) * cand[j] + act[j] * hn[j];
      break;
    }
    case RnnCell::kLstm: {
      // Gates i [0, H), o [H, 2H), f [2H, 3H), c [3H, 4H); peepholes i, o, f read the cell state before (i, f) and
      // after (o) the step.
      for (int64_t j = 0; j < 4 * H; ++j) act[j] = xr[j] + hgr[j];
      if (pd)
        for (int64_t j = 0; j < H; ++j) act[j] += pd[j] * cn[j], act[2 * H + j] += pd[2 * H + j] * cn[j];
      Activate(act, pre, 0, H, kSigmoid);
      if (s.input_forget) {
        if (pre) std::memcpy(pre + 2 * H, act + 2 * H, sizeof(float) * H);
        for (int64_t j = 0; j < H; ++j) act[2 * H + j] = 1.f - act[j];
      } else {
        Activate(act, pre, 2 * H, 3 * H, kSigmoid);
      }
      Activate(act, pre, 3 * H, 4 * H, kTanh);
      for (int64_t j = 0; j < H; ++j) cn[j] = act[2 * H + j] * cn[j] + act[j] * act[3 * H + j];
      if (pd)
        for (int64_t j = 0; j < H; ++j) act[H + j] += pd[H + j] * cn[j];
      Activate(act, pre, H, 2 * H, kSigmoid);
      float tcs[kMaxStack];
      float* tc = tr.tc ? tr.tc : H <= kMaxStack ? tcs : nullptr;
      std::vector<float> tcv;
      if (!tc) tcv.resize(static_cast<size_t>(H)), tc = tcv.data();
      std::memcpy(tc, cn, sizeof(float) * H);
      TanhN(tc, H);
      for (int64_t j = 0; j < H; ++j) hn[j] = act[H + j] * tc[j];
      if (tr.c) std::memcpy(tr.c, cn, sizeof(float) * H);
      break;
    }
  }
}

void RnnGemm::Impl::Direction(int d, const float* x, const float* w, const float* r, const float* b,
                              const int32_t* lens, const float* h0, const float* c0, const float* p, float* y,
                              float* y_h, float* y_c, Tape* tape) const {
  const float* wd = w + d * GH * I;
  const float* rd = r + d * GH * H;
  const float* wb = b ? b + d * 2 * GH : nullptr;
  const float* rb = b ? wb + GH : nullptr;
  const float* pd = lstm && p ? p + d * 3 * H : nullptr;
  const bool rev = Reverse(d);
  const int64_t ghr = gru_rh ? 2 * H : GH;  // columns of the per-step h R^T
  std::vector<float> xg(static_cast<size_t>(rows * GH));
  xw(x, wd, xg.data());
  if (wb)
    for (int64_t q = 0; q < rows; ++q)
      for (int64_t j = 0; j < GH; ++j) xg[q * GH + j] += wb[j];
  std::vector<float> h(static_cast<size_t>(N * H), 0.f), c(static_cast<size_t>(N * H), 0.f);
  for (int64_t n = 0; n < N; ++n) {
    if (h0) std::memcpy(&h[n * H], h0 + StateAt(d, n), sizeof(float) * H);
    if (c0 && lstm) std::memcpy(&c[n * H], c0 + StateAt(d, n), sizeof(float) * H);
  }
  std::vector<float> hg(static_cast<size_t>(N * ghr)), hgc(gru_rh ? static_cast<size_t>(N * H) : 0);
  std::vector<float> rhs(gru_rh ? static_cast<size_t>(N * H) : 0, 0.f);
  // Gate activations of the step when no tape keeps them.
  std::vector<float> act_s(tape ? 0 : static_cast<size_t>(N * GH));
  if (tape) {
    const size_t rh = static_cast<size_t>(rows * H), rg = static_cast<size_t>(rows * GH);
    tape->h_prev.assign(rh, 0.f);
    tape->act.assign(rg, 0.f);
    if (s.clip > 0) tape->pre.assign(rg, 0.f);
    if (lstm) tape->c_prev.assign(rh, 0.f), tape->c.assign(rh, 0.f), tape->tc.assign(rh, 0.f);
    if (s.cell == RnnCell::kGru && s.linear_before_reset) tape->hh.assign(rh, 0.f);
    if (gru_rh) tape->rh.assign(rh, 0.f);
  }
  auto time_of = [&](int64_t n, int64_t k) -> int64_t {
    const int64_t len = Len(lens, n);
    return k >= len ? -1 : rev ? len - 1 - k : k;
  };
  auto tape_row = [&](int64_t row) {
    TapeRow tr;
    if (lstm) tr.c = &tape->c[row * H], tr.tc = &tape->tc[row * H];
    if (!tape->hh.empty()) tr.hh = &tape->hh[row * H];
    return tr;
  };
  for (int64_t k = 0; k < S; ++k) {
    hr(h.data(), rd, hg.data());
    if (rb)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < ghr; ++j) hg[n * ghr + j] += rb[j];
    // The gate rows of sequence n at this step (in the tape or the step's scratch).
    auto rows_of = [&](int64_t n, int64_t row, float** act, float** pre) {
      *act = tape ? &tape->act[row * GH] : &act_s[n * GH];
      *pre = tape && s.clip > 0 ? &tape->pre[row * GH] : nullptr;
    };
    if (gru_rh) {
      // z and r first; the candidate reads (r * h) R_h^T.
      ForBatch([&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n) {
          const int64_t t = time_of(n, k);
          float* rh = &rhs[n * H];
          if (t < 0) {
            std::fill(rh, rh + H, 0.f);
            continue;
          }
          const int64_t row = Row(t, n);
          float *act, *pre;
          rows_of(n, row, &act, &pre);
          Gates(&xg[row * GH], &hg[n * ghr], act, pre, 0, 2 * H, kSigmoid);
          for (int64_t j = 0; j < H; ++j) rh[j] = act[H + j] * h[n * H + j];
          if (tape) std::memcpy(&tape->rh[row * H], rh, sizeof(float) * H);
        }
      });
      hr_c(rhs.data(), rd + 2 * H * H, hgc.data());
      if (rb)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < H; ++j) hgc[n * H + j] += rb[2 * H + j];
    }
    ForBatch([&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const int64_t t = time_of(n, k);
        if (t < 0) continue;
        const int64_t row = Row(t, n);
        float *act, *pre;
        rows_of(n, row, &act, &pre);
        const float* xr = &xg[row * GH];
        const float* hgr = &hg[n * ghr];
        float* hn = &h[n * H];
        float* cn = &c[n * H];
        if (tape) {
          std::memcpy(&tape->h_prev[row * H], hn, sizeof(float) * H);
          if (lstm) std::memcpy(&tape->c_prev[row * H], cn, sizeof(float) * H);
        }
        Cell(xr, hgr, gru_rh ? &hgc[n * H] : nullptr, pd, hn, cn, act, pre, tape ? tape_row(row) : TapeRow{});
        if (y) std::memcpy(y + YAt(t, d, n), hn, sizeof(float) * H);
      }
    });
  }
  for (int64_t n = 0; n < N; ++n) {
    if (y_h) std::memcpy(y_h + StateAt(d, n), &h[n * H], sizeof(float) * H);
    if (y_c && lstm) std::memcpy(y_c + StateAt(d, n), &c[n * H], sizeof(float) * H);
  }
}

void RnnGemm::Impl::DirectionGrad(int d, const float* x, const float* w, const float* r, const float* b,
                                  const int32_t* lens, const float* h0, const float* c0, const float* p,
                                  const float* dy, const float* dy_h, const float* dy_c, float* dx_out, float* dw_out,
                                  float* dr_out, float* db_out, float* dh0, float* dc0, float* dp_out) const {
  Tape tp;
  Direction(d, x, w, r, b, lens, h0, c0, p, nullptr, nullptr, nullptr, &tp);
  const float* wd = w + d * GH * I;
  const float* rd = r + d * GH * H;
  const float* pd = lstm && p ? p + d * 3 * H : nullptr;
  const bool rev = Reverse(d);
  auto time_of = [&](int64_t n, int64_t k) -> int64_t {
    const int64_t len = Len(lens, n);
    return k >= len ? -1 : rev ? len - 1 - k : k;
  };
  // The gradients of the state after the current step (dH, dC), per sequence.
  std::vector<float> dH(static_cast<size_t>(N * H), 0.f), dC(static_cast<size_t>(N * H), 0.f);
  for (int64_t n = 0; n < N; ++n) {
    if (dy_h) std::memcpy(&dH[n * H], dy_h + StateAt(d, n), sizeof(float) * H);
    if (dy_c && lstm) std::memcpy(&dC[n * H], dy_c + StateAt(d, n), sizeof(float) * H);
  }
  std::vector<float> dpre(static_cast<size_t>(rows * GH), 0.f), drpre(static_cast<size_t>(rows * GH), 0.f);
  std::vector<float> dph(gru_rh ? static_cast<size_t>(rows * H) : 0, 0.f);
  std::vector<float> drs(static_cast<size_t>(N * GH)), dps(gru_rh ? static_cast<size_t>(N * H) : 0);
  std::vector<float> dhp(static_cast<size_t>(N * H)), dcp(static_cast<size_t>(N * H)), ghp(static_cast<size_t>(N * H));
  std::vector<float> drh(gru_rh ? static_cast<size_t>(N * H) : 0);
  const std::vector<float> ones(static_cast<size_t>(GH), 1.f), no_peep(static_cast<size_t>(3 * H), 0.f);
  std::vector<float> masks(s.clip > 0 ? static_cast<size_t>(N * GH) : 0);
  const float* P = pd ? pd : no_peep.data();
  for (int64_t k = S - 1; k >= 0; --k) {
    std::fill(drs.begin(), drs.end(), 0.f);
    if (gru_rh) std::fill(dps.begin(), dps.end(), 0.f);
    ForBatch([&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const int64_t t = time_of(n, k);
        if (t < 0) continue;
        const int64_t row = Row(t, n);
        float* dh_n = &dH[n * H];
        if (dy) {
          const float* dyr = dy + YAt(t, d, n);
          for (int64_t j = 0; j < H; ++j) dh_n[j] += dyr[j];
        }
        const float* a = &tp.act[row * GH];
        // 0 where the clip held a gate's input (no gradient through it), else 1.
        const float* mk = ones.data();
        if (s.clip > 0) {
          float* m = &masks[n * GH];
          for (int64_t q = 0; q < GH; ++q) m[q] = Mask(tp.pre[row * GH + q]);
          mk = m;
        }
        const float* hp = &tp.h_prev[row * H];
        float* dp_row = &dpre[row * GH];
        float* dr_row = &drs[n * GH];
        float* dhp_n = &dhp[n * H];
        float* dcp_n = &dcp[n * H];
        std::fill(dhp_n, dhp_n + H, 0.f);
        std::fill(dcp_n, dcp_n + H, 0.f);
        switch (s.cell) {
          case RnnCell::kRnn:
            for (int64_t j = 0; j < H; ++j) dp_row[j] = dr_row[j] = dh_n[j] * (1.f - a[j] * a[j]) * mk[j];
            break;
          case RnnCell::kGru:
            for (int64_t j = 0; j < H; ++j) {
              const int64_t z = j, q = 2 * H + j, rr = H + j;
              const float dn = dh_n[j] * (1.f - a[z]);
              dhp_n[j] += dh_n[j] * a[z];
              const float dz = dh_n[j] * (hp[j] - a[q]);
              dp_row[q] = dn * (1.f - a[q] * a[q]) * mk[q];
              dp_row[z] = dz * a[z] * (1.f - a[z]) * mk[z];
              dr_row[z] = dp_row[z];
              if (!gru_rh) {
                dr_row[q] = dp_row[q] * a[rr];
                const float dr_gate = dp_row[q] * tp.hh[row * H + j];
                dp_row[rr] = dr_gate * a[rr] * (1.f - a[rr]) * mk[rr];
                dr_row[rr] = dp_row[rr];
              } else {
                dps[n * H + j] = dp_row[q];
              }
            }
            break;
          case RnnCell::kLstm: {
            const float* tc = &tp.tc[row * H];
            const float* cp = &tp.c_prev[row * H];
            const float* dc = &dC[n * H];
            const float in_forget = s.input_forget ? 1.f : 0.f;
            for (int64_t j = 0; j < H; ++j) {
              const int64_t i = j, o = H + j, f = 2 * H + j, g = 3 * H + j;
              dp_row[o] = dh_n[j] * tc[j] * a[o] * (1.f - a[o]) * mk[o];
              const float dct = dc[j] + dh_n[j] * a[o] * (1.f - tc[j] * tc[j]) + dp_row[o] * P[o];
              const float df = dct * cp[j];
              // input_forget: f = 1 - i, so i also gets -df and f has no input of its own.
              const float di = dct * a[g] - in_forget * df;
              dcp_n[j] = dct * a[f];
              dp_row[g] = dct * a[i] * (1.f - a[g] * a[g]) * mk[g];
              dp_row[i] = di * a[i] * (1.f - a[i]) * mk[i];
              dp_row[f] = (1.f - in_forget) * df * a[f] * (1.f - a[f]) * mk[f];
              dcp_n[j] += dp_row[i] * P[i] + dp_row[f] * P[f];
            }
            std::memcpy(dr_row, dp_row, sizeof(float) * GH);
            break;
          }
        }
      }
    });
    if (gru_rh) {
      // The candidate read (r * h_prev) R_h^T: d(r * h_prev) = dpre_h R_h.
      dh_c(dps.data(), rd + 2 * H * H, drh.data());
      ForBatch([&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n) {
          const int64_t t = time_of(n, k);
          if (t < 0) continue;
          const int64_t row = Row(t, n);
          const float* a = &tp.act[row * GH];
          const float* mk = s.clip > 0 ? &masks[n * GH] : ones.data();
          const float* hp = &tp.h_prev[row * H];
          for (int64_t j = 0; j < H; ++j) {
            const int64_t rr = H + j;
            const float g = drh[n * H + j];
            dhp[n * H + j] += g * a[rr];
            const float v = g * hp[j] * a[rr] * (1.f - a[rr]) * mk[rr];
            dpre[row * GH + rr] = v;
            drs[n * GH + rr] = v;
          }
          std::memcpy(&dph[row * H], &dps[n * H], sizeof(float) * H);
        }
      });
    }
    dh(drs.data(), rd, ghp.data());
    for (int64_t n = 0; n < N; ++n) {
      const int64_t t = time_of(n, k);
      if (t < 0) continue;
      for (int64_t j = 0; j < H; ++j) dH[n * H + j] = dhp[n * H + j] + ghp[n * H + j];
      if (lstm) std::memcpy(&dC[n * H], &dcp[n * H], sizeof(float) * H);
      std::memcpy(&drpre[Row(t, n) * GH], &drs[n * GH], sizeof(float) * GH);
    }
  }
  if (dx_out) (d == 0 ? dx : dx_acc)(dpre.data(), wd, dx_out);
  if (dw_out) dw(dpre.data(), x, dw_out + d * GH * I);
  if (dr_out) {
    float* drd = dr_out + d * GH * H;
    dr(drpre.data(), tp.h_prev.data(), drd);
    if (gru_rh) dr_c(dph.data(), tp.rh.data(), drd + 2 * H * H);
  }
  if (db_out) {
    float* dbd = db_out + d * 2 * GH;
    std::fill(dbd, dbd + 2 * GH, 0.f);
    AddColumnSums(dpre.data(), rows, GH, dbd);
    AddColumnSums(drpre.data(), rows, GH, dbd + GH);
    if (gru_rh) AddColumnSums(dph.data(), rows, H, dbd + GH + 2 * H);
  }
  if (dp_out && lstm) {
    float* dpd = dp_out + d * 3 * H;
    for (int64_t j = 0; j < 3 * H; ++j) {
      // P's i, o, f rows: dpre of the gate times the cell state it read (c_prev for i and f, the new c for o).
      double acc = 0;
      const bool out_gate = j >= H && j < 2 * H;
      const int64_t hj = j % H;
      for (int64_t q = 0; q < rows; ++q)
        acc += static_cast<double>(dpre[q * GH + j]) * (out_gate ? tp.c[q * H + hj] : tp.c_prev[q * H + hj]);
      dpd[j] = static_cast<float>(acc);
    }
  }
  for (int64_t n = 0; n < N; ++n) {
    if (dh0) std::memcpy(dh0 + StateAt(d, n), &dH[n * H], sizeof(float) * H);
    if (dc0) {
      if (lstm)
        std::memcpy(dc0 + StateAt(d, n), &dC[n * H], sizeof(float) * H);
      else
        std::fill(dc0 + StateAt(d, n), dc0 + StateAt(d, n) + H, 0.f);
    }
  }
}

RnnGemm::RnnGemm(const RnnSpec& s) : impl_(std::make_unique<Impl>(s)) {}
RnnGemm::~RnnGemm() = default;

namespace {
void CheckLens(const RnnSpec& s, const int32_t* lens) {
  if (!lens) return;
  for (int64_t n = 0; n < s.batch; ++n)
    if (lens[n] < 0 || lens[n] > s.seq)
      throw std::invalid_argument("sequence_lens[" + std::to_string(n) + "] = " + std::to_string(lens[n]) +
                                  " is outside [0, " + std::to_string(s.seq) + "]");
}
}  // namespace

void RnnGemm::Forward(const float* x, const float* w, const float* r, const float* b, const int32_t* lens,
                      const float* h0, const float* c0, const float* p, float* y, float* y_h, float* y_c) const {
  const Impl& m = *impl_;
  CheckLens(m.s, lens);
  if (y) std::fill(y, y + m.S * m.s.directions * m.N * m.H, 0.f);
  for (int d = 0; d < m.s.directions; ++d) m.Direction(d, x, w, r, b, lens, h0, c0, p, y, y_h, y_c, nullptr);
}

void RnnGemm::Backward(const float* x, const float* w, const float* r, const float* b, const int32_t* lens,
                       const float* h0, const float* c0, const float* p, const float* dy, const float* dy_h,
                       const float* dy_c, float* dx, float* dw, float* dr, float* db, float* dh0, float* dc0,
                       float* dp) const {
  const Impl& m = *impl_;
  CheckLens(m.s, lens);
  for (int d = 0; d < m.s.directions; ++d)
    m.DirectionGrad(d, x, w, r, b, lens, h0, c0, p, dy, dy_h, dy_c, dx, dw, dr, db, dh0, dc0, dp);
}

}  // namespace ot::cpu
