// cuda_ops/gemm.h (cuBLASLt) against a float64 host reference. Every case draws fresh seeded inputs (uniform [-1, 1],
// never zero), poisons the whole output allocation with NaN, and then checks that every element of D[m,n] (per batch)
// was written and finite, that the padding beyond n in each row (ld > n) and between batch matrices is still the
// poison bit pattern, and that ||D - ref|| / ||ref|| is within the type's bound: fp32 exact 1e-5, TF32 2e-3, fp16 and
// bf16 1e-2 (inputs are rounded to the type before the reference sees them, so the bound covers only the
// accumulation order, TF32's 10-bit mantissa products and the output's rounding).
//
// Label `gpu` (tests named *Gpu*); they skip without a device. GemmRunnerTest.* run everywhere (label unit).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_ops/device_info.h"
#include "cuda_ops/gemm.h"
#include "kernel_common/half.h"
#include "kernel_common/scalar_math.h"

namespace ot {
namespace {

using cuda::GemmDesc;
using cuda::GemmEpilogue;
using cuda::GemmRunner;
using cuda::GemmType;

#define CUDA_OK(expr)                                                      \
  do {                                                                     \
    const cudaError_t e_ = (expr);                                         \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_); \
  } while (0)

#define SKIP_WITHOUT_GPU()                                          \
  do {                                                              \
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

size_t Bytes(GemmType t) { return t == GemmType::kF32 ? 4 : 2; }

// Round a float to the type (what the device will hold) and back.
float Round(GemmType t, float v) {
  switch (t) {
    case GemmType::kF32:
      return v;
    case GemmType::kF16:
      return HalfBitsToFloat(FloatToHalfBits(v));
    case GemmType::kBF16:
      return Bf16BitsToFloat(FloatToBf16Bits(v));
  }
  return v;
}

std::vector<uint8_t> Encode(GemmType t, const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * Bytes(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == GemmType::kF32) {
      std::memcpy(b.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = t == GemmType::kF16 ? FloatToHalfBits(v[i]) : FloatToBf16Bits(v[i]);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
  }
  return b;
}

float Decode(GemmType t, const uint8_t* p) {
  if (t == GemmType::kF32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == GemmType::kF16 ? HalfBitsToFloat(h) : Bf16BitsToFloat(h);
}

// A quiet-NaN bit pattern of the type, written over every output byte before a run.
std::vector<uint8_t> Poison(GemmType t, size_t n) {
  std::vector<uint8_t> b(n * Bytes(t));
  for (size_t i = 0; i < n; ++i) {
    if (t == GemmType::kF32) {
      const uint32_t u = 0x7fc00001u;
      std::memcpy(b.data() + 4 * i, &u, 4);
    } else {
      const uint16_t h = t == GemmType::kF16 ? 0x7e01 : 0x7fc1;
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
  }
  return b;
}

// Uniform [-1, 1] rounded to the type, never zero.
std::vector<float> Random(GemmType t, size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) {
    do x = Round(t, u(rng));
    while (x == 0.f);
  }
  return v;
}

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) {
    if (cudaMalloc(&p, bytes == 0 ? 1 : bytes) != cudaSuccess) p = nullptr;
  }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// Stored elements of a strided batch of `rows` x `ld` row-major matrices (stride 0 = one shared matrix).
int64_t Extent(int64_t rows, int64_t ld, int64_t batch, int64_t stride) {
  return (batch > 1 && stride > 0 ? (batch - 1) * stride : 0) + rows * ld;
}

double Tolerance(const GemmDesc& g) {
  if (g.type != GemmType::kF32) return 1e-2;
  return g.tf32 ? 2e-3 : 1e-5;
}

bool IsBias(GemmEpilogue e) {
  return e == GemmEpilogue::kBias || e == GemmEpilogue::kBiasRelu || e == GemmEpilogue::kBiasGelu;
}
bool IsBiasGrad(GemmEpilogue e) { return e == GemmEpilogue::kBiasGrad || e == GemmEpilogue::kBiasGradA; }

struct Outcome {
  std::vector<uint8_t> d_bytes;     // the whole D allocation after the run
  std::vector<uint8_t> grad_bytes;  // bias_grad after the run
  double rel_err = 0, grad_rel_err = 0;
  int64_t unwritten = 0, nonfinite = 0, padding_touched = 0;
};

struct Options {
  uint32_t seed = 1;
  size_t bias_offset_bytes = 0;  // place the bias/bias_grad this many bytes past a 256-byte boundary
  size_t workspace_bytes = GemmRunner::WorkspaceBytes();
  bool gelu_erf = false;  // reference Gelu in the erf form instead of cuBLASLt's tanh form
};

// Runs g once on fresh inputs and compares with the float64 reference.
void RunAndCheck(GemmRunner& runner, const GemmDesc& g, const Options& opt, Outcome* out) {
  const GemmType t = g.type;
  const int64_t lda = g.lda ? g.lda : (g.trans_a ? g.m : g.k);
  const int64_t ldb = g.ldb ? g.ldb : (g.trans_b ? g.k : g.n);
  const int64_t ldd = g.ldd ? g.ldd : g.n;
  const int64_t stride_d = g.batch > 1 ? (g.stride_d ? g.stride_d : g.m * ldd) : 0;
  const int64_t na = Extent(g.trans_a ? g.k : g.m, lda, g.batch, g.stride_a);
  const int64_t nb = Extent(g.trans_b ? g.n : g.k, ldb, g.batch, g.stride_b);
  const int64_t nd = Extent(g.m, ldd, g.batch, stride_d);
  const int64_t nvec = g.epilogue == GemmEpilogue::kBiasGradA ? g.m : g.n;

  std::mt19937 rng(opt.seed);
  const std::vector<float> a = Random(t, na, rng), b = Random(t, nb, rng), bias = Random(t, nvec, rng);
  const std::vector<float> c = Random(t, nd, rng);  // C (read only when beta != 0)

  // D starts as NaN everywhere; where beta != 0 the elements of C (inside m x n) hold C's values.
  std::vector<uint8_t> d_init = Poison(t, nd);
  const size_t es = Bytes(t);
  auto d_index = [&](int64_t bt, int64_t i, int64_t j) { return bt * stride_d + i * ldd + j; };
  if (g.beta != 0.f) {
    const std::vector<uint8_t> cb = Encode(t, c);
    for (int64_t bt = 0; bt < g.batch; ++bt)
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) {
          const int64_t x = d_index(bt, i, j);
          std::memcpy(d_init.data() + x * es, cb.data() + x * es, es);
        }
  }

  DevBuf da(na * es), db(nb * es), dd(nd * es), dvec(nvec * es + 256), ws(opt.workspace_bytes);
  ASSERT_TRUE(da.p && db.p && dd.p && dvec.p && (ws.p || opt.workspace_bytes == 0)) << "cudaMalloc failed";
  const std::vector<uint8_t> ab = Encode(t, a), bb = Encode(t, b);
  CUDA_OK(cudaMemcpy(da.p, ab.data(), ab.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(db.p, bb.data(), bb.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dd.p, d_init.data(), d_init.size(), cudaMemcpyHostToDevice));
  uint8_t* vec = static_cast<uint8_t*>(dvec.p) + opt.bias_offset_bytes;
  const std::vector<uint8_t> vec_init = IsBiasGrad(g.epilogue) ? Poison(t, nvec) : Encode(t, bias);
  CUDA_OK(cudaMemcpy(vec, vec_init.data(), vec_init.size(), cudaMemcpyHostToDevice));

  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  runner.Run(g, da.p, db.p, dd.p, IsBias(g.epilogue) ? vec : nullptr, ws.p, opt.workspace_bytes, stream,
             IsBiasGrad(g.epilogue) ? vec : nullptr);
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaStreamDestroy(stream));

  out->d_bytes.resize(nd * es);
  CUDA_OK(cudaMemcpy(out->d_bytes.data(), dd.p, out->d_bytes.size(), cudaMemcpyDeviceToHost));
  if (IsBiasGrad(g.epilogue)) {
    out->grad_bytes.resize(nvec * es);
    CUDA_OK(cudaMemcpy(out->grad_bytes.data(), vec, out->grad_bytes.size(), cudaMemcpyDeviceToHost));
  }

  auto A = [&](int64_t bt, int64_t i, int64_t p) {  // op(A)[i, p]
    const int64_t base = g.batch > 1 ? bt * g.stride_a : 0;
    return static_cast<double>(g.trans_a ? a[base + p * lda + i] : a[base + i * lda + p]);
  };
  auto B = [&](int64_t bt, int64_t p, int64_t j) {  // op(B)[p, j]
    const int64_t base = g.batch > 1 ? bt * g.stride_b : 0;
    return static_cast<double>(g.trans_b ? b[base + j * ldb + p] : b[base + p * ldb + j]);
  };

  // Which elements are written: every (bt, i, j < n); all others must keep the poison bits. The reference multiplies
  // op(A) and op(B)ᵀ copied to dense double rows, so the inner loop is a contiguous dot product.
  std::vector<char> written(nd, 0);
  double err2 = 0, ref2 = 0;
  std::vector<double> opa(g.m * g.k), opbt(g.n * g.k);
  for (int64_t bt = 0; bt < g.batch; ++bt) {
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t p = 0; p < g.k; ++p) opa[i * g.k + p] = A(bt, i, p);
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t p = 0; p < g.k; ++p) opbt[j * g.k + p] = B(bt, p, j);
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        const double* x_row = &opa[i * g.k];
        const double* y_row = &opbt[j * g.k];
        double acc = 0;
        for (int64_t p = 0; p < g.k; ++p) acc += x_row[p] * y_row[p];
        const int64_t x = d_index(bt, i, j);
        double ref = g.alpha * acc + (g.beta != 0.f ? g.beta * static_cast<double>(c[x]) : 0.0);
        if (IsBias(g.epilogue)) ref += bias[j];
        if (g.epilogue == GemmEpilogue::kRelu || g.epilogue == GemmEpilogue::kBiasRelu) ref = ref > 0 ? ref : 0;
        if (g.epilogue == GemmEpilogue::kGelu || g.epilogue == GemmEpilogue::kBiasGelu)
          ref = opt.gelu_erf ? math::GeluErf(ref) : math::GeluTanh(ref);
        written[x] = 1;
        const float got = Decode(t, out->d_bytes.data() + x * es);
        if (std::isnan(got) && std::memcmp(out->d_bytes.data() + x * es, d_init.data() + x * es, es) == 0)
          ++out->unwritten;
        if (!std::isfinite(got)) ++out->nonfinite;
        err2 += (got - ref) * (got - ref);
        ref2 += ref * ref;
      }
    }
  }
  out->rel_err = std::sqrt(err2 / ref2);
  for (int64_t x = 0; x < nd; ++x)
    if (!written[x] && std::memcmp(out->d_bytes.data() + x * es, d_init.data() + x * es, es) != 0)
      ++out->padding_touched;

  if (IsBiasGrad(g.epilogue)) {
    double e2 = 0, r2 = 0;
    for (int64_t v = 0; v < nvec; ++v) {
      double ref = 0;
      for (int64_t p = 0; p < g.k; ++p) ref += g.epilogue == GemmEpilogue::kBiasGrad ? B(0, p, v) : A(0, v, p);
      const float got = Decode(t, out->grad_bytes.data() + v * es);
      if (!std::isfinite(got)) ++out->nonfinite;
      e2 += (got - ref) * (got - ref);
      r2 += ref * ref;
    }
    out->grad_rel_err = std::sqrt(e2 / r2);
  }
}

