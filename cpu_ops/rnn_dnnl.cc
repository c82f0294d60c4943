#include "cpu_ops/rnn_dnnl.h"

#include <omp.h>
#include <tbb/parallel_invoke.h>

#include <algorithm>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace ot::cpu {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using Md = dnnl::memory::desc;

// Carves 64-byte aligned blocks from one workspace of `capacity` bytes; with a null base it only counts them (the
// sizes the kernel declares come from the same carving as the calls).
class Carve {
 public:
  Carve(void* base, size_t capacity) : base_(static_cast<uint8_t*>(base)), cap_(capacity) {}
  void* Take(size_t bytes) {
    void* p = base_ ? base_ + used_ : nullptr;
    used_ += (bytes + 63) / 64 * 64;
    if (base_ && used_ > cap_) throw std::logic_error("rnn_dnnl: scratch carved past its declared size");
    return p;
  }
  float* Floats(int64_t n) { return static_cast<float*>(Take(static_cast<size_t>(n) * sizeof(float))); }
  size_t used() const { return used_; }

 private:
  uint8_t* base_;
  size_t cap_, used_ = 0;
};

// One oneDNN primitive and what a call needs of it: the weights' layouts it asks for, with the reorders into them
// from plain ldigo where they differ, and its workspace and scratchpad.
struct Prim {
  dnnl::primitive prim;
  Md wl, wi, ws, scratch;
  std::optional<dnnl::reorder> to_wl, to_wi;
};

Md AnyOf(const Md& m) { return Md(m.dims(), dt::f32, tag::any); }

dnnl::memory Mem(const Md& m, const void* p) { return dnnl::memory(m, DnnlEngine(), const_cast<void*>(p)); }

}  // namespace

// One direction of a node: unidirectional primitives (inference, training forward, backward) over that direction's
// slices of W, R, B, P and the states; Y and dY are ONNX's whole [T, ydirs, N, H] arrays, of which it reads and
// writes its own direction `ylane`.
struct RnnPrimitive::Impl {
  RnnSpec s;
  int64_t ydirs, ylane;
  int64_t T, N, I, H, D, G, Gb;  // Gb: oneDNN's bias gates (lbr_gru has a fourth: the candidate's recurrent bias)
  bool lstm, lbr, peep;
  int perm[4] = {0, 1, 2, 3};  // ONNX's gate for oneDNN's gate g
  dnnl::rnn_direction dir;
  Md src, iter, wl_plain, wi_plain, wp, bias, dst;
  Md dwl, dwi;  // the backward's weight gradients: plain ldigo
  Prim inf, train, back;
  size_t fwd_bytes = 0, bwd_bytes = 0;

  Impl(const RnnSpec& sp, bool peepholes, int64_t y_dirs, int64_t y_lane)
      : s(sp),
        ydirs(y_dirs),
        ylane(y_lane),
        T(sp.seq),
        N(sp.batch),
        I(sp.input),
        H(sp.hidden),
        D(sp.directions),
        G(sp.gates()),
        Gb(sp.gates() + (sp.cell == RnnCell::kGru && sp.linear_before_reset ? 1 : 0)),
        lstm(sp.cell == RnnCell::kLstm),
        lbr(sp.cell == RnnCell::kGru && sp.linear_before_reset),
        peep(sp.cell == RnnCell::kLstm && peepholes),
        dir(sp.reverse ? dnnl::rnn_direction::unidirectional_right2left
                       : dnnl::rnn_direction::unidirectional_left2right) {
    if (lstm) perm[1] = 2, perm[2] = 3, perm[3] = 1;  // oneDNN i, f, c, o from ONNX's i, o, f, c
    src = Md({T, N, I}, dt::f32, tag::tnc);
    iter = Md({1, D, N, H}, dt::f32, tag::ldnc);
    wl_plain = Md({1, D, I, G, H}, dt::f32, tag::ldigo);
    wi_plain = Md({1, D, H, G, H}, dt::f32, tag::ldigo);
    wp = peep ? Md({1, D, 3, H}, dt::f32, tag::ldgo) : Md();
    bias = Md({1, D, Gb, H}, dt::f32, tag::ldgo);
    dst = Md({T, N, D * H}, dt::f32, tag::tnc);
    dwl = wl_plain;
    dwi = wi_plain;
    omp_set_num_threads(1);  // the team the calls run with (RnnPrimitive::Forward): oneDNN sizes its work for it
    const dnnl::primitive_desc fi = ForwardPd(dnnl::prop_kind::forward_inference);
    const dnnl::primitive_desc ft = ForwardPd(dnnl::prop_kind::forward_training);
    const dnnl::primitive_desc bw = BackwardPd(ft);
    inf = MakePrim(fi);
    train = MakePrim(ft);
    back = MakePrim(bw);
    fwd_bytes = Forward({}, nullptr, 0);
    bwd_bytes = Backward({}, nullptr, 0);
  }

