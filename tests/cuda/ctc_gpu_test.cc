// cuda_ops/ctc.h against the CPU kernels (cpu::CtcLoss / cpu::CtcLossGrad, and the reduction of
// executor/kernels/ctc.cc) on seeded random logits, labels and lengths: labels with repeated neighbours, empty label
// rows, padding past each row's length holding junk (blank, out of range), a sample cut short (its frames past the
// length must get a zero gradient), a sample with no frames, and a sample whose labels cannot fit its frames
// (infinite nll: 0 with zero_infinity, else an infinite loss and NaN gradient rows, as on the CPU); both layouts
// (tbc, btc), both reductions, float32 and float64 logits. Outputs start as NaN, so an element never written fails.
// Bound per element: tol x (|reference| + 1e-3 |w_b|) (the gradient's tiny elements are differences of nearly equal
// probabilities, computed in double on both sides and rounded once), tol 1e-5 for float32, 1e-9 for float64; the
// per-sample nll and the loss within tol relative. Repeated runs are bitwise equal (deterministic); invalid lengths or
// labels raise the device flag. Then the executor's CTCLoss / CTCLossGrad nodes (executor/cuda/kernels_ctc.cc) against
// the CPU executor. Label `gpu` (tests named *Gpu*), skipped without a device; the host-side checks (ValidateCtc,
// workspace sizes, argument errors) run without one.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu_ops/ctc.h"
#include "cuda_ops/ctc.h"
#include "cuda_ops/device_info.h"
#include "executor/device.h"
#include "graph/graph.h"
#include "graph/tensor.h"
#include "tests/cuda/gpu_test_util.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using cuda::CtcDesc;
using cuda::CtcReduction;
using test::Dev;
using test::Download;
using test::Upload;