// RunAndCheck plus the standard assertions.
void Check(GemmRunner& runner, const GemmDesc& g, const Options& opt = {}, Outcome* keep = nullptr) {
  SCOPED_TRACE(cuda::ToString(g));
  Outcome o;
  RunAndCheck(runner, g, opt, &o);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(o.unwritten, 0) << "elements of D left as the NaN poison";
  EXPECT_EQ(o.nonfinite, 0);
  EXPECT_EQ(o.padding_touched, 0) << "elements outside D[m,n] (ld / batch padding) were written";
  EXPECT_LT(o.rel_err, Tolerance(g));
  if (IsBiasGrad(g.epilogue)) {
    EXPECT_LT(o.grad_rel_err, Tolerance(g)) << "bias gradient";
  }
  if (keep) *keep = std::move(o);
}

struct TypeCase {
  GemmType type;
  bool tf32;
  const char* name;
};
const TypeCase kTypes[] = {{GemmType::kF32, false, "f32"},
                           {GemmType::kF32, true, "tf32"},
                           {GemmType::kF16, false, "f16"},
                           {GemmType::kBF16, false, "bf16"}};

GemmDesc Desc(const TypeCase& tc, int64_t m, int64_t n, int64_t k, bool ta = false, bool tb = false) {
  GemmDesc g;
  g.type = tc.type;
  g.tf32 = tc.tf32;
  g.m = m;
  g.n = n;
  g.k = k;
  g.trans_a = ta;
  g.trans_b = tb;
  return g;
}