  dnnl::primitive_attr Attr() const {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }

  dnnl::primitive_desc ForwardPd(dnnl::prop_kind pk) const {
    const dnnl::primitive_attr a = Attr();
    const Md wla = AnyOf(wl_plain), wia = AnyOf(wi_plain);
    dnnl::engine& e = DnnlEngine();
    switch (s.cell) {
      case RnnCell::kRnn: {
        const dnnl::vanilla_rnn_forward::desc d(pk, dnnl::algorithm::eltwise_tanh, dir, src, iter, wla, wia, bias, dst,
                                                iter);
        return dnnl::primitive_desc(&d.data, &a, e, nullptr);
      }
      case RnnCell::kGru:
        if (lbr) {
          const dnnl::lbr_gru_forward::desc d(pk, dir, src, iter, wla, wia, bias, dst, iter);
          return dnnl::primitive_desc(&d.data, &a, e, nullptr);
        } else {
          const dnnl::gru_forward::desc d(pk, dir, src, iter, wla, wia, bias, dst, iter);
          return dnnl::primitive_desc(&d.data, &a, e, nullptr);
        }
      case RnnCell::kLstm: {
        const dnnl::lstm_forward::desc d(pk, dir, src, iter, iter, wla, wia, wp, Md(), bias, dst, iter, iter);
        return dnnl::primitive_desc(&d.data, &a, e, nullptr);
      }
    }
    throw std::logic_error("rnn_dnnl: unknown cell");
  }

  dnnl::primitive_desc BackwardPd(const dnnl::primitive_desc& hint) const {
    const dnnl::primitive_attr a = Attr();
    const Md wla = AnyOf(wl_plain), wia = AnyOf(wi_plain);
    const auto bk = dnnl::prop_kind::backward;
    dnnl::engine& e = DnnlEngine();
    switch (s.cell) {
      case RnnCell::kRnn: {
        const dnnl::vanilla_rnn_backward::desc d(bk, dnnl::algorithm::eltwise_tanh, dir, src, iter, wla, wia, bias, dst,
                                                 iter, src, iter, dwl, dwi, bias, dst, iter);
        return dnnl::primitive_desc(&d.data, &a, e, hint.get());
      }
      case RnnCell::kGru:
        if (lbr) {
          const dnnl::lbr_gru_backward::desc d(bk, dir, src, iter, wla, wia, bias, dst, iter, src, iter, dwl, dwi, bias,
                                               dst, iter);
          return dnnl::primitive_desc(&d.data, &a, e, hint.get());
        } else {
          const dnnl::gru_backward::desc d(bk, dir, src, iter, wla, wia, bias, dst, iter, src, iter, dwl, dwi, bias,
                                           dst, iter);
          return dnnl::primitive_desc(&d.data, &a, e, hint.get());
        }
      case RnnCell::kLstm: {
        const dnnl::lstm_backward::desc d(bk, dir, src, iter, iter, wla, wia, wp, Md(), bias, dst, iter, iter, src,
                                          iter, iter, dwl, dwi, wp, Md(), bias, dst, iter, iter);
        return dnnl::primitive_desc(&d.data, &a, e, hint.get());
      }
    }
    throw std::logic_error("rnn_dnnl: unknown cell");
  }

