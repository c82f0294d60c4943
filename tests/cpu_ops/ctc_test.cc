// cpu_ops CTC loss against a float64 reference written another way -- the probability of every path of C^T
// enumerated, collapsed (repeats merged, blanks dropped) and summed where it spells the labels -- and its gradient
// against float64 central differences, on fresh random logits: repeated labels, empty labels, zero frames, the
// blank at either end of the classes, both layouts, frames past a sample's length, zero_infinity, and the errors.
#include "cpu_ops/ctc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ot::cpu {
namespace {

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(std::random_device{}());
  return rng;
}

std::vector<double> RandomLogits(int64_t n, double scale = 2.0) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = u(Rng());
  return v;
}

// -log p(labels | logits of one sample [frames, classes]) by enumerating every path.
double BruteNll(const std::vector<double>& lg, int64_t frames, int64_t classes, const std::vector<int64_t>& labels,
                int64_t blank) {
  std::vector<std::vector<double>> prob(static_cast<size_t>(frames), std::vector<double>(static_cast<size_t>(classes)));
  for (int64_t t = 0; t < frames; ++t) {
    double z = 0;
    for (int64_t c = 0; c < classes; ++c) z += std::exp(lg[static_cast<size_t>(t * classes + c)]);
    for (int64_t c = 0; c < classes; ++c)
      prob[static_cast<size_t>(t)][static_cast<size_t>(c)] = std::exp(lg[static_cast<size_t>(t * classes + c)]) / z;
  }
  double total = 0;
  int64_t paths = 1;
  for (int64_t t = 0; t < frames; ++t) paths *= classes;
  for (int64_t p = 0; p < paths; ++p) {
    std::vector<int64_t> path(static_cast<size_t>(frames));
    int64_t k = p;
    double pr = 1;
    for (int64_t t = 0; t < frames; ++t) {
      path[static_cast<size_t>(t)] = k % classes;
      k /= classes;
      pr *= prob[static_cast<size_t>(t)][static_cast<size_t>(path[static_cast<size_t>(t)])];
    }
    std::vector<int64_t> out;
    for (int64_t t = 0; t < frames; ++t) {
      const int64_t c = path[static_cast<size_t>(t)];
      if (c != blank && (t == 0 || c != path[static_cast<size_t>(t - 1)])) out.push_back(c);
    }
    if (out == labels) total += pr;
  }
  return -std::log(total);
}

struct Batch {
  CtcSpec s;
  std::vector<double> logits;
  std::vector<int64_t> labels, logit_lens, label_lens;
  // Sample b's logits as [frames, classes] rows.
  std::vector<double> SampleLogits(int64_t b) const {
    std::vector<double> r;
    for (int64_t t = 0; t < s.frames; ++t)
      for (int64_t c = 0; c < s.classes; ++c)
        r.push_back(
            logits[static_cast<size_t>((s.batch_major ? (b * s.frames + t) : (t * s.batch + b)) * s.classes + c)]);
    return r;
  }
  std::vector<int64_t> SampleLabels(int64_t b) const {
    return {labels.begin() + b * s.max_labels, labels.begin() + b * s.max_labels + label_lens[static_cast<size_t>(b)]};
  }
};

// Three samples of 3 classes: labels with a repeat, without labels, and one cut short; padding is garbage.
Batch MakeBatch(bool batch_major, int64_t blank) {
  Batch b;
  b.s.frames = 5;
  b.s.batch = 3;
  b.s.classes = 3;
  b.s.max_labels = 3;
  b.s.batch_major = batch_major;
  b.s.blank = blank;
  const int64_t x = blank == 0 ? 1 : 0, y = blank == 0 ? 2 : 1;  // the two non-blank classes
  b.labels = {x, x, y, /**/ 77, -5, 999, /**/ y, x, 12345};
  b.label_lens = {3, 0, 2};
  b.logit_lens = {5, 4, 3};
  b.logits = RandomLogits(b.s.frames * b.s.batch * b.s.classes);
  return b;
}

std::vector<double> Nll(const Batch& b) {
  std::vector<double> nll(static_cast<size_t>(b.s.batch), std::nan(""));
  CtcLoss<double>(b.s, b.logits.data(), b.labels.data(), b.logit_lens.data(), b.label_lens.data(), nll.data());
  return nll;
}