TEST(GemmRunnerTest, ConstructionMatchesDevicePresence) {
  // Without a GPU, cublasLtCreate fails (CUBLAS_STATUS_NOT_INITIALIZED) and the constructor says so; with one,
  // it succeeds.
  if (cuda::DeviceCount() == 0) {
    try {
      GemmRunner r;
      FAIL() << "GemmRunner constructed without a CUDA device";
    } catch (const std::runtime_error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("cublasLtCreate"), std::string::npos) << msg;
      EXPECT_NE(msg.find("CUBLAS_STATUS_"), std::string::npos) << msg;
      EXPECT_NE(msg.find("no usable CUDA device"), std::string::npos) << msg;
    }
  } else {
    EXPECT_NO_THROW(GemmRunner r);
  }
}

TEST(GemmRunnerTest, DescToStringNamesEveryField) {
  GemmDesc g;
  g.type = GemmType::kBF16;
  g.m = 67;
  g.n = 129;
  g.k = 33;
  g.trans_a = true;
  g.batch = 3;
  g.stride_b = 0;
  g.epilogue = GemmEpilogue::kBiasGelu;
  g.deterministic = true;
  const std::string s = cuda::ToString(g);
  for (const char* part :
       {"bf16", "m=67", "n=129", "k=33", "trans_a=1", "batch=3", "stride_b=0", "bias_gelu", "deterministic"})
    EXPECT_NE(s.find(part), std::string::npos) << part << " not in " << s;
  EXPECT_EQ(GemmRunner::WorkspaceBytes(), size_t{32} << 20);
}