  Prim MakePrim(const dnnl::primitive_desc& pd) const {
    Prim p;
    p.prim = dnnl::primitive(pd.get());
    p.wl = pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_WEIGHTS_LAYER);
    p.wi = pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_WEIGHTS_ITER);
    p.ws = pd.query_md(dnnl::query::workspace_md);
    p.scratch = pd.scratchpad_desc();
    dnnl::engine& e = DnnlEngine();
    if (p.wl != wl_plain) p.to_wl = dnnl::reorder(dnnl::reorder::primitive_desc(e, wl_plain, e, p.wl));
    if (p.wi != wi_plain) p.to_wi = dnnl::reorder(dnnl::reorder::primitive_desc(e, wi_plain, e, p.wi));
    return p;
  }

  // The operands of one call in oneDNN's terms (pointers into the caller's buffers or the workspace).
  struct Args {
    const void* x = nullptr;
    const float *w = nullptr, *r = nullptr, *b = nullptr, *h0 = nullptr, *c0 = nullptr, *p = nullptr;
    void* y = nullptr;
    float *y_h = nullptr, *y_c = nullptr;
    // Backward.
    const void* dy = nullptr;
    const float *dy_h = nullptr, *dy_c = nullptr;
    void* dx = nullptr;
    float *dw = nullptr, *dr = nullptr, *db = nullptr, *dh0 = nullptr, *dc0 = nullptr, *dp = nullptr;
  };

  // W and R into plain ldigo with oneDNN's gate order, then into the layouts `pr` asks for (carved); B, P mapped.
  struct Weights {
    void *wl = nullptr, *wi = nullptr;
    float *bias = nullptr, *wp = nullptr;
  };
  void PackPlain(const float* src_w, int64_t in, float* out) const {
    for (int64_t d = 0; d < D; ++d)
      for (int64_t i = 0; i < in; ++i)
        for (int64_t g = 0; g < G; ++g) {
          const float* col = src_w + (d * G + perm[g]) * H * in + i;
          float* o = out + ((d * in + i) * G + g) * H;
          for (int64_t h = 0; h < H; ++h) o[h] = col[h * in];
        }
  }
  void PackBias(const float* b, float* out) const {
    for (int64_t d = 0; d < D; ++d)
      for (int64_t g = 0; g < Gb; ++g) {
        float* o = out + (d * Gb + g) * H;
        if (!b) {
          std::fill(o, o + H, 0.f);
          continue;
        }
        const float* wb = b + d * 2 * G * H;
        const float* rb = wb + G * H;
        if (lbr && g == 2)
          std::memcpy(o, wb + 2 * H, sizeof(float) * H);  // the candidate's W bias outside r * (...)
        else if (lbr && g == 3)
          std::memcpy(o, rb + 2 * H, sizeof(float) * H);  // its R bias inside
        else
          for (int64_t h = 0; h < H; ++h) o[h] = wb[perm[g] * H + h] + rb[perm[g] * H + h];
      }
  }
  static constexpr int kPeep[3] = {0, 2, 1};  // ONNX's P gate (i, o, f) of oneDNN's peephole gate (i, f, o)
  Weights CarveWeights(Carve& c, const Prim& pr, bool fill, float* plain_wl, float* plain_wi) const {
    Weights wt;
    wt.wl = pr.to_wl ? c.Take(pr.wl.get_size()) : plain_wl;
    wt.wi = pr.to_wi ? c.Take(pr.wi.get_size()) : plain_wi;
    if (!fill) return wt;
    dnnl::stream& st = DnnlStream();
    if (pr.to_wl) pr.to_wl->execute(st, {{DNNL_ARG_FROM, Mem(wl_plain, plain_wl)}, {DNNL_ARG_TO, Mem(pr.wl, wt.wl)}});
    if (pr.to_wi) pr.to_wi->execute(st, {{DNNL_ARG_FROM, Mem(wi_plain, plain_wi)}, {DNNL_ARG_TO, Mem(pr.wi, wt.wi)}});
    return wt;
  }

  // Runs the forward (inference) with `base` as workspace; returns the bytes carved (base null: only counts).
  size_t Forward(const Args& a, void* base, size_t cap) const {
    Carve c(base, cap);
    const bool run = base != nullptr;
    float* pwl = c.Floats(D * I * G * H);
    float* pwi = c.Floats(D * H * G * H);
    float* pb = c.Floats(D * Gb * H);
    float* pp = peep ? c.Floats(D * 3 * H) : nullptr;
    float* zero = c.Floats(D * N * H);  // absent initial states
    float* y_s = (ydirs == 2 || !a.y) ? c.Floats(T * N * H) : nullptr;
    float* yh_s = c.Floats(D * N * H);
    float* yc_s = lstm ? c.Floats(D * N * H) : nullptr;
    if (run) {
      PackPlain(a.w, I, pwl);
      PackPlain(a.r, H, pwi);
    }
    const Weights wt = CarveWeights(c, inf, run, pwl, pwi);
    void* scratch = c.Take(inf.scratch.get_size());
    if (!run) return c.used();
    PackBias(a.b, pb);
    if (pp) PackPeep(a.p, pp);
    std::fill(zero, zero + D * N * H, 0.f);
    float* yd = y_s ? y_s : static_cast<float*>(a.y);
    std::unordered_map<int, dnnl::memory> m{{DNNL_ARG_SRC_LAYER, Mem(src, a.x)},
                                            {DNNL_ARG_SRC_ITER, Mem(iter, a.h0 ? a.h0 : zero)},
                                            {DNNL_ARG_WEIGHTS_LAYER, Mem(inf.wl, wt.wl)},
                                            {DNNL_ARG_WEIGHTS_ITER, Mem(inf.wi, wt.wi)},
                                            {DNNL_ARG_BIAS, Mem(bias, pb)},
                                            {DNNL_ARG_DST_LAYER, Mem(dst, yd)},
                                            {DNNL_ARG_DST_ITER, Mem(iter, a.y_h ? a.y_h : yh_s)},
                                            {DNNL_ARG_SCRATCHPAD, Mem(inf.scratch, scratch)}};
    if (lstm) {
      m[DNNL_ARG_SRC_ITER_C] = Mem(iter, a.c0 ? a.c0 : zero);
      m[DNNL_ARG_DST_ITER_C] = Mem(iter, a.y_c ? a.y_c : yc_s);
    }
    if (peep) m[DNNL_ARG_WEIGHTS_PEEPHOLE] = Mem(wp, pp);
    omp_set_num_threads(1);
    inf.prim.execute(DnnlStream(), m);
    if (ydirs == 2 && a.y) ToOnnxLayout(y_s, static_cast<float*>(a.y));
    return c.used();
  }

  void PackPeep(const float* p, float* out) const {
    for (int64_t d = 0; d < D; ++d)
      for (int k = 0; k < 3; ++k) std::memcpy(out + (d * 3 + k) * H, p + (d * 3 + kPeep[k]) * H, sizeof(float) * H);
  }

  // This direction's [T, N, H] <-> its rows of ONNX's [T, 2, N, H].
  void ToOnnxLayout(const float* lane, float* y) const {
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(y + (t * ydirs + ylane) * N * H, lane + t * N * H, sizeof(float) * N * H);
  }
  void FromOnnxLayout(const float* y, float* lane) const {
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(lane + t * N * H, y + (t * ydirs + ylane) * N * H, sizeof(float) * N * H);
  }

  size_t Backward(const Args& a, void* base, size_t cap) const;
};

