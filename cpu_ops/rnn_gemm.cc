#include "cpu_ops/rnn_gemm.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_ops/dnnl_util.h"
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

// Float scratch carved from one block (the kernel's workspace): Take(n) hands out n floats, 64-byte aligned; the
// sizes are the workspace the kernel declares (RnnGemm::*_workspace_bytes), so a carve past the end is a bug.
class Bump {
 public:
  Bump(float* base, int64_t capacity) : base_(base), cap_(capacity) {}
  float* Take(int64_t n) {
    float* p = base_ + used_;
    used_ += (n + 15) / 16 * 16;
    if (used_ > cap_) throw std::logic_error("rnn_gemm: scratch carved past its declared size");
    return p;
  }

 private:
  float* base_;
  int64_t cap_, used_ = 0;
};

// What one direction's forward keeps for its backward, rows in X's order: the gate activations (X W^T + Wb first,
// overwritten row by row by the step that reads it; later the gate gradients, again in place), each step's previous
// state, the cell state after the step and its tanh (LSTM), the gate inputs (only with clip), h R_h^T + Rb_h (GRU,
// linear_before_reset) and r * h_prev (GRU without it).
struct Tape {
  float *act = nullptr, *pre = nullptr, *h_prev = nullptr, *c = nullptr, *hh = nullptr, *rh = nullptr;
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
  DnnType io;         // X, Y, dY, dX
  bool half;          // io is a half type: those are converted kChunk rows at a time
  Mm xw, hr, hr_c, dh, dh_c, dx, dx_acc, dw, dr, dr_c;
  // Half I/O: X W^T, dX and dW over row chunks ([full, tail]; dW's [first, accumulating][full, tail]).
  Mm xw_c[2], dx_c[2], dw_c[2][2];
  static constexpr int64_t kChunk = 256;
  int64_t ChunkLen(bool tail) const { return tail ? rows - (rows - 1) / kChunk * kChunk : std::min(rows, kChunk); }

  explicit Impl(const RnnSpec& sp, DnnType io_type)
      : s(sp),
        S(sp.seq),
        N(sp.batch),
        H(sp.hidden),
        I(sp.input),
        GH(sp.gates() * sp.hidden),
        rows(sp.seq * sp.batch),
        lstm(sp.cell == RnnCell::kLstm),
        gru_rh(sp.cell == RnnCell::kGru && !sp.linear_before_reset),
        io(io_type),
        half(io_type != DnnType::kF32),
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
    }
    if (sp.cell == RnnCell::kGru) dr_c = Mm(Gemm(H, rows, H, true, false));
    if (half && rows > 0)
      for (int tl = 0; tl < 2; ++tl) {
        const int64_t len = ChunkLen(tl);
        xw_c[tl] = Mm(Gemm(len, I, GH, false, true));
        dx_c[tl] = Mm(Gemm(len, GH, I, false, false));
        dw_c[0][tl] = Mm(Gemm(GH, len, I, true, false));
        dw_c[1][tl] = Mm(Gemm(GH, len, I, true, false, true));
      }
  }

  // Element e of a buffer of the I/O type.
  const uint8_t* At(const void* p, int64_t e) const {
    return static_cast<const uint8_t*>(p) + e * static_cast<int64_t>(DnnTypeSize(io));
  }
  uint8_t* At(void* p, int64_t e) const { return static_cast<uint8_t*>(p) + e * static_cast<int64_t>(DnnTypeSize(io)); }

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

  void Direction(int d, const void* x, const float* w, const float* r, const float* b, const int32_t* lens,
                 const float* h0, const float* c0, const float* p, void* y, float* y_h, float* y_c, Tape* tape,
                 Bump& bump) const;
  void DirectionGrad(int d, const void* x, const float* w, const float* r, const float* b, const int32_t* lens,
                     const float* h0, const float* c0, const float* p, const void* dy, const float* dy_h,
                     const float* dy_c, void* dx_out, float* dw_out, float* dr_out, float* db_out, float* dh0,
                     float* dc0, float* dp_out, Bump& bump) const;
  // Floats of scratch one direction's forward / backward carves (each direction reuses the same block).
  int64_t ForwardFloats() const;
  int64_t BackwardFloats() const;
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