TEST(GemmGpu, TypesAndTransposes) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  uint32_t seed = 10;
  for (const TypeCase& tc : kTypes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) Check(r, Desc(tc, 67, 129, 33, ta, tb), {.seed = ++seed});
}

TEST(GemmGpu, SquareAndTallShapes) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  uint32_t seed = 20;
  for (const TypeCase& tc : kTypes) {
    Check(r, Desc(tc, 128, 128, 128), {.seed = ++seed});
    Check(r, Desc(tc, 1, 255, 17, true, false), {.seed = ++seed});
    Check(r, Desc(tc, 300, 1, 513, false, true), {.seed = ++seed});
  }
}

TEST(GemmGpu, LeadingDimsAboveDense) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  uint32_t seed = 30;
  for (const TypeCase& tc : kTypes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        GemmDesc g = Desc(tc, 67, 129, 33, ta, tb);
        g.lda = (ta ? g.m : g.k) + 5;
        g.ldb = (tb ? g.k : g.n) + 11;
        g.ldd = g.n + 7;
        Check(r, g, {.seed = ++seed});
        g.lda = (ta ? g.m : g.k) + 8;  // 16-byte-aligned rows for the half types
        g.ldb = (tb ? g.k : g.n) + 8 - (tb ? g.k : g.n) % 8;
        g.ldd = g.n + 8 - g.n % 8;
        Check(r, g, {.seed = ++seed});
      }
}

