// cpu_ops RNN, GRU and LSTM forward against a float64 reference written here another way (the whole batch a step at a
// time, per-sequence lengths as a mask), on fresh random inputs: every cell, direction, layout and option, every
// output element written (the outputs start as NaN), half types within their rounding.
#include "cpu_ops/rnn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_common/half.h"

namespace ot::cpu {
namespace {

struct Case {
  RnnCell cell = RnnCell::kLstm;
  int64_t seq = 5, batch = 3, input = 4, hidden = 6;
  int dirs = 1;
  bool reverse = false, batch_major = false, bias = true, lens = false, init = false, peep = false;
  float clip = 0;
  bool input_forget = false, lbr = false;
  std::string name() const {
    const char* c = cell == RnnCell::kLstm ? "lstm" : cell == RnnCell::kGru ? "gru" : "rnn";
    return std::string(c) +
           (dirs == 2 ? " bidirectional"
            : reverse ? " reverse"
                      : "") +
           (batch_major ? " layout1" : "") + (lens ? " lens" : "") + (init ? " init" : "") + (peep ? " peep" : "") +
           (clip > 0 ? " clip" : "") + (input_forget ? " input_forget" : "") + (lbr ? " lbr" : "") +
           (bias ? "" : " nobias");
  }
};

struct Operands {
  std::vector<double> x, w, r, b, h0, c0, p;
  std::vector<int32_t> lens;
};

Operands Draw(const Case& c, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  auto fill = [&](int64_t n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (double& e : v) e = u(rng);
    return v;
  };
  const int64_t G = c.cell == RnnCell::kLstm ? 4 : c.cell == RnnCell::kGru ? 3 : 1, D = c.dirs;
  Operands o;
  o.x = fill(c.seq * c.batch * c.input);
  o.w = fill(D * G * c.hidden * c.input);
  o.r = fill(D * G * c.hidden * c.hidden);
  if (c.bias) o.b = fill(D * 2 * G * c.hidden);
  if (c.init) o.h0 = fill(D * c.batch * c.hidden), o.c0 = fill(D * c.batch * c.hidden);
  if (c.peep) o.p = fill(D * 3 * c.hidden);
  if (c.lens) {
    std::uniform_int_distribution<int32_t> l(0, static_cast<int32_t>(c.seq));
    for (int64_t n = 0; n < c.batch; ++n) o.lens.push_back(n == 0 ? static_cast<int32_t>(c.seq) : l(rng));
  }
  return o;
}

double Sig(double v) { return 1 / (1 + std::exp(-v)); }

// Y, Y_h, Y_c in the layout of the case.
struct Outputs {
  std::vector<double> y, yh, yc;
};

Outputs Reference(const Case& c, const Operands& o) {
  const int64_t S = c.seq, N = c.batch, I = c.input, H = c.hidden, D = c.dirs;
  const int64_t G = c.cell == RnnCell::kLstm ? 4 : c.cell == RnnCell::kGru ? 3 : 1;
  auto X = [&](int64_t t, int64_t n, int64_t i) { return o.x[(c.batch_major ? n * S + t : t * N + n) * I + i]; };
  auto W = [&](int64_t d, int64_t g, int64_t j, int64_t i) { return o.w[((d * G + g) * H + j) * I + i]; };
  auto R = [&](int64_t d, int64_t g, int64_t j, int64_t k) { return o.r[((d * G + g) * H + j) * H + k]; };
  auto Wb = [&](int64_t d, int64_t g, int64_t j) { return o.b.empty() ? 0.0 : o.b[(d * 2 * G + g) * H + j]; };
  auto Rb = [&](int64_t d, int64_t g, int64_t j) { return o.b.empty() ? 0.0 : o.b[(d * 2 * G + G + g) * H + j]; };
  auto P = [&](int64_t d, int64_t g, int64_t j) { return o.p.empty() ? 0.0 : o.p[(d * 3 + g) * H + j]; };
  auto clip = [&](double v) { return c.clip > 0 ? std::min(std::max(v, -double(c.clip)), double(c.clip)) : v; };
  auto st = [&](int64_t d, int64_t n) { return (c.batch_major ? n * D + d : d * N + n) * H; };
  Outputs out;
  out.y.assign(static_cast<size_t>(S * D * N * H), 0.0);
  out.yh.assign(static_cast<size_t>(D * N * H), 0.0);
  out.yc = out.yh;
  for (int64_t d = 0; d < D; ++d) {
    const bool rev = D == 2 ? d == 1 : c.reverse;
    // h[n][j], cs[n][j] for the whole batch.
    std::vector<std::vector<double>> h(N, std::vector<double>(H, 0.0)), cs = h;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < H; ++j) {
        if (!o.h0.empty()) h[n][j] = o.h0[st(d, n) + j];
        if (!o.c0.empty() && c.cell == RnnCell::kLstm) cs[n][j] = o.c0[st(d, n) + j];
      }
    for (int64_t k = 0; k < S; ++k) {
      for (int64_t n = 0; n < N; ++n) {
        const int64_t len = o.lens.empty() ? S : o.lens[n];
        if (k >= len) continue;  // masked
        const int64_t t = rev ? len - 1 - k : k;
        // The gate pre-activations x W^T + Wb (xa) and h R^T + Rb (ha), gate by gate.
        auto xa = [&](int64_t g, int64_t j) {
          double a = Wb(d, g, j);
          for (int64_t i = 0; i < I; ++i) a += X(t, n, i) * W(d, g, j, i);
          return a;
        };
        auto ha = [&](int64_t g, int64_t j, const std::vector<double>& v) {
          double a = Rb(d, g, j);
          for (int64_t q = 0; q < H; ++q) a += v[q] * R(d, g, j, q);
          return a;
        };
        std::vector<double> hn(H), cn(H);
        if (c.cell == RnnCell::kRnn) {
          for (int64_t j = 0; j < H; ++j) hn[j] = std::tanh(clip(xa(0, j) + ha(0, j, h[n])));
        } else if (c.cell == RnnCell::kGru) {
          std::vector<double> z(H), r(H), rh(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = Sig(clip(xa(0, j) + ha(0, j, h[n])));
            r[j] = Sig(clip(xa(1, j) + ha(1, j, h[n])));
            rh[j] = r[j] * h[n][j];
          }
          for (int64_t j = 0; j < H; ++j) {
            const double pre = c.lbr ? xa(2, j) + r[j] * ha(2, j, h[n]) : xa(2, j) + ha(2, j, rh);
            hn[j] = (1 - z[j]) * std::tanh(clip(pre)) + z[j] * h[n][j];
          }
        } else {
          for (int64_t j = 0; j < H; ++j) {
            const double i = Sig(clip(xa(0, j) + ha(0, j, h[n]) + P(d, 0, j) * cs[n][j]));
            const double f = c.input_forget ? 1 - i : Sig(clip(xa(2, j) + ha(2, j, h[n]) + P(d, 2, j) * cs[n][j]));
            const double g = std::tanh(clip(xa(3, j) + ha(3, j, h[n])));
            cn[j] = f * cs[n][j] + i * g;
            const double og = Sig(clip(xa(1, j) + ha(1, j, h[n]) + P(d, 1, j) * cn[j]));
            hn[j] = og * std::tanh(cn[j]);
          }
          cs[n] = cn;
        }
        h[n] = hn;
        for (int64_t j = 0; j < H; ++j)
          out.y[(c.batch_major ? (n * S + t) * D + d : (t * D + d) * N + n) * H + j] = hn[j];
      }
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < H; ++j) {
        out.yh[st(d, n) + j] = h[n][j];
        out.yc[st(d, n) + j] = cs[n][j];
      }
  }
  return out;
}

template <typename T>
std::vector<T> As(const std::vector<double>& v) {
  std::vector<T> r;
  for (double e : v) r.push_back(static_cast<T>(static_cast<float>(e)));
  return r;
}
template <>
std::vector<double> As<double>(const std::vector<double>& v) {
  return v;
}

// Runs the kernel in T on the case's operands (rounded to T) and holds every output element against the reference
// computed on those rounded operands.
template <typename T>
void Check(const Case& c, uint64_t seed, double tol) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  Operands o = Draw(c, rng);
  // The reference sees exactly the operands the kernel does.
  auto round = [](std::vector<double>& v) {
    for (double& e : v) e = static_cast<double>(static_cast<float>(static_cast<T>(static_cast<float>(e))));
  };
  if (!std::is_same_v<T, double>)
    for (auto* v : {&o.x, &o.w, &o.r, &o.b, &o.h0, &o.c0, &o.p}) round(*v);
  const Outputs want = Reference(c, o);
  RnnSpec s;
  s.cell = c.cell;
  s.seq = c.seq, s.batch = c.batch, s.input = c.input, s.hidden = c.hidden;
  s.directions = c.dirs, s.reverse = c.reverse, s.batch_major = c.batch_major;
  s.clip = c.clip, s.input_forget = c.input_forget, s.linear_before_reset = c.lbr;
  const std::vector<T> x = As<T>(o.x), w = As<T>(o.w), r = As<T>(o.r), b = As<T>(o.b), h0 = As<T>(o.h0),
                       c0 = As<T>(o.c0), p = As<T>(o.p);
  const T nan = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
  std::vector<T> y(want.y.size(), nan), yh(want.yh.size(), nan), yc(want.yc.size(), nan);
  const bool lstm = c.cell == RnnCell::kLstm;
  RnnForward<T>(s, x.data(), w.data(), r.data(), b.empty() ? nullptr : b.data(),
                o.lens.empty() ? nullptr : o.lens.data(), h0.empty() ? nullptr : h0.data(),
                c0.empty() ? nullptr : c0.data(), p.empty() ? nullptr : p.data(), y.data(), yh.data(),
                lstm ? yc.data() : nullptr);
  auto expect = [&](const std::vector<T>& got, const std::vector<double>& ref, const char* what) {
    for (size_t i = 0; i < got.size(); ++i) {
      const double g = static_cast<double>(static_cast<float>(got[i]));
      ASSERT_TRUE(std::isfinite(g)) << c.name() << ": " << what << "[" << i << "] not written";
      ASSERT_NEAR(g, ref[i], tol * (1 + std::fabs(ref[i]))) << c.name() << ": " << what << "[" << i << "]";
    }
  };
  if constexpr (std::is_same_v<T, double>) {
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want.y[i], tol) << c.name() << ": Y[" << i << "]";
    for (size_t i = 0; i < yh.size(); ++i) ASSERT_NEAR(yh[i], want.yh[i], tol) << c.name() << ": Y_h[" << i << "]";
    if (lstm)
      for (size_t i = 0; i < yc.size(); ++i) ASSERT_NEAR(yc[i], want.yc[i], tol) << c.name() << ": Y_c[" << i << "]";
  } else {
    expect(y, want.y, "Y");
    expect(yh, want.yh, "Y_h");
    if (lstm) expect(yc, want.yc, "Y_c");
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cs;
  for (RnnCell cell : {RnnCell::kRnn, RnnCell::kGru, RnnCell::kLstm}) {
    Case c;
    c.cell = cell;
    cs.push_back(c);  // defaults
    Case rev = c;
    rev.reverse = true, rev.lens = true, rev.init = true;
    cs.push_back(rev);
    Case bi = c;
    bi.dirs = 2, bi.batch_major = true, bi.lens = true, bi.bias = false;
    cs.push_back(bi);
    Case cl = c;
    cl.dirs = 2, cl.clip = 0.7f, cl.init = true;
    cs.push_back(cl);
  }
  Case peep;
  peep.peep = true, peep.init = true, peep.lens = true;
  cs.push_back(peep);
  Case forget = peep;
  forget.input_forget = true, forget.dirs = 2;
  cs.push_back(forget);
  for (bool bm : {false, true}) {
    Case lbr;
    lbr.cell = RnnCell::kGru, lbr.lbr = true, lbr.lens = true, lbr.init = true, lbr.batch_major = bm;
    cs.push_back(lbr);
  }
  return cs;
}