TEST(CtcLoss, MatchesEveryPathEnumerated) {
  for (bool bm : {false, true})
    for (int64_t blank : {0, 2}) {
      const Batch b = MakeBatch(bm, blank);
      const std::vector<double> nll = Nll(b);
      for (int64_t i = 0; i < b.s.batch; ++i) {
        const std::vector<double> lg = b.SampleLogits(i);
        const double want = BruteNll(lg, b.logit_lens[static_cast<size_t>(i)], b.s.classes, b.SampleLabels(i), blank);
        EXPECT_NEAR(nll[static_cast<size_t>(i)], want, 1e-12 * std::max(1.0, std::abs(want)))
            << "sample " << i << " batch_major " << bm << " blank " << blank;
      }
    }
}

TEST(CtcLoss, GradientMatchesCentralDifferences) {
  for (bool bm : {false, true}) {
    Batch b = MakeBatch(bm, 0);
    const std::vector<double> w = RandomLogits(b.s.batch, 1.0);  // d loss / d nll_b
    std::vector<double> grad(b.logits.size(), std::nan(""));
    CtcLossGrad<double>(b.s, b.logits.data(), b.labels.data(), b.logit_lens.data(), b.label_lens.data(), w.data(),
                        grad.data());
    auto loss = [&] {
      const std::vector<double> nll = Nll(b);
      double l = 0;
      for (size_t i = 0; i < nll.size(); ++i) l += w[i] * nll[i];
      return l;
    };
    const double h = 1e-6;
    for (size_t i = 0; i < b.logits.size(); ++i) {
      const double keep = b.logits[i];
      b.logits[i] = keep + h;
      const double up = loss();
      b.logits[i] = keep - h;
      const double down = loss();
      b.logits[i] = keep;
      const double fd = (up - down) / (2 * h);
      ASSERT_FALSE(std::isnan(grad[i])) << "element " << i << " not written";
      EXPECT_NEAR(grad[i], fd, 1e-7) << "element " << i << " batch_major " << bm;
    }
    // Frames past a sample's length: exactly zero (sample 2 has 3 of 5 frames).
    for (int64_t t = 3; t < 5; ++t)
      for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(grad[static_cast<size_t>((bm ? 2 * 5 + t : t * 3 + 2) * 3 + c)], 0.0);
  }
}

TEST(CtcLoss, FloatAgreesWithDouble) {
  CtcSpec s;
  s.frames = 40;
  s.batch = 4;
  s.classes = 12;
  s.max_labels = 10;
  s.blank = 0;
  const std::vector<double> lg = RandomLogits(s.frames * s.batch * s.classes, 4.0);
  std::vector<float> lf(lg.begin(), lg.end());
  std::vector<double> ld(lf.begin(), lf.end());  // the same values in both precisions
  std::uniform_int_distribution<int64_t> cls(1, s.classes - 1);
  std::vector<int64_t> labels(static_cast<size_t>(s.batch * s.max_labels));
  for (int64_t& l : labels) l = cls(Rng());
  const std::vector<int64_t> label_lens{10, 7, 1, 4}, logit_lens{40, 33, 20, 12};
  std::vector<double> nf(4), nd(4), w{0.25, 0.25, 0.25, 0.25};
  CtcLoss<float>(s, lf.data(), labels.data(), logit_lens.data(), label_lens.data(), nf.data());
  CtcLoss<double>(s, ld.data(), labels.data(), logit_lens.data(), label_lens.data(), nd.data());
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(nf[i], nd[i], 1e-12 * nd[i]) << i;  // the math runs in double for both
  std::vector<float> gf(lf.size(), std::nanf(""));
  std::vector<double> gd(ld.size());
  CtcLossGrad<float>(s, lf.data(), labels.data(), logit_lens.data(), label_lens.data(), w.data(), gf.data());
  CtcLossGrad<double>(s, ld.data(), labels.data(), logit_lens.data(), label_lens.data(), w.data(), gd.data());
  for (size_t i = 0; i < gf.size(); ++i) EXPECT_NEAR(gf[i], gd[i], 1e-7) << i;
}