size_t RnnPrimitive::Impl::Backward(const Args& a, void* base, size_t cap) const {
  Carve c(base, cap);
  const bool run = base != nullptr;
  const int64_t states = D * N * H;
  float* pwl = c.Floats(D * I * G * H);
  float* pwi = c.Floats(D * H * G * H);
  float* pb = c.Floats(D * Gb * H);
  float* pp = peep ? c.Floats(D * 3 * H) : nullptr;
  float* zero = c.Floats(states);  // absent initial states and state gradients
  float* yd = c.Floats(T * N * H);
  float* yh = c.Floats(states);
  float* yc = lstm ? c.Floats(states) : nullptr;
  void* ws = c.Take(train.ws.get_size());
  float* dyd = (ydirs == 2 || !a.dy) ? c.Floats(T * N * H) : nullptr;
  float* dxs = a.dx ? nullptr : c.Floats(T * N * I);
  float* dh0s = c.Floats(states);
  float* dc0s = lstm ? c.Floats(states) : nullptr;
  float* gwl = c.Floats(D * I * G * H);
  float* gwi = c.Floats(D * H * G * H);
  float* gb = c.Floats(D * Gb * H);
  float* gp = peep ? c.Floats(D * 3 * H) : nullptr;
  if (run) {
    PackPlain(a.w, I, pwl);
    PackPlain(a.r, H, pwi);
  }
  const Weights wt = CarveWeights(c, train, run, pwl, pwi);
  const Weights wb = CarveWeights(c, back, run, pwl, pwi);
  void* scratch = c.Take(std::max(train.scratch.get_size(), back.scratch.get_size()));
  if (!run) return c.used();
  PackBias(a.b, pb);
  if (pp) PackPeep(a.p, pp);
  std::fill(zero, zero + states, 0.f);
  dnnl::stream& st = DnnlStream();
  omp_set_num_threads(1);
  std::unordered_map<int, dnnl::memory> m{{DNNL_ARG_SRC_LAYER, Mem(src, a.x)},
                                          {DNNL_ARG_SRC_ITER, Mem(iter, a.h0 ? a.h0 : zero)},
                                          {DNNL_ARG_WEIGHTS_LAYER, Mem(train.wl, wt.wl)},
                                          {DNNL_ARG_WEIGHTS_ITER, Mem(train.wi, wt.wi)},
                                          {DNNL_ARG_BIAS, Mem(bias, pb)},
                                          {DNNL_ARG_DST_LAYER, Mem(dst, yd)},
                                          {DNNL_ARG_DST_ITER, Mem(iter, yh)},
                                          {DNNL_ARG_WORKSPACE, Mem(train.ws, ws)},
                                          {DNNL_ARG_SCRATCHPAD, Mem(train.scratch, scratch)}};
  if (lstm) {
    m[DNNL_ARG_SRC_ITER_C] = Mem(iter, a.c0 ? a.c0 : zero);
    m[DNNL_ARG_DST_ITER_C] = Mem(iter, yc);
  }
  if (peep) m[DNNL_ARG_WEIGHTS_PEEPHOLE] = Mem(wp, pp);
  train.prim.execute(st, m);

  // The backward: the same operands (weights in its own layouts), the outputs' gradients, and the inputs' gradients.
  const float* gdst = static_cast<const float*>(a.dy);
  if (!a.dy)
    std::fill(dyd, dyd + T * N * H, 0.f);
  else if (ydirs == 2)
    FromOnnxLayout(gdst, dyd);
  if (dyd) gdst = dyd;
  std::fill(gwl, gwl + D * I * G * H, 0.f);  // oneDNN accumulates into the weights' gradients
  std::fill(gwi, gwi + D * H * G * H, 0.f);
  std::fill(gb, gb + D * Gb * H, 0.f);
  if (gp) std::fill(gp, gp + D * 3 * H, 0.f);
  m[DNNL_ARG_WEIGHTS_LAYER] = Mem(back.wl, wb.wl);
  m[DNNL_ARG_WEIGHTS_ITER] = Mem(back.wi, wb.wi);
  m[DNNL_ARG_SCRATCHPAD] = Mem(back.scratch, scratch);
  m[DNNL_ARG_DIFF_DST_LAYER] = Mem(dst, gdst);
  m[DNNL_ARG_DIFF_DST_ITER] = Mem(iter, a.dy_h ? a.dy_h : zero);
  m[DNNL_ARG_DIFF_SRC_LAYER] = Mem(src, a.dx ? a.dx : dxs);
  m[DNNL_ARG_DIFF_SRC_ITER] = Mem(iter, a.dh0 ? a.dh0 : dh0s);
  m[DNNL_ARG_DIFF_WEIGHTS_LAYER] = Mem(dwl, gwl);
  m[DNNL_ARG_DIFF_WEIGHTS_ITER] = Mem(dwi, gwi);
  m[DNNL_ARG_DIFF_BIAS] = Mem(bias, gb);
  if (lstm) {
    m[DNNL_ARG_DIFF_DST_ITER_C] = Mem(iter, a.dy_c ? a.dy_c : zero);
    m[DNNL_ARG_DIFF_SRC_ITER_C] = Mem(iter, a.dc0 ? a.dc0 : dc0s);
  }
  if (peep) m[DNNL_ARG_DIFF_WEIGHTS_PEEPHOLE] = Mem(wp, gp);
  back.prim.execute(st, m);

  // The gradients back into ONNX's layouts and gate order.
  auto unpack = [&](const float* g, int64_t in, float* out) {
    if (!out) return;
    for (int64_t d = 0; d < D; ++d)
      for (int64_t i = 0; i < in; ++i)
        for (int64_t gt = 0; gt < G; ++gt) {
          const float* row = g + ((d * in + i) * G + gt) * H;
          float* col = out + (d * G + perm[gt]) * H * in + i;
          for (int64_t h = 0; h < H; ++h) col[h * in] = row[h];
        }
  };
  unpack(gwl, I, a.dw);
  unpack(gwi, H, a.dr);
  if (a.db)
    for (int64_t d = 0; d < D; ++d) {
      float* wbg = a.db + d * 2 * G * H;
      float* rbg = wbg + G * H;
      for (int64_t g = 0; g < G; ++g) {
        const float* src_w = gb + (d * Gb + g) * H;
        const float* src_r = lbr && g == 2 ? gb + (d * Gb + 3) * H : src_w;
        std::memcpy(wbg + perm[g] * H, src_w, sizeof(float) * H);
        std::memcpy(rbg + perm[g] * H, src_r, sizeof(float) * H);
      }
    }
  if (a.dp && gp)
    for (int64_t d = 0; d < D; ++d)
      for (int k = 0; k < 3; ++k) std::memcpy(a.dp + (d * 3 + kPeep[k]) * H, gp + (d * 3 + k) * H, sizeof(float) * H);
  else if (a.dp)
    std::fill(a.dp, a.dp + D * 3 * H, 0.f);
  return c.used();
}

