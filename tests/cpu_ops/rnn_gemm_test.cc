// cpu_ops/rnn_gemm (the float32 GEMM path of RNN, GRU and LSTM) against the float64 loop kernel of cpu_ops/rnn.h
// (itself held to a reference and to central differences in rnn_test.cc) on the same fresh random operands: every
// cell and option, both layouts, lengths with empty and full sequences, forward outputs and every gradient, each
// output element written (outputs start as NaN).
#include "cpu_ops/rnn_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu_ops/dnnl_util.h"
#include "cpu_ops/rnn.h"
#include "tests/cpu_ops/rnn_test_util.h"

namespace ot::cpu {
namespace {

struct Case {
  RnnSpec s;
  bool bias = true, lens = false, init = false, peep = false;
  std::string name;
};

std::vector<Case> Cases() {
  std::vector<Case> cs;
  for (RnnCell cell : {RnnCell::kRnn, RnnCell::kGru, RnnCell::kLstm}) {
    const char* cn = cell == RnnCell::kRnn ? "rnn" : cell == RnnCell::kGru ? "gru" : "lstm";
    Case c;
    c.s.cell = cell;
    c.s.seq = 6, c.s.batch = 5, c.s.input = 7, c.s.hidden = 9;
    c.name = cn;
    cs.push_back(c);
    Case rev = c;
    rev.s.reverse = true, rev.lens = true, rev.init = true, rev.name += " reverse lens init";
    cs.push_back(rev);
    Case bi = c;
    bi.s.directions = 2, bi.s.batch_major = true, bi.lens = true, bi.bias = false, bi.name += " bidirectional layout1";
    cs.push_back(bi);
    Case cl = c;
    cl.s.directions = 2, cl.s.clip = 0.6f, cl.init = true, cl.lens = true, cl.name += " clip";
    cs.push_back(cl);
    Case big = c;
    big.s.seq = 12, big.s.batch = 37, big.s.input = 20, big.s.hidden = 33, big.s.directions = 2, big.lens = true;
    big.name += " big";
    cs.push_back(big);
  }
  for (bool lbr : {false, true})
    for (bool bm : {false, true}) {
      Case g;
      g.s.cell = RnnCell::kGru, g.s.linear_before_reset = lbr, g.s.batch_major = bm, g.s.directions = 2;
      g.s.seq = 5, g.s.batch = 4, g.s.input = 3, g.s.hidden = 6;
      g.lens = true, g.init = true;
      g.name = std::string("gru lbr ") + (lbr ? "1" : "0") + (bm ? " layout1" : "");
      cs.push_back(g);
    }
  Case peep;
  peep.s.seq = 5, peep.s.batch = 4, peep.s.input = 3, peep.s.hidden = 6;
  peep.peep = true, peep.init = true, peep.lens = true, peep.name = "lstm peepholes";
  cs.push_back(peep);
  Case forget = peep;
  forget.s.input_forget = true, forget.s.directions = 2, forget.s.clip = 0.9f, forget.name = "lstm input_forget clip";
  cs.push_back(forget);
  return cs;
}

using test::ExpectClose;
using test::F;
using test::P;
using test::Random;

TEST(RnnGemm, MatchesTheFloat64LoopKernel) {
  std::mt19937 rng(std::random_device{}());
  for (const Case& c : Cases()) {
    const RnnSpec& s = c.s;
    const int64_t D = s.directions, G = s.gates(), H = s.hidden, N = s.batch, S = s.seq, I = s.input;
    const bool lstm = s.cell == RnnCell::kLstm;
    const std::vector<double> x = Random(rng, S * N * I), w = Random(rng, D * G * H * I, 0.6),
                              r = Random(rng, D * G * H * H, 0.6);
    const std::vector<double> b = c.bias ? Random(rng, D * 2 * G * H) : std::vector<double>{};
    const std::vector<double> h0 = c.init ? Random(rng, D * N * H) : std::vector<double>{};
    const std::vector<double> c0 = c.init && lstm ? Random(rng, D * N * H) : std::vector<double>{};
    const std::vector<double> p = c.peep ? Random(rng, D * 3 * H) : std::vector<double>{};
    std::vector<int32_t> lens;
    if (c.lens) {
      std::uniform_int_distribution<int32_t> len(1, static_cast<int32_t>(S));
      for (int64_t n = 0; n < N; ++n) lens.push_back(len(rng));
      lens[0] = static_cast<int32_t>(S);
      if (N > 2) lens[1] = 0;  // an empty sequence keeps its initial state
    }
    const std::vector<double> gy = Random(rng, S * D * N * H), gh = Random(rng, D * N * H), gc = Random(rng, D * N * H);
    // The float64 loop kernel.
    std::vector<double> y(S * D * N * H), yh(D * N * H), yc(D * N * H);
    RnnForward<double>(s, x.data(), w.data(), r.data(), P(b), P(lens), P(h0), P(c0), P(p), y.data(), yh.data(),
                       lstm ? yc.data() : nullptr);
    std::vector<double> dx(x.size()), dw(w.size()), dr(r.size()), db(D * 2 * G * H), dh0(D * N * H), dc0(D * N * H),
        dp(D * 3 * H);
    RnnBackward<double>(s, x.data(), w.data(), r.data(), P(b), P(lens), P(h0), P(c0), P(p), gy.data(), gh.data(),
                        lstm ? gc.data() : nullptr, dx.data(), dw.data(), dr.data(), db.data(), dh0.data(), dc0.data(),
                        lstm ? dp.data() : nullptr);
    // The GEMM path in float32.
    const RnnGemm k(s);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> xf = F(x), wf = F(w), rf = F(r), bf = F(b), h0f = F(h0), c0f = F(c0), pf = F(p);
    std::vector<float> fy(y.size(), nan), fyh(yh.size(), nan), fyc(yc.size(), nan);
    std::vector<float> fws(k.forward_workspace_bytes() / sizeof(float) + 16, nan);
    k.Forward(xf.data(), wf.data(), rf.data(), P(bf), P(lens), P(h0f), P(c0f), P(pf), fy.data(), fyh.data(),
              lstm ? fyc.data() : nullptr, fws.data());
    ExpectClose(fy, y, c.name + ": Y");
    ExpectClose(fyh, yh, c.name + ": Y_h");
    if (lstm) ExpectClose(fyc, yc, c.name + ": Y_c");
    std::vector<float> fdx(dx.size(), nan), fdw(dw.size(), nan), fdr(dr.size(), nan), fdb(db.size(), nan),
        fdh0(dh0.size(), nan), fdc0(dc0.size(), nan), fdp(dp.size(), nan);
    const std::vector<float> gyf = F(gy), ghf = F(gh), gcf = F(gc);
    // A workspace full of NaN, as a plan's arena may hand it over: nothing may read what the call did not write.
    std::vector<float> ws(k.backward_workspace_bytes() / sizeof(float) + 16, nan);
    k.Backward(xf.data(), wf.data(), rf.data(), P(bf), P(lens), P(h0f), P(c0f), P(pf), gyf.data(), ghf.data(),
               lstm ? gcf.data() : nullptr, fdx.data(), fdw.data(), fdr.data(), fdb.data(), fdh0.data(), fdc0.data(),
               lstm ? fdp.data() : nullptr, ws.data());
    ExpectClose(fdx, dx, c.name + ": dX");
    ExpectClose(fdw, dw, c.name + ": dW");
    ExpectClose(fdr, dr, c.name + ": dR");
    ExpectClose(fdb, db, c.name + ": dB");
    ExpectClose(fdh0, dh0, c.name + ": dInitial_h");
    ExpectClose(fdc0, dc0, c.name + ": dInitial_c");
    if (lstm) ExpectClose(fdp, dp, c.name + ": dP");
  }
}

// Mixed precision: X, Y, dY and dX in bf16 / fp16 (converted 256 rows at a time, the "big" cases over a chunk and a
// tail) and the tape in the half type (the gate activations and gradients, states), the math in float: the same as
// the float32 path on the same rounded X and dY, up to one rounding of Y and dX (and of dX's two directions' partial
// sums) and the tape's roundings in the parameters' gradients.
TEST(RnnGemm, HalfInputsAndOutputsRoundOnlyThemselves) {
  std::mt19937 rng(std::random_device{}());
  for (DnnType t : {DnnType::kBF16, DnnType::kF16}) {
    const double tol = t == DnnType::kBF16 ? 1.6e-2 : 2e-3, grad_tol = t == DnnType::kBF16 ? 1.5e-2 : 2e-3;
    for (const Case& c : Cases()) {
      const RnnSpec& s = c.s;
      const int64_t D = s.directions, G = s.gates(), H = s.hidden, N = s.batch, S = s.seq, I = s.input;
      auto half = [&](const std::vector<double>& v, std::vector<uint16_t>& h, std::vector<float>& f) {
        const std::vector<float> raw = F(v);
        h.resize(raw.size());
        f.resize(raw.size());
        FromFloat(t, raw.data(), h.data(), static_cast<int64_t>(raw.size()));
        ToFloat(t, h.data(), f.data(), static_cast<int64_t>(raw.size()));
      };
      std::vector<uint16_t> xh, dyh;
      std::vector<float> xf, dyf;
      half(Random(rng, S * N * I), xh, xf);
      half(Random(rng, S * D * N * H), dyh, dyf);
      // Recurrent weights small enough that the steps contract (as trained ones do): with 12 chaotic tanh steps the
      // tape's roundings grow without bound in any precision.
      const std::vector<float> w = F(Random(rng, D * G * H * I, 0.6)), r = F(Random(rng, D * G * H * H, 0.25)),
                               b = F(Random(rng, D * 2 * G * H));
      std::vector<int32_t> lens;
      if (c.lens)
        for (int64_t n = 0; n < N; ++n) lens.push_back(static_cast<int32_t>(n == 0 ? S : 1 + n % S));
      const RnnGemm full(s), mixed(s, t);
      std::vector<float> y(S * D * N * H), yh(D * N * H), dx(S * N * I), dw(w.size()), dr(r.size()), db(b.size());
      full.Forward(xf.data(), w.data(), r.data(), b.data(), P(lens), nullptr, nullptr, nullptr, y.data(), yh.data(),
                   nullptr);
      full.Backward(xf.data(), w.data(), r.data(), b.data(), P(lens), nullptr, nullptr, nullptr, dyf.data(), nullptr,
                    nullptr, dx.data(), dw.data(), dr.data(), db.data(), nullptr, nullptr, nullptr);
      std::vector<uint16_t> yo(y.size(), 0xFFFF), dxo(dx.size(), 0xFFFF);
      std::vector<float> myh(yh.size()), mdw(dw.size()), mdr(dr.size()), mdb(db.size());
      mixed.Forward(xh.data(), w.data(), r.data(), b.data(), P(lens), nullptr, nullptr, nullptr, yo.data(), myh.data(),
                    nullptr);
      std::vector<float> ws(mixed.backward_workspace_bytes() / sizeof(float) + 16,
                            std::numeric_limits<float>::quiet_NaN());
      mixed.Backward(xh.data(), w.data(), r.data(), b.data(), P(lens), nullptr, nullptr, nullptr, dyh.data(), nullptr,
                     nullptr, dxo.data(), mdw.data(), mdr.data(), mdb.data(), nullptr, nullptr, nullptr, ws.data());
      std::vector<float> my(y.size()), mdx(dx.size());
      ToFloat(t, yo.data(), my.data(), static_cast<int64_t>(y.size()));
      ToFloat(t, dxo.data(), mdx.data(), static_cast<int64_t>(dx.size()));
      auto close = [&](const std::vector<float>& got, const std::vector<float>& want, double bound, const char* what) {
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], bound * (1 + std::fabs(want[i]))) << c.name << " " << what << "[" << i << "]";
      };
      // Gradients as a whole (a sum over many rows of rounded terms may cancel to far less than its terms, so one
      // element's relative error says little): the norm of the difference against the norm of the float32 result.
      auto norm_close = [&](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
        double diff = 0, ref = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_TRUE(std::isfinite(got[i])) << c.name << " " << what << "[" << i << "]";
          diff += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
          ref += want[i] * static_cast<double>(want[i]);
        }
        EXPECT_LE(std::sqrt(diff), grad_tol * std::sqrt(ref)) << c.name << " " << what;
      };
      close(my, y, tol, "Y");
      close(myh, yh, 1e-5, "Y_h");
      norm_close(mdx, dx, "dX");
      norm_close(mdw, dw, "dW");
      norm_close(mdr, dr, "dR");
      norm_close(mdb, db, "dB");
    }
  }
}

}  // namespace
}  // namespace ot::cpu