TEST(GemmGpu, BatchedStrided) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  uint32_t seed = 40;
  for (const TypeCase& tc : kTypes)
    for (int ta = 0; ta < 2; ++ta) {
      GemmDesc g = Desc(tc, 37, 45, 29, ta, !ta);
      g.batch = 5;
      g.stride_a = g.m * g.k + 3;  // gaps between the batch matrices
      g.stride_b = g.k * g.n + 16;
      g.ldd = g.n + 3;
      g.stride_d = g.m * g.ldd + 9;
      Check(r, g, {.seed = ++seed});
      g.stride_d = 0;  // dense default
      g.ldd = 0;
      Check(r, g, {.seed = ++seed});
    }
}

TEST(GemmGpu, BatchedBroadcastAOrB) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  uint32_t seed = 50;
  for (const TypeCase& tc : kTypes)
    for (int which = 0; which < 2; ++which) {
      GemmDesc g = Desc(tc, 33, 70, 41, which == 0, false);
      g.batch = 4;
      g.stride_a = which == 0 ? 0 : g.m * g.k;  // 0: one A for every batch
      g.stride_b = which == 1 ? 0 : g.k * g.n;
      Check(r, g, {.seed = ++seed});
    }
}

TEST(GemmGpu, BetaAccumulatesIntoD) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  uint32_t seed = 60;
  for (const TypeCase& tc : kTypes) {
    GemmDesc g = Desc(tc, 67, 129, 33, false, true);
    g.beta = 1.f;
    Check(r, g, {.seed = ++seed});
    g.alpha = 0.5f;
    g.beta = -0.75f;
    g.ldd = 136;
    Check(r, g, {.seed = ++seed});
    g.batch = 3;  // accumulation into strided batches
    g.stride_a = g.m * g.k;
    g.stride_b = g.n * g.k;
    Check(r, g, {.seed = ++seed});
  }
}

TEST(GemmGpu, Epilogues) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  uint32_t seed = 70;
  for (GemmEpilogue e : {GemmEpilogue::kBias, GemmEpilogue::kRelu, GemmEpilogue::kBiasRelu, GemmEpilogue::kGelu,
                         GemmEpilogue::kBiasGelu})
    for (const TypeCase& tc : kTypes) {
      GemmDesc g = Desc(tc, 67, 129, 33);
      g.epilogue = e;
      Check(r, g, {.seed = ++seed});
      g.trans_b = true;  // the Linear layer's shapes: x [rows, in] · Wᵀ with W [out, in]
      g.m = 256;
      g.n = 96;
      g.k = 64;
      Check(r, g, {.seed = ++seed});
      g.beta = 1.f;  // bias and activation apply after beta·C
      Check(r, g, {.seed = ++seed});
    }
}

// gemm.h says cuBLASLt's GELU is the tanh form: in fp32 the tanh-form reference must fit far better than the erf
// form (they differ by up to ~5e-4 absolute around |v| ~ 2).
TEST(GemmGpu, GeluIsTheTanhForm) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  GemmDesc g = Desc(kTypes[0], 128, 160, 96);
  g.epilogue = GemmEpilogue::kBiasGelu;
  Outcome tanh_form, erf_form;
  RunAndCheck(r, g, {.seed = 75}, &tanh_form);
  RunAndCheck(r, g, {.seed = 75, .gelu_erf = true}, &erf_form);
  std::printf("[   INFO   ] fp32 bias+gelu: rel error %.3g against the tanh form, %.3g against the erf form\n",
              tanh_form.rel_err, erf_form.rel_err);
  EXPECT_LT(tanh_form.rel_err, 1e-5);
  EXPECT_LT(tanh_form.rel_err * 10, erf_form.rel_err);
}