std::unique_ptr<RnnPrimitive> RnnPrimitive::Create(const RnnSpec& s, DnnType io, bool lens, bool peepholes) {
  if (io != DnnType::kF32 || lens || s.clip > 0 || s.input_forget || s.batch_major) return nullptr;
  if (s.seq <= 0 || s.batch <= 0 || s.input <= 0 || s.hidden <= 0) return nullptr;
  try {
    std::vector<std::unique_ptr<Impl>> lanes;
    for (int d = 0; d < s.directions; ++d) {
      RnnSpec lane = s;
      lane.directions = 1;
      lane.reverse = s.directions == 2 ? d == 1 : s.reverse;
      lanes.push_back(std::make_unique<Impl>(lane, peepholes, s.directions, d));
    }
    return std::unique_ptr<RnnPrimitive>(new RnnPrimitive(std::move(lanes)));
  } catch (const dnnl::error&) {
    return nullptr;  // a node oneDNN does not take after all: the GEMM path runs it
  }
}

namespace {
size_t Align(size_t n) { return (n + 63) / 64 * 64; }
}  // namespace

RnnPrimitive::RnnPrimitive(std::vector<std::unique_ptr<Impl>> lanes) : lanes_(std::move(lanes)) {
  const Impl& l = *lanes_[0];
  // The second direction's dX, summed into the first's after both ran.
  dx_tmp_ = lanes_.size() == 2 ? Align(static_cast<size_t>(l.T * l.N * l.I) * sizeof(float)) : 0;
}
RnnPrimitive::~RnnPrimitive() = default;