#define REQUIRE_CUDA_DEVICE_CTC() \
  if (::ot::cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

// One problem: sizes, attributes, and the host operands (logits as double; stored as T on both sides).
struct Problem {
  CtcDesc d;
  std::vector<double> logits;
  std::vector<int64_t> labels, logit_lens, label_lens;
};

// Random labels for sample b of length n: classes other than blank, repeated neighbours with probability 0.3.
void FillLabels(Problem& p, int64_t b, int64_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> cls(0, p.d.classes - 2);
  std::uniform_int_distribution<int> coin(0, 9);
  int64_t* row = &p.labels[static_cast<size_t>(b * p.d.max_labels)];
  for (int64_t i = 0; i < n; ++i) {
    int64_t c = cls(rng);
    if (c >= p.d.blank) ++c;  // skip the blank
    row[i] = i > 0 && coin(rng) < 3 ? row[i - 1] : c;
  }
  // Junk past the length: blank, negative, out of range -- all ignored.
  for (int64_t i = n; i < p.d.max_labels; ++i) row[i] = (i % 3 == 0) ? p.d.blank : (i % 3 == 1) ? -7 : p.d.classes + 5;
}

// Samples: 0 full length with full labels; 1 empty labels; 2 cut short; 3 unfit (labels need more frames than it
// has, when the batch is large enough); 4 no frames (with labels: infinite); the rest random.
Problem MakeProblem(int64_t frames, int64_t batch, int64_t classes, int64_t max_labels, bool batch_major, int64_t blank,
                    CtcReduction red, bool zero_inf, bool no_frames_sample) {
  std::mt19937_64& rng = test::Rng();
  Problem p;
  p.d.frames = frames;
  p.d.batch = batch;
  p.d.classes = classes;
  p.d.max_labels = max_labels;
  p.d.batch_major = batch_major;
  p.d.blank = blank;
  p.d.reduction = red;
  p.d.zero_infinity = zero_inf;
  std::uniform_real_distribution<double> u(-3, 3);
  p.logits.resize(static_cast<size_t>(frames * batch * classes));
  for (double& v : p.logits) v = u(rng);
  p.labels.assign(static_cast<size_t>(batch * max_labels), 0);
  p.logit_lens.assign(static_cast<size_t>(batch), frames);
  p.label_lens.assign(static_cast<size_t>(batch), 0);
  for (int64_t b = 0; b < batch; ++b) {
    const size_t bi = static_cast<size_t>(b);
    int64_t n = std::uniform_int_distribution<int64_t>(0, max_labels)(rng);
    if (b == 0) n = max_labels;
    if (b == 1) n = 0;
    if (b == 3) n = std::max<int64_t>(n, 1);
    // Fit n labels (with their repeats) into the frames: shorten until they fit.
    for (;;) {
      FillLabels(p, b, n, rng);
      if (cpu::CtcMinFrames(&p.labels[bi * static_cast<size_t>(max_labels)], n) <= frames || n == 0) break;
      --n;
    }
    p.label_lens[bi] = n;
    const int64_t need = cpu::CtcMinFrames(&p.labels[bi * static_cast<size_t>(max_labels)], n);
    if (b == 2) p.logit_lens[bi] = std::max<int64_t>(need, frames - 3);
    if (b == 3 && n > 0) p.logit_lens[bi] = need - 1;  // cannot fit: infinite nll
    if (b == 4 && no_frames_sample) {
      p.logit_lens[bi] = 0;
      if (p.label_lens[bi] == 0) {
        FillLabels(p, b, 1, rng);
        p.label_lens[bi] = 1;
      }
    }
    // At least one frame: cpu::CtcLossGrad cannot take a sample with neither frames nor labels.
    if (b > 4) p.logit_lens[bi] = std::uniform_int_distribution<int64_t>(std::max<int64_t>(need, 1), frames)(rng);
  }
  return p;
}

template <typename T>
std::vector<T> AsT(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <typename T>
double Tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-9;
}

cpu::CtcSpec SpecOf(const CtcDesc& d) {
  cpu::CtcSpec s;
  s.frames = d.frames;
  s.batch = d.batch;
  s.classes = d.classes;
  s.max_labels = d.max_labels;
  s.batch_major = d.batch_major;
  s.blank = d.blank;
  s.zero_infinity = d.zero_infinity;
  return s;
}

// d loss / d nll_b of the reduction (executor/kernels/ctc.cc's Weights).
std::vector<double> Weights(const Problem& p) {
  std::vector<double> w(static_cast<size_t>(p.d.batch), 1.0);
  if (p.d.reduction == CtcReduction::kMean)
    for (int64_t b = 0; b < p.d.batch; ++b)
      w[static_cast<size_t>(b)] = 1.0 /
                                  static_cast<double>(std::max<int64_t>(1, p.label_lens[static_cast<size_t>(b)])) /
                                  static_cast<double>(std::max<int64_t>(1, p.d.batch));
  return w;
}

// got vs ref: NaN where ref is NaN, the same infinity where ref is infinite, else within bound.
bool Near(double got, double ref, double bound) {
  if (std::isnan(ref)) return std::isnan(got);
  if (std::isinf(ref)) return got == ref;
  return std::fabs(got - ref) <= bound;
}

template <typename T>
struct DeviceProblem {
  std::unique_ptr<Dev> logits, labels, logit_lens, label_lens;
  explicit DeviceProblem(const Problem& p) {
    const std::vector<T> lg = AsT<T>(p.logits);
    logits = std::make_unique<Dev>(lg.size() * sizeof(T));
    labels = std::make_unique<Dev>(p.labels.size() * sizeof(int64_t));
    logit_lens = std::make_unique<Dev>(p.logit_lens.size() * sizeof(int64_t));
    label_lens = std::make_unique<Dev>(p.label_lens.size() * sizeof(int64_t));
    Upload(*logits, lg);
    Upload(*labels, p.labels);
    Upload(*logit_lens, p.logit_lens);
    Upload(*label_lens, p.label_lens);
  }
};

template <typename T>
void CheckProblem(const Problem& p) {
  SCOPED_TRACE(cuda::ToString(p.d));
  CtcDesc d = p.d;
  d.f64 = std::is_same_v<T, double>;
  const double tol = Tol<T>();
  const size_t B = static_cast<size_t>(d.batch), N = p.logits.size();
  const std::vector<T> lg = AsT<T>(p.logits);
  const cpu::CtcSpec s = SpecOf(d);
  DeviceProblem<T> dev(p);

  // Forward: per-sample nll and the loss.
  std::vector<double> ref_nll(B);
  cpu::CtcLoss<T>(s, lg.data(), p.labels.data(), p.logit_lens.data(), p.label_lens.data(), ref_nll.data());
  const std::vector<double> w = Weights(p);
  double ref_loss = 0;
  for (size_t b = 0; b < B; ++b) ref_loss += w[b] * ref_nll[b];
  const size_t wsf = cuda::CtcWorkspaceBytes(d, false);
  Dev ws(wsf), loss(sizeof(T)), nll(B * sizeof(double)), bad(sizeof(int));
  CUDA_OK(cudaMemset(loss.p, 0xFF, sizeof(T)));
  CUDA_OK(cudaMemset(nll.p, 0xFF, B * sizeof(double)));
  CUDA_OK(cudaMemset(bad.p, 0, sizeof(int)));
  ASSERT_NO_THROW(cuda::CtcLossForward(d, dev.logits->p, dev.labels->template as<int64_t>(),
                                       dev.logit_lens->template as<int64_t>(), dev.label_lens->template as<int64_t>(),
                                       loss.p, nll.template as<double>(), bad.template as<int>(), ws.p, wsf, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(test::DownScalar<int>(bad), 0);
  const std::vector<double> got_nll = Download<double>(nll, B);
  for (size_t b = 0; b < B; ++b)
    EXPECT_TRUE(Near(got_nll[b], ref_nll[b], tol * std::fabs(ref_nll[b]) + 1e-12))
        << "sample " << b << ": nll " << got_nll[b] << ", expected " << ref_nll[b];
  const double got_loss = static_cast<double>(test::DownScalar<T>(loss));
  EXPECT_TRUE(Near(got_loss, static_cast<double>(static_cast<T>(ref_loss)), tol * std::fabs(ref_loss) + 1e-12))
      << "loss " << got_loss << ", expected " << ref_loss;
  // Without the nll output (the workspace's own row).
  Dev loss2(sizeof(T));
  ASSERT_NO_THROW(cuda::CtcLossForward(d, dev.logits->p, dev.labels->template as<int64_t>(),
                                       dev.logit_lens->template as<int64_t>(), dev.label_lens->template as<int64_t>(),
                                       loss2.p, nullptr, bad.template as<int>(), ws.p, wsf, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  {
    const T a = test::DownScalar<T>(loss2), b = test::DownScalar<T>(loss);
    EXPECT_TRUE((std::isnan(static_cast<double>(a)) && std::isnan(static_cast<double>(b))) ||
                std::memcmp(&a, &b, sizeof(T)) == 0);
  }

  // Backward: dloss * w_b * d nll_b / d logits.
  const double g = 0.75;
  std::vector<double> wg = w;
  for (double& x : wg) x *= static_cast<double>(static_cast<T>(g));
  std::vector<T> ref_d(N);
  cpu::CtcLossGrad<T>(s, lg.data(), p.labels.data(), p.logit_lens.data(), p.label_lens.data(), wg.data(), ref_d.data());
  const size_t wsb = cuda::CtcWorkspaceBytes(d, true);
  Dev wsg(wsb), dl(sizeof(T)), dx(N * sizeof(T)), dx2(N * sizeof(T));
  test::UpScalar<T>(dl, static_cast<T>(g));
  CUDA_OK(cudaMemset(dx.p, 0xFF, N * sizeof(T)));
  CUDA_OK(cudaMemset(dx2.p, 0xFF, N * sizeof(T)));
  for (Dev* out : {&dx, &dx2})
    ASSERT_NO_THROW(cuda::CtcLossBackward(
        d, dl.p, dev.logits->p, dev.labels->template as<int64_t>(), dev.logit_lens->template as<int64_t>(),
        dev.label_lens->template as<int64_t>(), out->p, bad.template as<int>(), wsg.p, wsb, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(test::DownScalar<int>(bad), 0);
  const std::vector<T> got = Download<T>(dx, N), again = Download<T>(dx2, N);
  const int64_t C = d.classes;
  int wrong = 0;
  for (size_t i = 0; i < N; ++i) {
    const int64_t row = static_cast<int64_t>(i) / C;
    const int64_t b = d.batch_major ? row / d.frames : row % d.batch;
    const double bound =
        tol * (std::fabs(static_cast<double>(ref_d[i])) + 1e-3 * std::fabs(wg[static_cast<size_t>(b)]));
    if (!Near(static_cast<double>(got[i]), static_cast<double>(ref_d[i]), bound) && ++wrong <= 5)
      ADD_FAILURE() << "dlogits[" << i << "] (sample " << b << ") is " << got[i] << ", expected " << ref_d[i]
                    << " (bound " << bound << ")";
  }
  EXPECT_EQ(wrong, 0) << wrong << " of " << N << " gradient elements out of tolerance";
  EXPECT_EQ(std::memcmp(got.data(), again.data(), N * sizeof(T)), 0) << "repeated runs differ";
}

// ---- host-side checks (no GPU needed) -----------------------------------------------------------------------------

CtcDesc SmallDesc() {
  CtcDesc d;
  d.frames = 10;
  d.batch = 3;
  d.classes = 5;
  d.max_labels = 4;
  return d;
}

TEST(Ctc, ValidateRejectsMalformedDescs) {
  const CtcDesc d = SmallDesc();
  EXPECT_NO_THROW(cuda::ValidateCtc(d));
  CtcDesc bad = d;
  bad.classes = 0;
  EXPECT_THROW(cuda::ValidateCtc(bad), std::invalid_argument);
  bad = d;
  bad.blank = 5;
  EXPECT_THROW(cuda::ValidateCtc(bad), std::invalid_argument);
  bad = d;
  bad.blank = -1;
  EXPECT_THROW(cuda::ValidateCtc(bad), std::invalid_argument);
  bad = d;
  bad.frames = -1;
  EXPECT_THROW(cuda::ValidateCtc(bad), std::invalid_argument);
  bad = d;
  bad.max_labels = int64_t{1} << 29;
  EXPECT_THROW(cuda::ValidateCtc(bad), std::invalid_argument);
  bad = d;
  bad.batch = int64_t{1} << 31;
  EXPECT_THROW(cuda::ValidateCtc(bad), std::invalid_argument);
  bad = d;
  bad.batch = int64_t{1} << 30;
  bad.frames = int64_t{1} << 30;
  EXPECT_THROW(cuda::ValidateCtc(bad), std::invalid_argument);  // the gradient's alpha would not fit
  bad = d;
  bad.blank = 4;
  bad.batch_major = true;
  bad.f64 = true;
  EXPECT_NO_THROW(cuda::ValidateCtc(bad));
}

TEST(Ctc, WorkspaceHoldsTheAlphaTable) {
  CtcDesc d = SmallDesc();
  const size_t states = 2 * 4 + 1;
  // Forward: normalizers, two alpha rows and the nll per sample; backward: the full alpha table.
  EXPECT_GE(cuda::CtcWorkspaceBytes(d, false), (3 * 10 + 3 * 2 * states + 3) * sizeof(double));
  EXPECT_GE(cuda::CtcWorkspaceBytes(d, true), (3 * 10 + 3 * 10 * states + 3 * 2 * states) * sizeof(double));
  EXPECT_LT(cuda::CtcWorkspaceBytes(d, false), cuda::CtcWorkspaceBytes(d, true));
  d.frames = 200;
  EXPECT_GT(cuda::CtcWorkspaceBytes(d, true), 3 * 200 * states * sizeof(double));
  EXPECT_EQ(cuda::CtcWorkspaceBytes(d, false) % 256, 0u);
  d.batch = 0;
  EXPECT_NO_THROW(cuda::CtcWorkspaceBytes(d, true));
}

TEST(Ctc, LaunchersCheckTheirArgumentsOnTheHost) {
  const CtcDesc d = SmallDesc();
  int fake = 0;
  // Too small a workspace, a null loss, a malformed desc: std::invalid_argument before any CUDA call.
  EXPECT_THROW(cuda::CtcLossForward(d, &fake, nullptr, nullptr, nullptr, &fake, nullptr, nullptr, &fake, 8, nullptr),
               std::invalid_argument);
  const size_t wsf = cuda::CtcWorkspaceBytes(d, false), wsb = cuda::CtcWorkspaceBytes(d, true);
  EXPECT_THROW(
      cuda::CtcLossForward(d, &fake, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &fake, wsf, nullptr),
      std::invalid_argument);
  EXPECT_THROW(
      cuda::CtcLossBackward(d, &fake, &fake, nullptr, nullptr, nullptr, &fake, nullptr, &fake, wsb - 1, nullptr),
      std::invalid_argument);
  const int64_t labels = 1;
  EXPECT_THROW(cuda::CtcLossBackward(d, &fake, &fake, &labels, nullptr, nullptr, &fake, nullptr, &fake, wsb, nullptr),
               std::invalid_argument);  // null lengths
  CtcDesc bad = d;
  bad.blank = 7;
  EXPECT_THROW(cuda::CtcWorkspaceBytes(bad, false), std::invalid_argument);
  // An empty batch: the gradient is empty, nothing launched (runs without a GPU).
  CtcDesc empty = d;
  empty.batch = 0;
  EXPECT_NO_THROW(cuda::CtcLossBackward(empty, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                        cuda::CtcWorkspaceBytes(empty, true), nullptr));
}

// ---- against the CPU kernels ------------------------------------------------------------------------------------

struct Shape {
  int64_t frames, batch, classes, max_labels, blank;
};

const Shape kShapes[] = {
    {12, 7, 6, 4, 0},     // small vocabulary, many repeats
    {30, 9, 29, 10, 0},   // character-level sizes
    {25, 6, 40, 12, 39},  // blank last
    {50, 5, 300, 20, 3},  // a larger vocabulary (the normalizer's warps stride), blank inside
    {8, 5, 5, 6, 1},      // labels longer than most frames allow: many shortened
    {40, 3, 7, 150, 0},   // more states (301) than threads per block (256)
};

TEST(CtcGpu, LossAndGradientMatchTheCpu) {
  REQUIRE_CUDA_DEVICE_CTC();
  for (const Shape& sh : kShapes)
    for (bool batch_major : {false, true})
      for (CtcReduction red : {CtcReduction::kMean, CtcReduction::kSum})
        for (bool zero_inf : {false, true}) {
          const Problem p = MakeProblem(sh.frames, sh.batch, sh.classes, sh.max_labels, batch_major, sh.blank, red,
                                        zero_inf, /*no_frames_sample=*/false);
          CheckProblem<float>(p);
          CheckProblem<double>(p);
        }
}

// A sample with no frames but labels: infinite nll (0 under zero_infinity), nothing of its gradient to write.
TEST(CtcGpu, SampleWithoutFrames) {
  REQUIRE_CUDA_DEVICE_CTC();
  for (bool zero_inf : {false, true})
    for (bool batch_major : {false, true}) {
      const Problem p = MakeProblem(9, 6, 8, 3, batch_major, 0, CtcReduction::kMean, zero_inf, true);
      CheckProblem<float>(p);
    }
}

// No frames at all, no labels: nll 0 per sample, loss 0; an empty batch: loss 0.
TEST(CtcGpu, EmptyShapes) {
  REQUIRE_CUDA_DEVICE_CTC();
  for (int64_t batch : {0, 3}) {
    CtcDesc d;
    d.frames = 0;
    d.batch = batch;
    d.classes = 4;
    d.max_labels = 2;
    std::vector<int64_t> labels(static_cast<size_t>(batch * 2), 1), zeros(static_cast<size_t>(batch), 0);
    Dev lab(labels.size() * 8 + 8), ll(zeros.size() * 8 + 8), tl(zeros.size() * 8 + 8), loss(4), bad(4),
        ws(cuda::CtcWorkspaceBytes(d, false) + 1);
    Upload(lab, labels);
    Upload(ll, zeros);
    Upload(tl, zeros);
    CUDA_OK(cudaMemset(loss.p, 0xFF, 4));
    CUDA_OK(cudaMemset(bad.p, 0, 4));
    ASSERT_NO_THROW(cuda::CtcLossForward(d, nullptr, lab.as<int64_t>(), tl.as<int64_t>(), ll.as<int64_t>(), loss.p,
                                         nullptr, bad.as<int>(), ws.p, cuda::CtcWorkspaceBytes(d, false), nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(test::DownScalar<float>(loss), 0.0f);
    EXPECT_EQ(test::DownScalar<int>(bad), 0);
  }
}

// A label equal to blank, a label out of range, a length past the frames or the labels' width: the flag is raised
// and the sample's nll and gradient are NaN; the other samples are unaffected.
TEST(CtcGpu, InvalidInputsRaiseTheFlag) {
  REQUIRE_CUDA_DEVICE_CTC();
  for (int which = 0; which < 4; ++which) {
    SCOPED_TRACE("case " + std::to_string(which));
    Problem p = MakeProblem(10, 4, 6, 3, false, 0, CtcReduction::kSum, false, false);
    p.label_lens[2] = 2;
    p.labels[2 * 3] = 1;
    p.labels[2 * 3 + 1] = 2;
    p.logit_lens[2] = 10;
    if (which == 0) p.labels[2 * 3 + 1] = 0;  // blank
    if (which == 1) p.labels[2 * 3] = 6;      // = classes
    if (which == 2) p.logit_lens[2] = 11;     // > frames
    if (which == 3) p.label_lens[2] = 4;      // > max_labels
    CtcDesc d = p.d;
    DeviceProblem<float> dev(p);
    const size_t B = 4, N = p.logits.size();
    Dev ws(cuda::CtcWorkspaceBytes(d, true)), loss(4), nll(B * 8), bad(4), dl(4), dx(N * 4);
    CUDA_OK(cudaMemset(bad.p, 0, 4));
    test::UpScalar<float>(dl, 1.0f);
    ASSERT_NO_THROW(cuda::CtcLossForward(d, dev.logits->p, dev.labels->as<int64_t>(), dev.logit_lens->as<int64_t>(),
                                         dev.label_lens->as<int64_t>(), loss.p, nll.as<double>(), bad.as<int>(), ws.p,
                                         ws.bytes, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(test::DownScalar<int>(bad), 1);
    const std::vector<double> n = Download<double>(nll, B);
    EXPECT_TRUE(std::isnan(n[2]));
    EXPECT_FALSE(std::isnan(n[0]));
    EXPECT_TRUE(std::isnan(test::DownScalar<float>(loss)));
    CUDA_OK(cudaMemset(bad.p, 0, 4));
    CUDA_OK(cudaMemset(dx.p, 0, N * 4));
    ASSERT_NO_THROW(cuda::CtcLossBackward(d, dl.p, dev.logits->p, dev.labels->as<int64_t>(),
                                          dev.logit_lens->as<int64_t>(), dev.label_lens->as<int64_t>(), dx.p,
                                          bad.as<int>(), ws.p, ws.bytes, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(test::DownScalar<int>(bad), 1);
    const std::vector<float> g = Download<float>(dx, N);
    // tbc: sample 2's rows are t * batch + 2.
    for (int64_t t = 0; t < 10; ++t) {
      EXPECT_TRUE(std::isnan(g[static_cast<size_t>((t * 4 + 2) * 6)])) << "frame " << t;
      EXPECT_FALSE(std::isnan(g[static_cast<size_t>((t * 4 + 0) * 6)])) << "frame " << t;
    }
  }
}

// ---- the executor's nodes -----------------------------------------------------------------------------------------

using Attrs = std::map<std::string, Attribute>;

Tensor LogitsTensor(const Problem& p, DataType t) {
  Tensor x(t, p.d.batch_major ? std::vector<int64_t>{p.d.batch, p.d.frames, p.d.classes}
                              : std::vector<int64_t>{p.d.frames, p.d.batch, p.d.classes});
  for (size_t i = 0; i < p.logits.size(); ++i) x.SetDouble(static_cast<int64_t>(i), p.logits[i]);
  return x;
}

TEST(ExecutorCtcGpu, CtcLossAndItsGradientMatchTheCpu) {
  REQUIRE_GPU();
  for (DataType t : {DataType::kFloat32, DataType::kFloat64})
    for (bool batch_major : {false, true})
      for (const char* red : {"mean", "sum"})
        for (int64_t zero_inf : {0, 1}) {
          const Problem p =
              MakeProblem(20, 6, 11, 6, batch_major, 2,
                          std::string(red) == "mean" ? CtcReduction::kMean : CtcReduction::kSum, zero_inf != 0, false);
          SCOPED_TRACE(DataTypeName(t) + " " + red + (batch_major ? " btc" : " tbc") +
                       (zero_inf ? " zero_infinity" : ""));
          const Attrs attrs{{"blank", Attribute::Int(2)},
                            {"reduction", Attribute::String(red)},
                            {"zero_infinity", Attribute::Int(zero_inf)},
                            {"layout", Attribute::String(batch_major ? "btc" : "tbc")}};
          const std::vector<Tensor> in{LogitsTensor(p, t), Tensor::FromInt64(p.labels, {p.d.batch, p.d.max_labels}),
                                       Tensor::FromInt64(p.logit_lens, {p.d.batch}),
                                       Tensor::FromInt64(p.label_lens, {p.d.batch})};
          const double tol = t == DataType::kFloat32 ? 1e-5 : 1e-9;
          const std::vector<Tensor> cpu = test::RunOp("CTCLoss", in, attrs, 1, 1, {}, nullptr, kInternalDomain);
          const std::vector<Tensor> gpu = test::RunOp("CTCLoss", in, attrs, 1, 1, {}, test::Gpu(), kInternalDomain);
          ASSERT_EQ(gpu.size(), 1u);
          // Without zero_infinity, sample 3 makes the loss infinite on both (and its gradient rows NaN).
          const bool finite = std::isfinite(cpu[0].GetDouble(0));
          EXPECT_EQ(finite, !!zero_inf);
          if (finite)
            test::ExpectClose(gpu[0], cpu[0], tol, tol);
          else
            EXPECT_EQ(gpu[0].GetDouble(0), cpu[0].GetDouble(0));
          Tensor dloss(t, {});
          dloss.SetDouble(0, 1.25);
          std::vector<Tensor> gin{dloss};
          gin.insert(gin.end(), in.begin(), in.end());
          const std::vector<Tensor> cg = test::RunOp("CTCLossGrad", gin, attrs, 1, 1, {}, nullptr, kInternalDomain);
          const std::vector<Tensor> gg = test::RunOp("CTCLossGrad", gin, attrs, 1, 1, {}, test::Gpu(), kInternalDomain);
          ASSERT_EQ(gg.size(), 1u);
          if (finite) test::ExpectClose(gg[0], cg[0], tol, tol);
        }
}

// A bad label is an Error naming the node after the run (the CPU throws one too).
TEST(ExecutorCtcGpu, BadLabelIsAnError) {
  REQUIRE_GPU();
  Problem p = MakeProblem(10, 3, 5, 2, false, 0, CtcReduction::kMean, true, false);
  p.label_lens[1] = 1;
  p.labels[2] = 0;  // the blank
  const std::vector<Tensor> in{LogitsTensor(p, DataType::kFloat32), Tensor::FromInt64(p.labels, {3, 2}),
                               Tensor::FromInt64(p.logit_lens, {3}), Tensor::FromInt64(p.label_lens, {3})};
  EXPECT_ANY_THROW(test::RunOp("CTCLoss", in, {}, 1, 1, {}, nullptr, kInternalDomain));
  EXPECT_ANY_THROW(test::RunOp("CTCLoss", in, {}, 1, 1, {}, test::Gpu(), kInternalDomain));
}

}  // namespace
}  // namespace ot
