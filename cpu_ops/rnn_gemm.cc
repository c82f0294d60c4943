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

// What one direction's forward keeps for its backward, rows in X's order, in float32 or (half I/O: mixed precision)
// in the half type, as cuDNN keeps its half RNNs' reserve: the gate activations (later the gate gradients, in place),
// each step's previous state, the cell state after the step (LSTM), h R_h^T + Rb_h (GRU, linear_before_reset) and
// r * h_prev (GRU without it); the gate inputs before the clip (only with clip) in float32.
struct Tape {
  void *act = nullptr, *h_prev = nullptr, *c = nullptr, *hh = nullptr, *rh = nullptr;  // float32, or the half I/O type
  float* pre = nullptr;
};

}  // namespace

struct RnnGemm::Impl {
  RnnSpec s;
  int64_t S, N, H, I, GH, rows;
  bool lstm, gru_rh;  // gru_rh: GRU without linear_before_reset (the candidate reads (r * h) R_h^T)
  DnnType io;         // X, Y, dY, dX
  bool half;          // io is a half type: those are converted kChunk rows at a time
  Mm xw, hr, hr_c, dh, dh_c, dx, dx_acc, dw, dr, dr_c;
  // Half I/O: X W^T of a step's rows; dX, dW and dR over row chunks ([full, tail]; the sums' [first,
  // accumulating][full, tail]; drc_ch: GRU's candidate rows of dR).
  Mm xs, dx_c[2], dw_c[2][2], dr_ch[2][2], drc_ch[2][2];
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
    if (half) xs = Mm(Gemm(N, I, GH, false, true));
    if (half && rows > 0)
      for (int tl = 0; tl < 2; ++tl) {
        const int64_t len = ChunkLen(tl);
        dx_c[tl] = Mm(Gemm(len, GH, I, false, false));
        for (int acc = 0; acc < 2; ++acc) {
          dw_c[acc][tl] = Mm(Gemm(GH, len, I, true, false, acc));
          dr_ch[acc][tl] = Mm(Gemm(GH, len, H, true, false, acc));
          if (sp.cell == RnnCell::kGru) drc_ch[acc][tl] = Mm(Gemm(H, len, H, true, false, acc));
        }
      }
  }

  // Element e of a buffer of the I/O type.
  const uint8_t* At(const void* p, int64_t e) const {
    return static_cast<const uint8_t*>(p) + e * static_cast<int64_t>(DnnTypeSize(io));
  }
  uint8_t* At(void* p, int64_t e) const { return static_cast<uint8_t*>(p) + e * static_cast<int64_t>(DnnTypeSize(io)); }

  // n values of a tape array from element `off`, into / from float.
  void LoadAt(const void* base, int64_t off, int64_t n, float* dst) const {
    if (half)
      ToFloat(io, At(base, off), dst, n);
    else
      std::memcpy(dst, static_cast<const float*>(base) + off, sizeof(float) * n);
  }
  void Load(const void* base, int64_t row, int64_t width, float* dst) const { LoadAt(base, row * width, width, dst); }
  void Store(void* base, int64_t row, int64_t width, const float* src) const {
    if (half)
      FromFloat(io, src, At(base, row * width), width);
    else
      std::memcpy(static_cast<float*>(base) + row * width, src, sizeof(float) * width);
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

  void Direction(int d, const void* x, const float* w, const float* r, const float* b, const int32_t* lens,
                 const float* h0, const float* c0, const float* p, void* y, float* y_h, float* y_c, Tape* tape,
                 Bump& bump) const;
  void DirectionGrad(int d, const void* x, const float* w, const float* r, const float* b, const int32_t* lens,
                     const float* h0, const float* c0, const float* p, const void* dy, const float* dy_h,
                     const float* dy_c, void* dx_out, float* dw_out, float* dr_out, float* db_out, float* dh0,
                     float* dc0, float* dp_out, Bump& bump) const;
  void Finish(int d, const void* x, const float* wd, const int32_t* lens, const Tape& tp, const float* dcand,
              void* dx_out, float* dw_out, float* dr_out, float* db_out, float* dp_out, const float* c_init,
              Bump& bump) const;
  // Floats of scratch one direction's forward (tape: inside the backward) / backward carves (each direction reuses
  // the same block); TapeFloats: of a tape array of `elements` values.
  int64_t ForwardFloats(bool tape) const;
  int64_t TapeFloats(int64_t elements) const;
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
// The forward of direction d. With a tape (its buffers carved by the caller), it receives what the backward reads.
// float32: X W^T + Wb is computed for every row at once into the tape's activation rows (or a buffer of its own) and
// each step overwrites the row it reads; half I/O: X W^T of a step's rows is computed with the step (nothing of the
// size of the tape in float), and the tape holds half values.
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
  float* xg = nullptr;                      // float32: X W^T + Wb of every row
  float *xstep = nullptr, *xgs = nullptr;   // half: the step's X rows and their X W^T + Wb
  if (!half) {
    xg = tape ? static_cast<float*>(tape->act) : bump.Take(rows * GH);
    xw(static_cast<const float*>(x), wd, xg);
    if (wb)
      for (int64_t q = 0; q < rows; ++q)
        for (int64_t j = 0; j < GH; ++j) xg[q * GH + j] += wb[j];
  } else {
    xstep = bump.Take(N * I);
    xgs = bump.Take(N * GH);
  }
  float* h = bump.Take(N * H);
  float* c = bump.Take(N * H);
  float* hg = bump.Take(N * ghr);
  float* hgc = gru_rh ? bump.Take(N * H) : nullptr;
  float* rhs = gru_rh ? bump.Take(N * H) : nullptr;
  float* keep = half && tape ? bump.Take(2 * N * H) : nullptr;  // half tape: a step's c and hh before rounding
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
  // Where step t of sequence n reads X W^T + Wb and leaves its activations.
  auto act_of = [&](int64_t n, int64_t row) { return half ? &xgs[n * GH] : &xg[row * GH]; };
  auto pre_of = [&](int64_t row) { return tape && tape->pre ? &tape->pre[row * GH] : nullptr; };
  for (int64_t k = 0; k < S; ++k) {
    if (half) {
      for (int64_t n = 0; n < N; ++n) {
        const int64_t t = time_of(n, k);
        if (t < 0)
          std::fill(&xstep[n * I], &xstep[n * I] + I, 0.f);
        else
          ToFloat(io, At(x, Row(t, n) * I), &xstep[n * I], I);
      }
      xs(xstep, wd, xgs);
      if (wb)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < GH; ++j) xgs[n * GH + j] += wb[j];
    }
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
          float* act = act_of(n, row);
          Gates(act, &hg[n * ghr], act, pre_of(row), 0, 2 * H, kSigmoid);
          for (int64_t j = 0; j < H; ++j) rh[j] = act[H + j] * h[n * H + j];
          if (tape) Store(tape->rh, row, H, rh);
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
        float* act = act_of(n, row);
        float* hn = &h[n * H];
        float* cn = &c[n * H];
        TapeRow tr;
        if (tape) {
          Store(tape->h_prev, row, H, hn);
          if (lstm) tr.c = half ? &keep[n * 2 * H] : static_cast<float*>(tape->c) + row * H;
          if (tape->hh) tr.hh = half ? &keep[n * 2 * H + H] : static_cast<float*>(tape->hh) + row * H;
        }
        Cell(act, &hg[n * ghr], gru_rh ? &hgc[n * H] : nullptr, pd, hn, cn, act, pre_of(row), tr);
        if (tape && half) {
          Store(tape->act, row, GH, act);
          if (tr.c) Store(tape->c, row, H, tr.c);
          if (tr.hh) Store(tape->hh, row, H, tr.hh);
        }
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

namespace {
int64_t F16(int64_t n) { return (n + 15) / 16 * 16; }
}  // namespace

int64_t RnnGemm::Impl::ForwardFloats(bool tape) const {
  int64_t f = 2 * F16(N * H) + F16(N * (gru_rh ? 2 * H : GH)) + (gru_rh ? 2 * F16(N * H) : 0);
  if (!half) return f + (tape ? 0 : F16(rows * GH));
  return f + F16(N * I) + F16(N * GH) + (tape ? F16(2 * N * H) : 0);
}

int64_t RnnGemm::Impl::TapeFloats(int64_t elements) const { return F16(half ? (elements + 1) / 2 : elements); }

int64_t RnnGemm::Impl::BackwardFloats() const {
  const bool gru = s.cell == RnnCell::kGru;
  int64_t tape = TapeFloats(rows * GH) + TapeFloats(rows * H);  // act, h_prev
  if (s.clip > 0) tape += F16(rows * GH);                       // pre (float)
  if (lstm) tape += TapeFloats(rows * H);                       // c
  if (gru) tape += TapeFloats(rows * H);                        // hh or rh
  int64_t step = ForwardFloats(true);
  step += 2 * F16(N * H) + (gru ? F16(rows * H) : 0);           // dH, dC; the candidate's R-side gradient
  step += F16(N * GH) + (gru_rh ? 2 * F16(N * H) : 0);          // drs; dps, drh
  step += 3 * F16(N * H) + F16(GH) + F16(3 * H) + F16(N * GH);  // dhp, dcp, ghp; ones, no_peep; the rows being read
  step += F16(N * GH) + 2 * F16(N * H);                         // the gate gradients' rows; h_prev, c_prev rows
  if (s.clip > 0) step += F16(N * GH);                          // masks
  if (lstm) step += 2 * F16(N * H);                             // tanh(c); the initial cell states
  if (gru) step += F16(N * H);                                  // hh rows
  step += 2 * F16(H);                                           // Finish's cell state rows
  if (half) step += F16(N * H) + 2 * F16(kChunk * I) + F16(kChunk * GH) + F16(kChunk * H) + F16(H * H);
  return tape + step;
}

void RnnGemm::Impl::DirectionGrad(int d, const void* x, const float* w, const float* r, const float* b,
                                  const int32_t* lens, const float* h0, const float* c0, const float* p, const void* dy,
                                  const float* dy_h, const float* dy_c, void* dx_out, float* dw_out, float* dr_out,
                                  float* db_out, float* dh0, float* dc0, float* dp_out, Bump& bump) const {
  const bool gru = s.cell == RnnCell::kGru;
  Tape tp;
  tp.act = bump.Take(TapeFloats(rows * GH));
  tp.h_prev = bump.Take(TapeFloats(rows * H));
  if (s.clip > 0) tp.pre = bump.Take(rows * GH);
  if (lstm) tp.c = bump.Take(TapeFloats(rows * H));
  if (gru) (gru_rh ? tp.rh : tp.hh) = bump.Take(TapeFloats(rows * H));
  // The products dR reads over every row (h_prev, r * h_prev) hold no step's value past a sequence's length: zeros
  // there, not the workspace's old bytes (0 x NaN is NaN).
  std::memset(tp.h_prev, 0, static_cast<size_t>(TapeFloats(rows * H)) * sizeof(float));
  if (tp.rh) std::memset(tp.rh, 0, static_cast<size_t>(TapeFloats(rows * H)) * sizeof(float));
  Direction(d, x, w, r, b, lens, h0, c0, p, nullptr, nullptr, nullptr, &tp, bump);
  const float* wd = w + d * GH * I;
  const float* rd = r + d * GH * H;
  const float* pd = lstm && p ? p + d * 3 * H : nullptr;
  const bool rev = Reverse(d);
  auto time_of = [&](int64_t n, int64_t k) -> int64_t {
    const int64_t len = Len(lens, n);
    return k >= len ? -1 : rev ? len - 1 - k : k;
  };
  // The gate gradients (dpre) replace the activations row by row; rows no step ran (past a sequence's length) may
  // hold X W^T + Wb: zeroed, as they add nothing to dX, dW and dB.
  std::vector<float> zero_row(static_cast<size_t>(GH), 0.f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = Len(lens, n); t < S; ++t) Store(tp.act, Row(t, n), GH, zero_row.data());
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
  float* arows = bump.Take(N * GH);   // the activations a step's gradient reads, in float
  float* dprows = bump.Take(N * GH);  // the step's gate gradients, stored into the tape when the step is done
  float* hps = bump.Take(N * H);      // h_prev rows in float
  float* cps = bump.Take(N * H);      // c_prev rows in float (LSTM)
  float* masks = s.clip > 0 ? bump.Take(N * GH) : nullptr;
  float* tcs = lstm ? bump.Take(N * H) : nullptr;
  float* c_init = lstm ? bump.Take(N * H) : nullptr;
  float* hhs = gru ? bump.Take(N * H) : nullptr;
  float* dys = half ? bump.Take(N * H) : nullptr;  // a step's rows of dY in float
  if (lstm) {
    std::fill(c_init, c_init + N * H, 0.f);
    if (c0)
      for (int64_t n = 0; n < N; ++n) std::memcpy(&c_init[n * H], c0 + StateAt(d, n), sizeof(float) * H);
  }
  // LSTM: the cell state step t of sequence n started from (the previous step's on the tape, or the initial one)
  // into `dst`.
  auto c_prev_into = [&](int64_t t, int64_t n, float* dst) {
    const bool first = rev ? t == Len(lens, n) - 1 : t == 0;
    if (first)
      std::memcpy(dst, &c_init[n * H], sizeof(float) * H);
    else
      Load(tp.c, Row(rev ? t + 1 : t - 1, n), H, dst);
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
        Load(tp.act, row, GH, a);
        // 0 where the clip held a gate's input (no gradient through it), else 1.
        const float* mk = ones;
        if (s.clip > 0) {
          float* m = &masks[n * GH];
          for (int64_t q = 0; q < GH; ++q) m[q] = Mask(tp.pre[row * GH + q]);
          mk = m;
        }
        float* hp = &hps[n * H];
        Load(tp.h_prev, row, H, hp);
        float* dp_row = &dprows[n * GH];
        float* dr_row = &drs[n * GH];
        float* dhp_n = &dhp[n * H];
        float* dcp_n = &dcp[n * H];
        std::fill(dp_row, dp_row + GH, 0.f);
        std::fill(dhp_n, dhp_n + H, 0.f);
        std::fill(dcp_n, dcp_n + H, 0.f);
        switch (s.cell) {
          case RnnCell::kRnn:
            for (int64_t j = 0; j < H; ++j) dp_row[j] = dr_row[j] = dh_n[j] * (1.f - a[j] * a[j]) * mk[j];
            break;
          case RnnCell::kGru: {
            float* hh = &hhs[n * H];
            if (!gru_rh) Load(tp.hh, row, H, hh);
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
                const float dr_gate = dp_row[q] * hh[j];
                dp_row[rr] = dr_gate * a[rr] * (1.f - a[rr]) * mk[rr];
                dr_row[rr] = dp_row[rr];
              } else {
                dps[n * H + j] = dcand[row * H + j] = dp_row[q];
              }
            }
            break;
          }
          case RnnCell::kLstm: {
            // tanh of the new cell state (recomputed: the tape keeps c only) and the state before the step.
            float* tc = &tcs[n * H];
            Load(tp.c, row, H, tc);
            TanhN(tc, H);
            float* cp = &cps[n * H];
            c_prev_into(t, n, cp);
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
          if (time_of(n, k) < 0) continue;
          const float* a = &arows[n * GH];
          const float* mk = s.clip > 0 ? &masks[n * GH] : ones;
          const float* hp = &hps[n * H];
          for (int64_t j = 0; j < H; ++j) {
            const int64_t rr = H + j;
            const float g = drh[n * H + j];
            dhp[n * H + j] += g * a[rr];
            const float v = g * hp[j] * a[rr] * (1.f - a[rr]) * mk[rr];
            dprows[n * GH + rr] = v;
            drs[n * GH + rr] = v;
          }
        }
      });
    }
    dh(drs, rd, ghp);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t t = time_of(n, k);
      if (t < 0) continue;
      for (int64_t j = 0; j < H; ++j) dH[n * H + j] = dhp[n * H + j] + ghp[n * H + j];
      if (lstm) std::memcpy(&dC[n * H], &dcp[n * H], sizeof(float) * H);
      Store(tp.act, Row(t, n), GH, &dprows[n * GH]);
    }
  }
  Finish(d, x, wd, lens, tp, dcand, dx_out, dw_out, dr_out, db_out, dp_out, c_init, bump);
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