size_t RnnPrimitive::forward_workspace_bytes() const {
  size_t n = 0;
  for (const auto& l : lanes_) n += Align(l->fwd_bytes);
  return n;
}
size_t RnnPrimitive::backward_workspace_bytes() const {
  size_t n = dx_tmp_;
  for (const auto& l : lanes_) n += Align(l->bwd_bytes);
  return n;
}

namespace {
// The call's own aligned scratch when the caller hands none.
struct OwnScratch {
  std::vector<uint8_t> bytes;
  uint8_t* At(void* given, size_t n) {
    if (given) return static_cast<uint8_t*>(given);
    bytes.resize(n + 64);
    const auto p = reinterpret_cast<uintptr_t>(bytes.data());
    return bytes.data() + ((64 - p % 64) % 64);
  }
};

// Runs f(d) for each direction: both at once, each on one thread (oneDNN's RNN primitives make many short parallel
// regions, one or more per step; with OpenMP's passive wait policy -- tools/main.cc -- a team of 2 spent more time
// waking than computing: a 4x longer step), or the one.
template <typename F>
void ForLanes(size_t lanes, F&& f) {
  if (lanes == 2)
    tbb::parallel_invoke([&] { f(0); }, [&] { f(1); });
  else
    f(0);
}

template <typename T>
T* Off(T* p, int64_t n) {
  return p ? p + n : nullptr;
}

// Direction d's slices of the forward's operands (W, R, B, P, the states); X and Y are whole.
RnnPrimitive::Impl::Args LaneInputs(const RnnPrimitive::Impl& l, int64_t d, const void* x, const float* w,
                                    const float* r, const float* b, const float* h0, const float* c0, const float* p) {
  const int64_t G = l.G, H = l.H, NH = l.N * l.H;
  RnnPrimitive::Impl::Args a;
  a.x = x, a.w = w + d * G * H * l.I, a.r = r + d * G * H * H, a.b = Off(b, d * 2 * G * H);
  a.h0 = Off(h0, d * NH), a.c0 = Off(c0, d * NH), a.p = Off(p, d * 3 * H);
  return a;
}
}  // namespace

