// cpu_ops/rnn_dnnl (oneDNN's RNN primitives for the nodes they match) against the float64 loop kernel of
// cpu_ops/rnn.h on fresh random operands: every cell (RNN, GRU with linear_before_reset 0 and 1, LSTM with and without
// peepholes), each direction, with and without bias and initial states; forward outputs and every gradient, each
// output element written (outputs start as NaN), on a NaN-filled workspace. Also which nodes it refuses, and
// MakeRnnKernel's choice.
#include "cpu_ops/rnn_dnnl.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu_ops/rnn.h"
#include "cpu_ops/rnn_kernel.h"
#include "tests/cpu_ops/rnn_test_util.h"

namespace ot::cpu {
namespace {

struct Case {
  RnnSpec s;
  bool bias = true, init = false, peep = false;
  std::string name;
};

std::vector<Case> Cases() {
  std::vector<Case> cs;
  for (int cell = 0; cell < 4; ++cell) {
    Case c;
    c.s.cell = cell == 0 ? RnnCell::kRnn : cell == 3 ? RnnCell::kLstm : RnnCell::kGru;
    c.s.linear_before_reset = cell == 2;
    c.name = cell == 0 ? "rnn" : cell == 1 ? "gru lbr0" : cell == 2 ? "gru lbr1" : "lstm";
    c.s.seq = 7, c.s.batch = 5, c.s.input = 6, c.s.hidden = 9;
    cs.push_back(c);
    Case rev = c;
    rev.s.reverse = true, rev.init = true, rev.name += " reverse init";
    cs.push_back(rev);
    Case bi = c;
    bi.s.directions = 2, bi.init = true, bi.name += " bidirectional init";
    cs.push_back(bi);
    Case nb = c;
    nb.s.directions = 2, nb.bias = false, nb.s.seq = 13, nb.s.batch = 19, nb.s.input = 24, nb.s.hidden = 33;
    nb.name += " bidirectional no bias big";
    cs.push_back(nb);
  }
  Case peep;
  peep.s.seq = 5, peep.s.batch = 4, peep.s.input = 3, peep.s.hidden = 6, peep.s.directions = 2;
  peep.peep = true, peep.init = true, peep.name = "lstm peepholes bidirectional";
  cs.push_back(peep);
  return cs;
}

using test::ExpectClose;
using test::F;
using test::P;
using test::Random;

TEST(RnnPrimitive, MatchesTheFloat64LoopKernel) {
  std::mt19937 rng(std::random_device{}());
  for (const Case& c : Cases()) {
    const RnnSpec& s = c.s;
    const int64_t D = s.directions, G = s.gates(), H = s.hidden, N = s.batch, S = s.seq, I = s.input;
    const bool lstm = s.cell == RnnCell::kLstm;
    const auto k = RnnPrimitive::Create(s, DnnType::kF32, false, c.peep);
    ASSERT_NE(k, nullptr) << c.name << ": oneDNN refused a node it matches";
    // Recurrent weights that keep 13 steps of the big case from turning chaotic (as trained ones do: there float32
    // and float64 part ways by more than rounding in any implementation).
    const double r_scale = H > 16 ? 0.25 : 0.6;
    const std::vector<double> x = Random(rng, S * N * I), w = Random(rng, D * G * H * I, 0.6),
                              r = Random(rng, D * G * H * H, r_scale);
    const std::vector<double> b = c.bias ? Random(rng, D * 2 * G * H) : std::vector<double>{};
    const std::vector<double> h0 = c.init ? Random(rng, D * N * H) : std::vector<double>{};
    const std::vector<double> c0 = c.init && lstm ? Random(rng, D * N * H) : std::vector<double>{};
    const std::vector<double> p = c.peep ? Random(rng, D * 3 * H) : std::vector<double>{};
    const std::vector<double> gy = Random(rng, S * D * N * H), gh = Random(rng, D * N * H), gc = Random(rng, D * N * H);
    std::vector<double> y(S * D * N * H), yh(D * N * H), yc(D * N * H);
    RnnForward<double>(s, x.data(), w.data(), r.data(), P(b), nullptr, P(h0), P(c0), P(p), y.data(), yh.data(),
                       lstm ? yc.data() : nullptr);
    std::vector<double> dx(x.size()), dw(w.size()), dr(r.size()), db(D * 2 * G * H), dh0(D * N * H), dc0(D * N * H),
        dp(D * 3 * H);
    RnnBackward<double>(s, x.data(), w.data(), r.data(), P(b), nullptr, P(h0), P(c0), P(p), gy.data(), gh.data(),
                        lstm ? gc.data() : nullptr, dx.data(), dw.data(), dr.data(), db.data(), dh0.data(), dc0.data(),
                        lstm && c.peep ? dp.data() : nullptr);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> xf = F(x), wf = F(w), rf = F(r), bf = F(b), h0f = F(h0), c0f = F(c0), pf = F(p);
    std::vector<float> fy(y.size(), nan), fyh(yh.size(), nan), fyc(yc.size(), nan);
    std::vector<float> fws(k->forward_workspace_bytes() / sizeof(float) + 16, nan);
    k->Forward(xf.data(), wf.data(), rf.data(), P(bf), nullptr, P(h0f), P(c0f), P(pf), fy.data(), fyh.data(),
               lstm ? fyc.data() : nullptr, fws.data());
    ExpectClose(fy, y, c.name + ": Y");
    ExpectClose(fyh, yh, c.name + ": Y_h");
    if (lstm) ExpectClose(fyc, yc, c.name + ": Y_c");
    // Only Y_h asked for: Y goes to the workspace.
    std::vector<float> fyh2(yh.size(), nan);
    k->Forward(xf.data(), wf.data(), rf.data(), P(bf), nullptr, P(h0f), P(c0f), P(pf), nullptr, fyh2.data(), nullptr,
               fws.data());
    ExpectClose(fyh2, yh, c.name + ": Y_h alone");
    std::vector<float> fdx(dx.size(), nan), fdw(dw.size(), nan), fdr(dr.size(), nan), fdb(db.size(), nan),
        fdh0(dh0.size(), nan), fdc0(dc0.size(), nan), fdp(dp.size(), nan);
    const std::vector<float> gyf = F(gy), ghf = F(gh), gcf = F(gc);
    std::vector<float> ws(k->backward_workspace_bytes() / sizeof(float) + 16, nan);
    k->Backward(xf.data(), wf.data(), rf.data(), P(bf), nullptr, P(h0f), P(c0f), P(pf), gyf.data(), ghf.data(),
                lstm ? gcf.data() : nullptr, fdx.data(), fdw.data(), fdr.data(), fdb.data(), fdh0.data(), fdc0.data(),
                lstm && c.peep ? fdp.data() : nullptr, ws.data());
    ExpectClose(fdx, dx, c.name + ": dX");
    ExpectClose(fdw, dw, c.name + ": dW");
    ExpectClose(fdr, dr, c.name + ": dR");
    ExpectClose(fdb, db, c.name + ": dB");
    ExpectClose(fdh0, dh0, c.name + ": dInitial_h");
    if (lstm) ExpectClose(fdc0, dc0, c.name + ": dInitial_c");
    if (lstm && c.peep) ExpectClose(fdp, dp, c.name + ": dP");
    // Only dY given (no state gradients): the same as the reference with those zero.
    std::vector<double> dw2(w.size());
    RnnBackward<double>(s, x.data(), w.data(), r.data(), P(b), nullptr, P(h0), P(c0), P(p), gy.data(), nullptr, nullptr,
                        nullptr, dw2.data(), nullptr, nullptr, nullptr, nullptr, nullptr);
    std::vector<float> fdw2(dw.size(), nan);
    k->Backward(xf.data(), wf.data(), rf.data(), P(bf), nullptr, P(h0f), P(c0f), P(pf), gyf.data(), nullptr, nullptr,
                nullptr, fdw2.data(), nullptr, nullptr, nullptr, nullptr, nullptr, ws.data());
    ExpectClose(fdw2, dw2, c.name + ": dW from dY alone");
  }
}

TEST(RnnPrimitive, RefusesWhatItCannotRun) {
  RnnSpec s;
  s.cell = RnnCell::kLstm, s.seq = 4, s.batch = 3, s.input = 5, s.hidden = 6;
  EXPECT_NE(RnnPrimitive::Create(s, DnnType::kF32, false, false), nullptr);
  EXPECT_EQ(RnnPrimitive::Create(s, DnnType::kF32, true, false), nullptr) << "sequence_lens";
  EXPECT_EQ(RnnPrimitive::Create(s, DnnType::kBF16, false, false), nullptr) << "half I/O";
  RnnSpec t = s;
  t.clip = 1;
  EXPECT_EQ(RnnPrimitive::Create(t, DnnType::kF32, false, false), nullptr) << "clip";
  t = s, t.input_forget = true;
  EXPECT_EQ(RnnPrimitive::Create(t, DnnType::kF32, false, false), nullptr) << "input_forget";
  t = s, t.batch_major = true;
  EXPECT_EQ(RnnPrimitive::Create(t, DnnType::kF32, false, false), nullptr) << "layout 1";
  t = s, t.batch = 0;
  EXPECT_EQ(RnnPrimitive::Create(t, DnnType::kF32, false, false), nullptr) << "empty batch";
  // The choice: the primitive where it matches, the GEMM path otherwise or when asked for.
  EXPECT_STREQ(MakeRnnKernel(s, DnnType::kF32, false, false, RnnPath::kPrimitive)->name(), "primitive");
  EXPECT_STREQ(MakeRnnKernel(s, DnnType::kF32, true, false, RnnPath::kPrimitive)->name(), "gemm");
  EXPECT_STREQ(MakeRnnKernel(s, DnnType::kF32, false, false, RnnPath::kGemm)->name(), "gemm");
  if (GetRnnPath() == RnnPath::kAuto) {  // by default the GEMM path, bidirectional nodes too (memory)
    t = s, t.directions = 2;
    EXPECT_STREQ(MakeRnnKernel(t, DnnType::kF32, false, false)->name(), "gemm");
  }
}

}  // namespace
}  // namespace ot::cpu