TEST(CpuRnn, Float64MatchesTheReference) {
  uint64_t seed = std::random_device{}();
  for (const Case& c : Cases()) Check<double>(c, seed++, 1e-12);
}

TEST(CpuRnn, FloatMatchesTheFloat64Reference) {
  uint64_t seed = std::random_device{}();
  for (const Case& c : Cases()) Check<float>(c, seed++, 2e-6);
}

TEST(CpuRnn, HalfTypesRoundOnlyTheirOutputs) {
  uint64_t seed = std::random_device{}();
  for (const Case& c : Cases()) {
    Check<float16>(c, seed++, 1e-3);   // the state stays float: one rounding of each output (2^-11)
    Check<bfloat16>(c, seed++, 8e-3);  // 2^-8
  }
}

RnnSpec SpecOf(const Case& c) {
  RnnSpec s;
  s.cell = c.cell;
  s.seq = c.seq, s.batch = c.batch, s.input = c.input, s.hidden = c.hidden;
  s.directions = c.dirs, s.reverse = c.reverse, s.batch_major = c.batch_major;
  s.clip = c.clip, s.input_forget = c.input_forget, s.linear_before_reset = c.lbr;
  return s;
}

// sum(Y * gy) + sum(Y_h * gh) + sum(Y_c * gc) through the float64 kernel.
double Loss(const Case& c, const Operands& o, const std::vector<double>& gy, const std::vector<double>& gh,
            const std::vector<double>& gc) {
  std::vector<double> y(gy.size()), yh(gh.size()), yc(gc.size());
  auto ptr = [](const std::vector<double>& v) { return v.empty() ? nullptr : v.data(); };
  RnnForward<double>(SpecOf(c), o.x.data(), o.w.data(), o.r.data(), ptr(o.b), o.lens.empty() ? nullptr : o.lens.data(),
                     ptr(o.h0), ptr(o.c0), ptr(o.p), y.data(), yh.data(), yc.data());
  double l = 0;
  for (size_t i = 0; i < y.size(); ++i) l += y[i] * gy[i];
  for (size_t i = 0; i < yh.size(); ++i) l += yh[i] * gh[i];
  if (c.cell == RnnCell::kLstm)
    for (size_t i = 0; i < yc.size(); ++i) l += yc[i] * gc[i];
  return l;
}