TEST(CtcLoss, LabelsThatCannotFitAreInfiniteOrZero) {
  CtcSpec s;
  s.frames = 4;
  s.batch = 2;
  s.classes = 3;
  s.max_labels = 3;
  const std::vector<int64_t> labels{1, 1, 2, /**/ 1, 2, 1};  // needs 4 frames; needs 3
  const std::vector<int64_t> label_lens{3, 3}, logit_lens{3, 3};
  EXPECT_EQ(CtcMinFrames(labels.data(), 3), 4);
  EXPECT_EQ(CtcMinFrames(labels.data() + 3, 3), 3);
  const std::vector<double> lg = RandomLogits(s.frames * s.batch * s.classes);
  std::vector<double> nll(2), w{1, 1}, g(lg.size());
  CtcLoss<double>(s, lg.data(), labels.data(), logit_lens.data(), label_lens.data(), nll.data());
  EXPECT_TRUE(std::isinf(nll[0]) && nll[0] > 0);
  EXPECT_TRUE(std::isfinite(nll[1]));
  s.zero_infinity = true;
  CtcLoss<double>(s, lg.data(), labels.data(), logit_lens.data(), label_lens.data(), nll.data());
  EXPECT_EQ(nll[0], 0.0);
  CtcLossGrad<double>(s, lg.data(), labels.data(), logit_lens.data(), label_lens.data(), w.data(), g.data());
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t c = 0; c < 3; ++c) {
      EXPECT_EQ(g[static_cast<size_t>((t * 2 + 0) * 3 + c)], 0.0);
      if (t < 3) {
        EXPECT_NE(g[static_cast<size_t>((t * 2 + 1) * 3 + c)], 0.0);
      }
    }
}

TEST(CtcLoss, NoFramesNoLabelsIsZero) {
  CtcSpec s;
  s.frames = 2;
  s.batch = 2;
  s.classes = 2;
  s.max_labels = 1;
  const std::vector<int64_t> labels{1, 1}, label_lens{0, 1}, logit_lens{0, 0};
  const std::vector<double> lg = RandomLogits(8);
  std::vector<double> nll(2);
  CtcLoss<double>(s, lg.data(), labels.data(), logit_lens.data(), label_lens.data(), nll.data());
  EXPECT_EQ(nll[0], 0.0);
  EXPECT_TRUE(std::isinf(nll[1]));
  // The gradient of samples without frames: nothing to write but their rows' zeros (read past nothing).
  s.zero_infinity = true;
  std::vector<double> w{1, 1}, g(8, std::nan(""));
  CtcLossGrad<double>(s, lg.data(), labels.data(), logit_lens.data(), label_lens.data(), w.data(), g.data());
  for (double v : g) EXPECT_EQ(v, 0.0);
}

TEST(CtcLoss, BadLengthsAndLabelsNameTheSample) {
  CtcSpec s;
  s.frames = 4;
  s.batch = 2;
  s.classes = 3;
  s.max_labels = 2;
  s.blank = 0;
  const std::vector<double> lg = RandomLogits(24);
  std::vector<double> nll(2);
  auto run = [&](std::vector<int64_t> labels, std::vector<int64_t> logit_lens, std::vector<int64_t> label_lens) {
    try {
      CtcLoss<double>(s, lg.data(), labels.data(), logit_lens.data(), label_lens.data(), nll.data());
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(run({1, 2, 1, 2}, {4, 4}, {2, 2}), "");
  EXPECT_EQ(run({1, 2, 1, 0}, {4, 4}, {2, 2}), "sample 1: label 1 is 0, the blank");
  EXPECT_EQ(run({1, 2, 3, 2}, {4, 4}, {2, 2}), "sample 1: label 0 is 3, outside [0, 3)");
  EXPECT_EQ(run({1, 2, 1, 2}, {5, 4}, {2, 2}), "sample 0: logit length 5 is outside [0, 4], the logits' frames");
  EXPECT_EQ(run({1, 2, 1, 2}, {4, 4}, {2, 3}), "sample 1: label length 3 is outside [0, 2], the labels' width");
  EXPECT_EQ(run({1, 0, 1, 2}, {4, 4}, {1, 2}), "");  // the blank past a sample's length is padding
}

}  // namespace
}  // namespace ot::cpu