TEST(GemmGpu, BiasAt16ByteAlignment) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  uint32_t seed = 80;
  for (const TypeCase& tc : kTypes) {
    GemmDesc g = Desc(tc, 128, 96, 64, false, true);
    g.epilogue = GemmEpilogue::kBiasGelu;
    Check(r, g, {.seed = ++seed, .bias_offset_bytes = 0});
    Check(r, g, {.seed = ++seed, .bias_offset_bytes = 16});  // a second plan, chosen for a 16-byte-aligned bias
    Check(r, g, {.seed = ++seed, .bias_offset_bytes = 48});
  }
}

TEST(GemmGpu, BiasGradOfLinearWeightGradient) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  uint32_t seed = 90;
  const int64_t rows = 200, in = 67, out = 129;
  for (const TypeCase& tc : kTypes) {
    // W [in, out] (MatMul): dW = Xᵀ·dY, A = X [rows, in] transposed, B = dY [rows, out]; db = column sums of dY.
    GemmDesc g = Desc(tc, in, out, rows, true, false);
    g.epilogue = GemmEpilogue::kBiasGrad;
    Check(r, g, {.seed = ++seed});
    // W [out, in] (Gemm transB=1 / PyTorch Linear): dW = dYᵀ·X, A = dY [rows, out] transposed, B = X [rows, in];
    // db = row sums of op(A) = column sums of dY.
    GemmDesc h = Desc(tc, out, in, rows, true, false);
    h.epilogue = GemmEpilogue::kBiasGradA;
    Check(r, h, {.seed = ++seed});
    // Aligned sizes with a longer reduction, bias gradient at a 16-byte offset.
    GemmDesc big = Desc(tc, 256, 384, 1024, true, false);
    big.epilogue = GemmEpilogue::kBiasGrad;
    Check(r, big, {.seed = ++seed, .bias_offset_bytes = 16});
    big.m = 384;
    big.n = 256;
    big.epilogue = GemmEpilogue::kBiasGradA;
    Check(r, big, {.seed = ++seed, .bias_offset_bytes = 16});
  }
}

// Every transpose combination of the bias-gradient epilogues. cuBLASLt 13 offers BGRADA only with its A not
// transposed and BGRADB only with its B transposed, i.e. kBiasGrad needs trans_b == false and kBiasGradA needs
// trans_a == true (the Linear weight-gradient layouts; gemm.h). Those must run and be right; the others must be
// refused with std::runtime_error naming the desc (or, should a later cuBLASLt offer them, be right).
TEST(GemmGpu, BiasGradTransposesRightOrRefused) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  uint32_t seed = 100;
  for (const TypeCase& tc : kTypes)
    for (GemmEpilogue e : {GemmEpilogue::kBiasGrad, GemmEpilogue::kBiasGradA})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          GemmDesc g = Desc(tc, 96, 160, 128, ta, tb);
          g.epilogue = e;
          const bool documented = e == GemmEpilogue::kBiasGrad ? !tb : ta;
          if (documented) {
            Check(r, g, {.seed = ++seed});
            continue;
          }
          try {
            Check(r, g, {.seed = ++seed});
          } catch (const std::runtime_error& err) {
            const std::string msg = err.what();
            EXPECT_NE(msg.find("GemmDesc{"), std::string::npos) << msg;
            EXPECT_NE(msg.find("no algorithm"), std::string::npos) << msg;
          }
        }
}