// The forward of direction d. With a tape, its buffers (carved from `bump` by the caller) receive what the backward
// reads and tape->act ends holding the activations; without one, X W^T + Wb is carved here and consumed in place.
void RnnGemm::Impl::Direction(int d, const void* x, const float* w, const float* r, const float* b, const int32_t* lens,
                              const float* h0, const float* c0, const float* p, void* y, float* y_h, float* y_c,
                              Tape* tape, Bump& bump) const {
  const float* wd = w + d * GH * I;
  const float* rd = r + d * GH * H;
  const float* wb = b ? b + d * 2 * GH : nullptr;
  const float* rb = b ? wb + GH : nullptr;
  const float* pd = lstm && p ? p + d * 3 * H : nullptr;
  const bool rev = Reverse(d);
  const int64_t ghr = gru_rh ? 2 * H : GH;  // columns of the per-step h R^T
  // X W^T + Wb, overwritten row by row with the activations of the step that reads it.
  float* xg = tape ? tape->act : bump.Take(rows * GH);
  if (!half) {
    xw(static_cast<const float*>(x), wd, xg);
  } else {
    float* xbuf = bump.Take(kChunk * I);
    for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
      const int64_t len = std::min(kChunk, rows - r0);
      ToFloat(io, At(x, r0 * I), xbuf, len * I);
      xw_c[len != kChunk && r0 > 0 ? 1 : 0](xbuf, wd, xg + r0 * GH);
    }
  }
  if (wb)
    for (int64_t q = 0; q < rows; ++q)
      for (int64_t j = 0; j < GH; ++j) xg[q * GH + j] += wb[j];
  float* h = bump.Take(N * H);
  float* c = bump.Take(N * H);
  float* hg = bump.Take(N * ghr);
  float* hgc = gru_rh ? bump.Take(N * H) : nullptr;
  float* rhs = gru_rh ? bump.Take(N * H) : nullptr;
  std::fill(h, h + N * H, 0.f);
  std::fill(c, c + N * H, 0.f);
  for (int64_t n = 0; n < N; ++n) {
    if (h0) std::memcpy(&h[n * H], h0 + StateAt(d, n), sizeof(float) * H);
    if (c0 && lstm) std::memcpy(&c[n * H], c0 + StateAt(d, n), sizeof(float) * H);
  }
  auto time_of = [&](int64_t n, int64_t k) -> int64_t {
    const int64_t len = Len(lens, n);
    return k >= len ? -1 : rev ? len - 1 - k : k;
  };
  auto tape_row = [&](int64_t row) {
    TapeRow tr;
    if (lstm) tr.c = &tape->c[row * H];
    if (tape->hh) tr.hh = &tape->hh[row * H];
    return tr;
  };
  auto pre_of = [&](int64_t row) { return tape && tape->pre ? &tape->pre[row * GH] : nullptr; };
  for (int64_t k = 0; k < S; ++k) {
    hr(h, rd, hg);
    if (rb)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < ghr; ++j) hg[n * ghr + j] += rb[j];
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
          float* act = &xg[row * GH];
          Gates(act, &hg[n * ghr], act, pre_of(row), 0, 2 * H, kSigmoid);
          for (int64_t j = 0; j < H; ++j) rh[j] = act[H + j] * h[n * H + j];
          if (tape) std::memcpy(&tape->rh[row * H], rh, sizeof(float) * H);
        }
      });
      hr_c(rhs, rd + 2 * H * H, hgc);
      if (rb)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < H; ++j) hgc[n * H + j] += rb[2 * H + j];
    }
    ForBatch([&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const int64_t t = time_of(n, k);
        if (t < 0) continue;
        const int64_t row = Row(t, n);
        float* act = &xg[row * GH];
        float* hn = &h[n * H];
        float* cn = &c[n * H];
        if (tape) {
          std::memcpy(&tape->h_prev[row * H], hn, sizeof(float) * H);
        }
        Cell(act, &hg[n * ghr], gru_rh ? &hgc[n * H] : nullptr, pd, hn, cn, act, pre_of(row),
             tape ? tape_row(row) : TapeRow{});
        if (y && half)
          FromFloat(io, hn, At(y, YAt(t, d, n)), H);
        else if (y)
          std::memcpy(static_cast<float*>(y) + YAt(t, d, n), hn, sizeof(float) * H);
      }
    });
  }
  for (int64_t n = 0; n < N; ++n) {
    if (y_h) std::memcpy(y_h + StateAt(d, n), &h[n * H], sizeof(float) * H);
    if (y_c && lstm) std::memcpy(y_c + StateAt(d, n), &c[n * H], sizeof(float) * H);
  }
}

int64_t RnnGemm::Impl::ForwardFloats() const {
  auto f = [](int64_t n) { return (n + 15) / 16 * 16; };
  return f(rows * GH) + 2 * f(N * H) + f(N * (gru_rh ? 2 * H : GH)) + (gru_rh ? 2 * f(N * H) : 0) +
         (half ? f(kChunk * I) : 0);
}