void RnnPrimitive::Forward(const void* x, const float* w, const float* r, const float* b, const int32_t* lens,
                           const float* h0, const float* c0, const float* p, void* y, float* y_h, float* y_c,
                           void* workspace) const {
  if (lens) throw std::logic_error("rnn_dnnl: sequence_lens reached the oneDNN RNN path");
  OwnScratch own;
  uint8_t* base = own.At(workspace, forward_workspace_bytes());
  std::vector<uint8_t*> at;
  for (const auto& l : lanes_) at.push_back(base), base += Align(l->fwd_bytes);
  ForLanes(lanes_.size(), [&](size_t d) {
    const Impl& l = *lanes_[d];
    const int64_t NH = l.N * l.H, k = static_cast<int64_t>(d);
    Impl::Args a = LaneInputs(l, k, x, w, r, b, h0, c0, p);
    a.y = y, a.y_h = Off(y_h, k * NH), a.y_c = Off(y_c, k * NH);
    l.Forward(a, at[d], l.fwd_bytes);
  });
}

void RnnPrimitive::Backward(const void* x, const float* w, const float* r, const float* b, const int32_t* lens,
                            const float* h0, const float* c0, const float* p, const void* dy, const float* dy_h,
                            const float* dy_c, void* dx, float* dw, float* dr, float* db, float* dh0, float* dc0,
                            float* dp, void* workspace) const {
  if (lens) throw std::logic_error("rnn_dnnl: sequence_lens reached the oneDNN RNN path");
  OwnScratch own;
  uint8_t* base = own.At(workspace, backward_workspace_bytes());
  float* dx_tmp = reinterpret_cast<float*>(base);
  base += dx_tmp_;
  std::vector<uint8_t*> at;
  for (const auto& l : lanes_) at.push_back(base), base += Align(l->bwd_bytes);
  ForLanes(lanes_.size(), [&](size_t d) {
    const Impl& l = *lanes_[d];
    const int64_t G = l.G, H = l.H, I = l.I, NH = l.N * H, k = static_cast<int64_t>(d);
    Impl::Args a = LaneInputs(l, k, x, w, r, b, h0, c0, p);
    a.dy = dy, a.dy_h = Off(dy_h, k * NH), a.dy_c = Off(dy_c, k * NH);
    a.dx = dx && d == 1 ? dx_tmp : dx;
    a.dw = Off(dw, k * G * H * I), a.dr = Off(dr, k * G * H * H), a.db = Off(db, k * 2 * G * H);
    a.dh0 = Off(dh0, k * NH), a.dc0 = Off(dc0, k * NH), a.dp = Off(dp, k * 3 * H);
    l.Backward(a, at[d], l.bwd_bytes);
  });
  if (dx && lanes_.size() == 2) {
    float* out = static_cast<float*>(dx);
    const Impl& l = *lanes_[0];
    for (int64_t i = 0, n = l.T * l.N * l.I; i < n; ++i) out[i] += dx_tmp[i];
  }
}

}  // namespace ot::cpu