TEST(GemmGpu, DeterministicIsBitwiseRepeatable) {
  SKIP_WITHOUT_GPU();
  uint32_t seed = 110;
  for (const TypeCase& tc : kTypes) {
    // Small m x n with a long k: the shape where split-K would be chosen.
    GemmDesc g = Desc(tc, 64, 96, 8192, true, false);
    g.deterministic = true;
    GemmRunner r1, r2;
    Outcome o1, o2, o3;
    Check(r1, g, {.seed = seed}, &o1);
    Check(r1, g, {.seed = seed}, &o2);
    Check(r2, g, {.seed = seed}, &o3);  // a fresh runner chooses and runs the same way
    EXPECT_EQ(o1.d_bytes, o2.d_bytes) << tc.name;
    EXPECT_EQ(o1.d_bytes, o3.d_bytes) << tc.name;
    g.epilogue = GemmEpilogue::kBiasGrad;
    Check(r1, g, {.seed = seed + 1}, &o1);
    Check(r2, g, {.seed = seed + 1}, &o2);
    EXPECT_EQ(o1.d_bytes, o2.d_bytes) << tc.name;
    EXPECT_EQ(o1.grad_bytes, o2.grad_bytes) << tc.name;
    ++seed;
  }
}

TEST(GemmGpu, CacheReusesThePlan) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  GemmDesc g = Desc(kTypes[2], 67, 129, 33, false, true);
  g.epilogue = GemmEpilogue::kBias;
  Outcome o1, o2;
  Check(r, g, {.seed = 120}, &o1);
  const int64_t after_first = r.HeuristicQueries();
  EXPECT_EQ(after_first, 1);
  Check(r, g, {.seed = 120}, &o2);  // same desc, same alignment: no new query, same bits
  EXPECT_EQ(r.HeuristicQueries(), after_first);
  EXPECT_EQ(o1.d_bytes, o2.d_bytes);
  GemmDesc h = g;  // the same problem written with explicit dense leading dims shares the plan
  h.lda = g.k;
  h.ldb = g.k;
  h.ldd = g.n;
  Check(r, h, {.seed = 121});
  EXPECT_EQ(r.HeuristicQueries(), after_first);
  h.alpha = 2.f;  // every field is in the key
  Check(r, h, {.seed = 122});
  EXPECT_EQ(r.HeuristicQueries(), after_first + 1);
  h.m = 68;
  Check(r, h, {.seed = 123});
  EXPECT_EQ(r.HeuristicQueries(), after_first + 2);
}

TEST(GemmGpu, SmallOrNoWorkspace) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  uint32_t seed = 130;
  for (const TypeCase& tc : kTypes) {
    Check(r, Desc(tc, 64, 96, 8192, true, false), {.seed = ++seed, .workspace_bytes = 0});
    Check(r, Desc(tc, 512, 512, 512), {.seed = ++seed, .workspace_bytes = 1 << 20});
  }
}

TEST(GemmGpu, MalformedDescThrowsInvalidArgument) {
  SKIP_WITHOUT_GPU();
  GemmRunner r;
  DevBuf buf(1 << 16);
  ASSERT_TRUE(buf.p);
  GemmDesc g = Desc(kTypes[0], 8, 8, 8);
  g.lda = 4;  // below k
  EXPECT_THROW(r.Run(g, buf.p, buf.p, buf.p, nullptr, nullptr, 0, nullptr), std::invalid_argument);
  g = Desc(kTypes[0], 8, 8, 0);
  EXPECT_THROW(r.Run(g, buf.p, buf.p, buf.p, nullptr, nullptr, 0, nullptr), std::invalid_argument);
  g = Desc(kTypes[0], 8, 8, 8);
  g.epilogue = GemmEpilogue::kBias;  // no bias pointer
  EXPECT_THROW(r.Run(g, buf.p, buf.p, buf.p, nullptr, nullptr, 0, nullptr), std::invalid_argument);
  g.epilogue = GemmEpilogue::kBiasGrad;
  g.batch = 2;  // bias gradients are for one matrix
  EXPECT_THROW(r.Run(g, buf.p, buf.p, buf.p, nullptr, nullptr, 0, nullptr, buf.p), std::invalid_argument);
  EXPECT_EQ(r.HeuristicQueries(), 0);
}

}  // namespace
}  // namespace ot