// After the last step: dX, dW and dR over every row at once (half: a chunk of rows at a time, converted), the biases'
// column sums, the peepholes' sums -- all from the gate gradients on the tape.
void RnnGemm::Impl::Finish(int d, const void* x, const float* wd, const int32_t* lens, const Tape& tp,
                           const float* dcand, void* dx_out, float* dw_out, float* dr_out, float* db_out, float* dp_out,
                           const float* c_init, Bump& bump) const {
  const bool gru = s.cell == RnnCell::kGru;
  const bool rev = Reverse(d);
  float* drd = dr_out ? dr_out + d * GH * H : nullptr;
  float* dpd = dp_out && lstm ? dp_out + d * 3 * H : nullptr;
  std::vector<double> wsum(static_cast<size_t>(GH), 0.0), csum(static_cast<size_t>(H), 0.0),
      psum(static_cast<size_t>(3 * H), 0.0);
  // Adds the chunk's rows [r0, r0 + len) (dpre in float) to the bias and peephole sums.
  auto sums = [&](const float* dpre, int64_t r0, int64_t len, float* cbuf, float* cpbuf) {
    for (int64_t q = 0; q < len; ++q)
      for (int64_t j = 0; j < GH; ++j) wsum[static_cast<size_t>(j)] += dpre[q * GH + j];
    if (gru)
      for (int64_t q = r0; q < r0 + len; ++q)
        for (int64_t j = 0; j < H; ++j) csum[static_cast<size_t>(j)] += dcand[q * H + j];
    if (!dpd) return;
    for (int64_t q = 0; q < len; ++q) {
      const int64_t row = r0 + q;
      const int64_t t = s.batch_major ? row % S : row / N, n = s.batch_major ? row / S : row % N;
      if (t >= Len(lens, n)) continue;
      Load(tp.c, row, H, cbuf);
      const bool first = rev ? t == Len(lens, n) - 1 : t == 0;
      if (first)
        std::memcpy(cpbuf, &c_init[n * H], sizeof(float) * H);
      else
        Load(tp.c, Row(rev ? t + 1 : t - 1, n), H, cpbuf);
      // P's i, o, f rows: dpre of the gate times the cell state it read (c_prev for i and f, the new c for o).
      for (int64_t j = 0; j < H; ++j) {
        psum[static_cast<size_t>(j)] += static_cast<double>(dpre[q * GH + j]) * cpbuf[j];
        psum[static_cast<size_t>(H + j)] += static_cast<double>(dpre[q * GH + H + j]) * cbuf[j];
        psum[static_cast<size_t>(2 * H + j)] += static_cast<double>(dpre[q * GH + 2 * H + j]) * cpbuf[j];
      }
    }
  };
  float* cbuf = bump.Take(H);
  float* cpbuf = bump.Take(H);
  if (!half) {
    const float* dpre = static_cast<const float*>(tp.act);
    const float* hprev = static_cast<const float*>(tp.h_prev);
    if (dx_out) (d == 0 ? dx : dx_acc)(dpre, wd, static_cast<float*>(dx_out));
    if (dw_out) dw(dpre, static_cast<const float*>(x), dw_out + d * GH * I);
    if (drd) {
      // R's candidate rows read the same products as the others (h_prev), except without linear_before_reset
      // (r * h_prev): all rows from dpre, then the candidate's from its own gradient.
      dr(dpre, hprev, drd);
      if (gru) dr_c(dcand, gru_rh ? static_cast<const float*>(tp.rh) : hprev, drd + 2 * H * H);
    }
    sums(dpre, 0, rows, cbuf, cpbuf);
  } else {
    // A chunk of rows at a time: dpre, X, h_prev (and r * h_prev) converted; dX (the second direction adding to the
    // first's, read back), dW and dR summed over the chunks.
    float* dbuf = bump.Take(kChunk * GH);
    float* xbuf = bump.Take(kChunk * I);
    float* obuf = bump.Take(kChunk * I);
    float* hbuf = bump.Take(kChunk * H);
    float* cand = bump.Take(H * H);
    for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
      const int64_t len = std::min(kChunk, rows - r0);
      const int tl = len != kChunk && r0 > 0 ? 1 : 0, acc = r0 > 0 ? 1 : 0;
      LoadAt(tp.act, r0 * GH, len * GH, dbuf);  // rows r0.. are contiguous: one conversion of len rows
      if (dx_out) {
        dx_c[tl](dbuf, wd, obuf);
        if (d > 0) {
          ToFloat(io, At(dx_out, r0 * I), xbuf, len * I);
          for (int64_t e = 0; e < len * I; ++e) obuf[e] += xbuf[e];
        }
        FromFloat(io, obuf, At(dx_out, r0 * I), len * I);
      }
      if (dw_out) {
        ToFloat(io, At(x, r0 * I), xbuf, len * I);
        dw_c[acc][tl](dbuf, xbuf, dw_out + d * GH * I);
      }
      if (drd) {
        LoadAt(tp.h_prev, r0 * H, len * H, hbuf);
        dr_ch[acc][tl](dbuf, hbuf, drd);
        if (gru) {
          if (gru_rh) LoadAt(tp.rh, r0 * H, len * H, hbuf);
          drc_ch[acc][tl](dcand + r0 * H, hbuf, cand);
        }
      }
      sums(dbuf, r0, len, cbuf, cpbuf);
    }
    if (drd && gru) std::memcpy(drd + 2 * H * H, cand, sizeof(float) * H * H);
  }
  if (db_out) {
    float* dbd = db_out + d * 2 * GH;
    for (int64_t j = 0; j < GH; ++j) dbd[j] = dbd[GH + j] = static_cast<float>(wsum[static_cast<size_t>(j)]);
    if (gru)
      for (int64_t j = 0; j < H; ++j) dbd[GH + 2 * H + j] = static_cast<float>(csum[static_cast<size_t>(j)]);
  }
  if (dpd)
    for (int64_t j = 0; j < 3 * H; ++j) dpd[j] = static_cast<float>(psum[static_cast<size_t>(j)]);
}

RnnGemm::RnnGemm(const RnnSpec& s, DnnType io) : impl_(std::make_unique<Impl>(s, io)) {}
RnnGemm::~RnnGemm() = default;

size_t RnnGemm::forward_workspace_bytes() const { return static_cast<size_t>(impl_->ForwardFloats(false)) * 4 + 64; }
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
    Bump bump(sc.base, m.ForwardFloats(false));
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