int64_t RnnGemm::Impl::BackwardFloats() const {
  auto f = [](int64_t n) { return (n + 15) / 16 * 16; };
  const bool gru = s.cell == RnnCell::kGru;
  int64_t tape = f(rows * GH) + f(rows * H);  // act, h_prev
  if (s.clip > 0) tape += f(rows * GH);
  if (lstm) tape += f(rows * H);                        // c
  if (gru) tape += f(rows * H);                         // hh or rh
  int64_t step = ForwardFloats() - f(rows * GH);        // the forward's state buffers (its X W^T is the tape's act)
  step += 2 * f(N * H) + (gru ? f(rows * H) : 0);       // dH, dC; the candidate's R-side gradient
  step += f(N * GH) + (gru_rh ? 2 * f(N * H) : 0);      // drs; dps, drh
  step += 3 * f(N * H) + f(GH) + f(3 * H) + f(N * GH);  // dhp, dcp, ghp; ones, no_peep; the rows being read
  if (lstm) step += 2 * f(N * H);                       // tanh(c); the initial cell states
  if (half) step += f(N * H) + 2 * f(kChunk * I);       // dY rows; X and dX chunks
  if (s.clip > 0) step += f(N * GH);                    // masks
  return tape + step;
}

void RnnGemm::Impl::DirectionGrad(int d, const void* x, const float* w, const float* r, const float* b,
                                  const int32_t* lens, const float* h0, const float* c0, const float* p, const void* dy,
                                  const float* dy_h, const float* dy_c, void* dx_out, float* dw_out, float* dr_out,
                                  float* db_out, float* dh0, float* dc0, float* dp_out, Bump& bump) const {
  const bool gru = s.cell == RnnCell::kGru;
  Tape tp;
  tp.act = bump.Take(rows * GH);
  tp.h_prev = bump.Take(rows * H);
  if (s.clip > 0) tp.pre = bump.Take(rows * GH);
  if (lstm) tp.c = bump.Take(rows * H);
  if (gru) (gru_rh ? tp.rh : tp.hh) = bump.Take(rows * H);
  Direction(d, x, w, r, b, lens, h0, c0, p, nullptr, nullptr, nullptr, &tp, bump);
  const float* wd = w + d * GH * I;
  const float* rd = r + d * GH * H;
  const float* pd = lstm && p ? p + d * 3 * H : nullptr;
  const bool rev = Reverse(d);
  auto time_of = [&](int64_t n, int64_t k) -> int64_t {
    const int64_t len = Len(lens, n);
    return k >= len ? -1 : rev ? len - 1 - k : k;
  };
  // The gate gradients replace the activations row by row (dpre); rows no step ran (past a sequence's length) still
  // hold X W^T + Wb: zeroed, as they add nothing to dX, dW and dB.
  float* dpre = tp.act;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = Len(lens, n); t < S; ++t) std::fill(&dpre[Row(t, n) * GH], &dpre[Row(t, n) * GH] + GH, 0.f);
  // The gradients of the state after the current step (dH, dC), per sequence.
  float* dH = bump.Take(N * H);
  float* dC = bump.Take(N * H);
  std::fill(dH, dH + N * H, 0.f);
  std::fill(dC, dC + N * H, 0.f);
  for (int64_t n = 0; n < N; ++n) {
    if (dy_h) std::memcpy(&dH[n * H], dy_h + StateAt(d, n), sizeof(float) * H);
    if (dy_c && lstm) std::memcpy(&dC[n * H], dy_c + StateAt(d, n), sizeof(float) * H);
  }
  // GRU: the candidate's gradient on the R side (R_h's rows and Rb_h): dpre_h * r with linear_before_reset, dpre_h
  // (of the product (r * h) R_h^T) without. LSTM and RNN: the R side's gradients are dpre's.
  float* dcand = gru ? bump.Take(rows * H) : nullptr;
  if (gru) std::fill(dcand, dcand + rows * H, 0.f);
  float* drs = bump.Take(N * GH);  // this step's R-side gate gradients, the batch's rows
  float* dps = gru_rh ? bump.Take(N * H) : nullptr;
  float* drh = gru_rh ? bump.Take(N * H) : nullptr;
  float* dhp = bump.Take(N * H);
  float* dcp = bump.Take(N * H);
  float* ghp = bump.Take(N * H);
  float* ones = bump.Take(GH);
  float* no_peep = bump.Take(3 * H);
  float* arows = bump.Take(N * GH);  // the activations a step's gradient reads (their row is overwritten)
  float* masks = s.clip > 0 ? bump.Take(N * GH) : nullptr;
  float* tcs = lstm ? bump.Take(N * H) : nullptr;
  float* dys = half ? bump.Take(N * H) : nullptr;  // a step's rows of dY in float
  float* c_init = lstm ? bump.Take(N * H) : nullptr;
  if (lstm) {
    std::fill(c_init, c_init + N * H, 0.f);
    if (c0)
      for (int64_t n = 0; n < N; ++n) std::memcpy(&c_init[n * H], c0 + StateAt(d, n), sizeof(float) * H);
  }
  // LSTM: the cell state step t of sequence n started from: the previous step's (the tape's) or the initial one.
  auto c_prev_of = [&](int64_t t, int64_t n) -> const float* {
    const bool first = rev ? t == Len(lens, n) - 1 : t == 0;
    return first ? &c_init[n * H] : &tp.c[Row(rev ? t + 1 : t - 1, n) * H];
  };
  std::fill(ones, ones + GH, 1.f);
  std::fill(no_peep, no_peep + 3 * H, 0.f);
  const float* P = pd ? pd : no_peep;
  for (int64_t k = S - 1; k >= 0; --k) {
    std::fill(drs, drs + N * GH, 0.f);
    if (gru_rh) std::fill(dps, dps + N * H, 0.f);
    ForBatch([&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const int64_t t = time_of(n, k);
        if (t < 0) continue;
        const int64_t row = Row(t, n);
        float* dh_n = &dH[n * H];
        if (dy) {
          const float* dyr = static_cast<const float*>(dy) + YAt(t, d, n);
          if (half) {
            ToFloat(io, At(dy, YAt(t, d, n)), &dys[n * H], H);
            dyr = &dys[n * H];
          }
          for (int64_t j = 0; j < H; ++j) dh_n[j] += dyr[j];
        }
        float* a = &arows[n * GH];
        std::memcpy(a, &tp.act[row * GH], sizeof(float) * GH);
        // 0 where the clip held a gate's input (no gradient through it), else 1.
        const float* mk = ones;
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
                dr_row[q] = dcand[row * H + j] = dp_row[q] * a[rr];
                const float dr_gate = dp_row[q] * tp.hh[row * H + j];
                dp_row[rr] = dr_gate * a[rr] * (1.f - a[rr]) * mk[rr];
                dr_row[rr] = dp_row[rr];
              } else {
                dps[n * H + j] = dcand[row * H + j] = dp_row[q];
              }
            }
            break;
          case RnnCell::kLstm: {
            // tanh of the new cell state (recomputed: the tape keeps c only) and the state before the step.
            float* tc = &tcs[n * H];
            std::memcpy(tc, &tp.c[row * H], sizeof(float) * H);
            TanhN(tc, H);
            const float* cp = c_prev_of(t, n);
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
      dh_c(dps, rd + 2 * H * H, drh);
      ForBatch([&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n) {
          const int64_t t = time_of(n, k);
          if (t < 0) continue;
          const int64_t row = Row(t, n);
          const float* a = &arows[n * GH];
          const float* mk = s.clip > 0 ? &masks[n * GH] : ones;
          const float* hp = &tp.h_prev[row * H];
          for (int64_t j = 0; j < H; ++j) {
            const int64_t rr = H + j;
            const float g = drh[n * H + j];
            dhp[n * H + j] += g * a[rr];
            const float v = g * hp[j] * a[rr] * (1.f - a[rr]) * mk[rr];
            dpre[row * GH + rr] = v;
            drs[n * GH + rr] = v;
          }
        }
      });
    }
    dh(drs, rd, ghp);
    for (int64_t n = 0; n < N; ++n) {
      if (time_of(n, k) < 0) continue;
      for (int64_t j = 0; j < H; ++j) dH[n * H + j] = dhp[n * H + j] + ghp[n * H + j];
      if (lstm) std::memcpy(&dC[n * H], &dcp[n * H], sizeof(float) * H);
    }
  }
  if (!half) {
    if (dx_out) (d == 0 ? dx : dx_acc)(dpre, wd, static_cast<float*>(dx_out));
    if (dw_out) dw(dpre, static_cast<const float*>(x), dw_out + d * GH * I);
  } else {
    // dX a chunk of rows at a time in float (the second direction adds to the first's, read back), dW summed over
    // the chunks of X.
    float* xbuf = bump.Take(kChunk * I);
    float* cbuf = bump.Take(kChunk * I);
    for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
      const int64_t len = std::min(kChunk, rows - r0);
      const int tl = len != kChunk && r0 > 0 ? 1 : 0;
      if (dx_out) {
        dx_c[tl](dpre + r0 * GH, wd, cbuf);
        if (d > 0) {
          ToFloat(io, At(dx_out, r0 * I), xbuf, len * I);
          for (int64_t e = 0; e < len * I; ++e) cbuf[e] += xbuf[e];
        }
        FromFloat(io, cbuf, At(dx_out, r0 * I), len * I);
      }
      if (dw_out) {
        ToFloat(io, At(x, r0 * I), xbuf, len * I);
        dw_c[r0 > 0 ? 1 : 0][tl](dpre + r0 * GH, xbuf, dw_out + d * GH * I);
      }
    }
  }
  if (dr_out) {
    // R's candidate rows read the same products as the others (h_prev), except without linear_before_reset
    // (r * h_prev): all rows from dpre, then the candidate's from its own gradient.
    float* drd = dr_out + d * GH * H;
    dr(dpre, tp.h_prev, drd);
    if (gru) dr_c(dcand, gru_rh ? tp.rh : tp.h_prev, drd + 2 * H * H);
  }
  if (db_out) {
    float* dbd = db_out + d * 2 * GH;
    std::fill(dbd, dbd + 2 * GH, 0.f);
    AddColumnSums(dpre, rows, GH, dbd);
    if (gru) {
      AddColumnSums(dpre, rows, GH, dbd + GH);
      std::fill(dbd + GH + 2 * H, dbd + 2 * GH, 0.f);
      AddColumnSums(dcand, rows, H, dbd + GH + 2 * H);
    } else {
      std::memcpy(dbd + GH, dbd, sizeof(float) * GH);
    }
  }
  if (dp_out && lstm) {
    float* dpd = dp_out + d * 3 * H;
    for (int64_t j = 0; j < 3 * H; ++j) {
      // P's i, o, f rows: dpre of the gate times the cell state it read (c_prev for i and f, the new c for o).
      double acc = 0;
      const bool out_gate = j >= H && j < 2 * H;
      const int64_t hj = j % H;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t t = 0; t < Len(lens, n); ++t) {
          const int64_t q = Row(t, n);
          acc += static_cast<double>(dpre[q * GH + j]) * (out_gate ? tp.c[q * H + hj] : c_prev_of(t, n)[hj]);
        }
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

RnnGemm::RnnGemm(const RnnSpec& s, DnnType io) : impl_(std::make_unique<Impl>(s, io)) {}
RnnGemm::~RnnGemm() = default;

size_t RnnGemm::forward_workspace_bytes() const { return static_cast<size_t>(impl_->ForwardFloats()) * 4 + 64; }
size_t RnnGemm::backward_workspace_bytes() const { return static_cast<size_t>(impl_->BackwardFloats()) * 4 + 64; }

namespace {
// The scratch of one call: the caller's workspace (64-byte aligned), or a block of its own.
struct Scratch {
  std::vector<float> own;
  float* base;
  Scratch(void* ws, size_t bytes) {
    if (ws) {
      base = static_cast<float*>(ws);
    } else {
      own.resize(bytes / sizeof(float) + 16);
      base = own.data();
    }
  }
};
}  // namespace

void RnnGemm::Forward(const void* x, const float* w, const float* r, const float* b, const int32_t* lens,
                      const float* h0, const float* c0, const float* p, void* y, float* y_h, float* y_c,
                      void* workspace) const {
  const Impl& m = *impl_;
  CheckRnnLengths(m.s, lens);
  if (y) std::memset(y, 0, static_cast<size_t>(m.S * m.s.directions * m.N * m.H) * DnnTypeSize(m.io));
  Scratch sc(workspace, forward_workspace_bytes());
  for (int d = 0; d < m.s.directions; ++d) {
    Bump bump(sc.base, m.ForwardFloats());
    m.Direction(d, x, w, r, b, lens, h0, c0, p, y, y_h, y_c, nullptr, bump);
  }
}

void RnnGemm::Backward(const void* x, const float* w, const float* r, const float* b, const int32_t* lens,
                       const float* h0, const float* c0, const float* p, const void* dy, const float* dy_h,
                       const float* dy_c, void* dx, float* dw, float* dr, float* db, float* dh0, float* dc0, float* dp,
                       void* workspace) const {
  const Impl& m = *impl_;
  CheckRnnLengths(m.s, lens);
  Scratch sc(workspace, backward_workspace_bytes());
  for (int d = 0; d < m.s.directions; ++d) {
    Bump bump(sc.base, m.BackwardFloats());
    m.DirectionGrad(d, x, w, r, b, lens, h0, c0, p, dy, dy_h, dy_c, dx, dw, dr, db, dh0, dc0, dp, bump);
  }
}

}  // namespace ot::cpu