TEST(CpuRnn, BackwardMatchesFiniteDifferencesInFloat64) {
  uint64_t seed = std::random_device{}();
  for (const Case& c : Cases()) {
    std::mt19937 rng(static_cast<uint32_t>(seed++));
    Operands o = Draw(c, rng);
    if (c.cell == RnnCell::kLstm && o.h0.empty()) o.h0.assign(c.dirs * c.batch * c.hidden, 0.0), o.c0 = o.h0;
    if (o.h0.empty()) o.h0.assign(c.dirs * c.batch * c.hidden, 0.0);
    if (o.c0.empty()) o.c0.assign(o.h0.size(), 0.0);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> gy(c.seq * c.dirs * c.batch * c.hidden), gh(o.h0.size()), gc(o.h0.size());
    for (auto* v : {&gy, &gh, &gc})
      for (double& e : *v) e = u(rng);
    const int64_t G = c.cell == RnnCell::kLstm ? 4 : c.cell == RnnCell::kGru ? 3 : 1;
    std::vector<double> dx(o.x.size()), dw(o.w.size()), dr(o.r.size()), db(c.dirs * 2 * G * c.hidden), dh0(o.h0.size()),
        dc0(o.c0.size()), dp(c.dirs * 3 * c.hidden);
    auto ptr = [](const std::vector<double>& v) { return v.empty() ? nullptr : v.data(); };
    RnnBackward<double>(SpecOf(c), o.x.data(), o.w.data(), o.r.data(), ptr(o.b),
                        o.lens.empty() ? nullptr : o.lens.data(), ptr(o.h0), ptr(o.c0), ptr(o.p), gy.data(), gh.data(),
                        gc.data(), dx.data(), dw.data(), dr.data(), db.data(), dh0.data(), dc0.data(), dp.data());
    auto check = [&](std::vector<double>& param, const std::vector<double>& grad, const char* what) {
      for (size_t i = 0; i < param.size(); ++i) {
        const double keep = param[i], eps = 1e-6;
        param[i] = keep + eps;
        const double up = Loss(c, o, gy, gh, gc);
        param[i] = keep - eps;
        const double down = Loss(c, o, gy, gh, gc);
        param[i] = keep;
        const double fd = (up - down) / (2 * eps);
        ASSERT_NEAR(grad[i], fd, 1e-6 * (1 + std::fabs(fd))) << c.name() << ": d" << what << "[" << i << "]";
      }
    };
    check(o.x, dx, "X");
    check(o.w, dw, "W");
    check(o.r, dr, "R");
    if (!o.b.empty()) check(o.b, db, "B");
    check(o.h0, dh0, "initial_h");
    if (c.cell == RnnCell::kLstm) check(o.c0, dc0, "initial_c");
    if (!o.p.empty()) check(o.p, dp, "P");
  }
}

TEST(CpuRnn, LengthsOutsideTheSequenceAreRefused) {
  RnnSpec s;
  s.cell = RnnCell::kRnn;
  s.seq = 2, s.batch = 2, s.input = 1, s.hidden = 1;
  std::vector<float> x(4, 0.5f), w(1, 1.f), r(1, 1.f), y(4);
  for (int32_t bad : {-1, 3}) {
    std::vector<int32_t> lens = {2, bad};
    try {
      RnnForward<float>(s, x.data(), w.data(), r.data(), nullptr, lens.data(), nullptr, nullptr, nullptr, y.data(),
                        nullptr, nullptr);
      ADD_FAILURE() << "length " << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("sequence_lens[1]"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ot::cpu
