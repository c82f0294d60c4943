// cuBLASLt GEMM (see gemm.h for the row-major mapping, the epilogues and the cache).
#include "cuda_ops/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <bit>
#include <compare>
#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace ot::cuda {
namespace {

const char* TypeName(GemmType t) {
  switch (t) {
    case GemmType::kF32:
      return "f32";
    case GemmType::kF16:
      return "f16";
    case GemmType::kBF16:
      return "bf16";
  }
  return "?";
}

const char* EpilogueName(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone:
      return "none";
    case GemmEpilogue::kBias:
      return "bias";
    case GemmEpilogue::kRelu:
      return "relu";
    case GemmEpilogue::kBiasRelu:
      return "bias_relu";
    case GemmEpilogue::kGelu:
      return "gelu";
    case GemmEpilogue::kBiasGelu:
      return "bias_gelu";
    case GemmEpilogue::kBiasGrad:
      return "bias_grad";
    case GemmEpilogue::kBiasGradA:
      return "bias_grad_a";
  }
  return "?";
}

cudaDataType_t DataType(GemmType t) {
  switch (t) {
    case GemmType::kF32:
      return CUDA_R_32F;
    case GemmType::kF16:
      return CUDA_R_16F;
    case GemmType::kBF16:
      return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

size_t ElementBytes(GemmType t) { return t == GemmType::kF32 ? 4 : 2; }

bool HasBias(GemmEpilogue e) {
  return e == GemmEpilogue::kBias || e == GemmEpilogue::kBiasRelu || e == GemmEpilogue::kBiasGelu;
}
bool IsBiasGrad(GemmEpilogue e) { return e == GemmEpilogue::kBiasGrad || e == GemmEpilogue::kBiasGradA; }

// Our epilogue in cuBLASLt's (column-major, operands swapped) terms. Our B is cuBLASLt's A, so the column sums of
// op(B) (kBiasGrad) are its BGRADA, and the row sums of op(A) (kBiasGradA) its BGRADB.
cublasLtEpilogue_t LtEpilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kRelu:
      return CUBLASLT_EPILOGUE_RELU;
    case GemmEpilogue::kBiasRelu:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::kGelu:
      return CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::kBiasGelu:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::kBiasGrad:
      return CUBLASLT_EPILOGUE_BGRADA;
    case GemmEpilogue::kBiasGradA:
      return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Largest power of two (<= 256) dividing the address; 256 for null.
uint32_t Alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  if (v == 0) return 256;
  const uintptr_t low = v & (~v + 1);
  return static_cast<uint32_t>(low >= 256 ? 256 : low);
}

// The desc with its defaults filled in (leading dimensions, D's batch stride), so equal problems share a key.
GemmDesc Normalized(const GemmDesc& g) {
  GemmDesc r = g;
  if (r.lda == 0) r.lda = g.trans_a ? g.m : g.k;
  if (r.ldb == 0) r.ldb = g.trans_b ? g.k : g.n;
  if (r.ldd == 0) r.ldd = g.n;
  if (r.batch == 1)
    r.stride_a = r.stride_b = r.stride_d = 0;
  else if (r.stride_d == 0)
    r.stride_d = g.m * r.ldd;
  if (r.type != GemmType::kF32) r.tf32 = false;
  return r;
}

void Validate(const GemmDesc& g) {
  auto bad = [&](const char* why) {
    throw std::invalid_argument(std::string("ot::cuda::Gemm: ") + why + " in " + ToString(g));
  };
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) bad("m, n and k must be positive");
  if (g.batch <= 0 || g.batch > INT32_MAX) bad("batch must be in [1, 2^31)");
  if (g.lda < (g.trans_a ? g.m : g.k)) bad("lda is less than the stored row length");
  if (g.ldb < (g.trans_b ? g.k : g.n)) bad("ldb is less than the stored row length");
  if (g.ldd < g.n) bad("ldd is less than n");
  if (g.stride_a < 0 || g.stride_b < 0 || g.stride_d < 0) bad("negative batch stride");
  if (g.batch > 1 && g.stride_d < g.m * g.ldd) bad("stride_d makes batch outputs overlap");
  if (IsBiasGrad(g.epilogue) && g.batch != 1) bad("the bias-gradient epilogues need batch == 1");
}

[[noreturn]] void Fail(const char* what, cublasStatus_t s, const std::string& desc = "") {
  std::string msg = std::string("ot::cuda::Gemm: ") + what + " failed: " + cublasLtGetStatusName(s);
  if (!desc.empty()) msg += " for " + desc;
  throw std::runtime_error(msg);
}

void Check(cublasStatus_t s, const char* what, const GemmDesc& g) {
  if (s != CUBLAS_STATUS_SUCCESS) Fail(what, s, ToString(g));
}

struct Key {
  int type, tf32, trans_a, trans_b, epilogue, deterministic;
  int64_t m, n, k, lda, ldb, ldd, batch, stride_a, stride_b, stride_d;
  uint32_t alpha_bits, beta_bits;
  uint64_t workspace_bytes;
  uint32_t align_a, align_b, align_d, align_bias;
  auto operator<=>(const Key&) const = default;
};

Key MakeKey(const GemmDesc& g, size_t workspace_bytes, uint32_t aa, uint32_t ab, uint32_t ad, uint32_t abias) {
  return Key{static_cast<int>(g.type),
             g.tf32,
             g.trans_a,
             g.trans_b,
             static_cast<int>(g.epilogue),
             g.deterministic,
             g.m,
             g.n,
             g.k,
             g.lda,
             g.ldb,
             g.ldd,
             g.batch,
             g.stride_a,
             g.stride_b,
             g.stride_d,
             std::bit_cast<uint32_t>(g.alpha),
             std::bit_cast<uint32_t>(g.beta),
             workspace_bytes,
             aa,
             ab,
             ad,
             abias};
}

}  // namespace

std::string ToString(const GemmDesc& g) {
  std::ostringstream s;
  s << "GemmDesc{" << TypeName(g.type) << (g.tf32 ? " tf32" : "") << " m=" << g.m << " n=" << g.n << " k=" << g.k
    << " trans_a=" << g.trans_a << " trans_b=" << g.trans_b << " lda=" << g.lda << " ldb=" << g.ldb << " ldd=" << g.ldd
    << " batch=" << g.batch;
  if (g.batch != 1) s << " stride_a=" << g.stride_a << " stride_b=" << g.stride_b << " stride_d=" << g.stride_d;
  s << " alpha=" << g.alpha << " beta=" << g.beta << " epilogue=" << EpilogueName(g.epilogue)
    << (g.deterministic ? " deterministic" : "") << "}";
  return s.str();
}

// A cached plan: cuBLASLt's descriptor objects for one key and the algorithm its heuristic chose.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;  // cuBLASLt's A (our B), B (our A), C = D
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  ~Plan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

struct GemmRunner::Impl {
  cublasLtHandle_t handle = nullptr;
  std::map<Key, std::unique_ptr<Plan>> cache;
  int64_t queries = 0;

  std::unique_ptr<Plan> MakePlan(const GemmDesc& g, const void* bias_ptr, size_t workspace_bytes, uint32_t aa,
                                 uint32_t ab, uint32_t ad);
};

namespace {

cublasLtMatrixLayout_t Layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride,
                              const GemmDesc& g) {
  cublasLtMatrixLayout_t l = nullptr;
  Check(cublasLtMatrixLayoutCreate(&l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
        "cublasLtMatrixLayoutCreate", g);
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    cublasStatus_t s = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
    if (s != CUBLAS_STATUS_SUCCESS) {
      cublasLtMatrixLayoutDestroy(l);
      Fail("cublasLtMatrixLayoutSetAttribute", s, ToString(g));
    }
  }
  return l;
}

}  // namespace

std::unique_ptr<Plan> GemmRunner::Impl::MakePlan(const GemmDesc& g, const void* bias_ptr, size_t workspace_bytes,
                                                 uint32_t aa, uint32_t ab, uint32_t ad) {
  auto plan = std::make_unique<Plan>();
  const cudaDataType_t dt = DataType(g.type);
  const cublasComputeType_t compute =
      g.type == GemmType::kF32 && g.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  Check(cublasLtMatmulDescCreate(&plan->op, compute, CUDA_R_32F), "cublasLtMatmulDescCreate", g);

  // Swapped operands (gemm.h): cuBLASLt's A is our B, its B our A, its (rows, cols) of D are our (n, m).
  const cublasOperation_t ta = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  Check(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "set TRANSA", g);
  Check(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "set TRANSB", g);
  const cublasLtEpilogue_t epi = LtEpilogue(g.epilogue);
  Check(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "set EPILOGUE", g);
  if (HasBias(g.epilogue) || IsBiasGrad(g.epilogue)) {
    // The bias (gradient) vector has the output's type (fp32 for kF32). Its pointer is set here for the heuristic,
    // which reads its alignment, and again before every launch.
    const int32_t bt = static_cast<int32_t>(dt);
    Check(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)),
          "set BIAS_DATA_TYPE", g);
    Check(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)),
          "set BIAS_POINTER", g);
  }

  // Column-major shapes as stored: our B is (trans_b ? [n,k] : [k,n]) row-major = (trans_b ? k x n : n x k) col-major.
  plan->la = Layout(dt, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb, g.batch, g.stride_b, g);
  plan->lb = Layout(dt, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda, g.batch, g.stride_a, g);
  plan->ld = Layout(dt, g.n, g.m, g.ldd, g.batch, g.stride_d, g);

  cublasLtMatmulPreference_t pref = nullptr;
  Check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", g);
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  const uint64_t ws = workspace_bytes;
  Check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
        "set MAX_WORKSPACE_BYTES", g);
  if (g.deterministic) {
    const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE;
    Check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof(mask)),
          "set REDUCTION_SCHEME_MASK", g);
  }
  // Our A is cuBLASLt's B and vice versa; C and D are the D buffer.
  const uint32_t a_lt = ab, b_lt = aa;
  Check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a_lt, sizeof(a_lt)),
        "set MIN_ALIGNMENT_A", g);
  Check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b_lt, sizeof(b_lt)),
        "set MIN_ALIGNMENT_B", g);
  Check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof(ad)),
        "set MIN_ALIGNMENT_C", g);
  Check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof(ad)),
        "set MIN_ALIGNMENT_D", g);
  // The bias alignment reaches the heuristic through the bias pointer itself (set above); it is in the key too.

  constexpr int kRequested = 8;
  cublasLtMatmulHeuristicResult_t results[kRequested] = {};
  int returned = 0;
  ++queries;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(handle, plan->op, plan->la, plan->lb, plan->ld, plan->ld,
                                                           pref, kRequested, results, &returned);
  if (hs != CUBLAS_STATUS_SUCCESS && hs != CUBLAS_STATUS_NOT_SUPPORTED)
    Fail("cublasLtMatmulAlgoGetHeuristic", hs, ToString(g));
  if (hs == CUBLAS_STATUS_SUCCESS) {
    for (int i = 0; i < returned; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS || results[i].workspaceSize > workspace_bytes) continue;
      if (g.deterministic) {
        uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
        size_t written = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                 sizeof(scheme), &written) != CUBLAS_STATUS_SUCCESS ||
            scheme != CUBLASLT_REDUCTION_SCHEME_NONE)
          continue;
      }
      plan->algo = results[i].algo;
      plan->workspace = results[i].workspaceSize;
      return plan;
    }
  }
  throw std::runtime_error("ot::cuda::Gemm: cuBLASLt has no algorithm for " + ToString(g) +
                           " (heuristic: " + cublasLtGetStatusName(hs) + ", " + std::to_string(returned) +
                           " returned, workspace " + std::to_string(workspace_bytes) + " bytes)");
}

GemmRunner::GemmRunner() : impl_(std::make_unique<Impl>()) {
  const cublasStatus_t s = cublasLtCreate(&impl_->handle);
  if (s != CUBLAS_STATUS_SUCCESS) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no driver" error
      devices = 0;
    }
    throw std::runtime_error(std::string("ot::cuda::GemmRunner: cublasLtCreate failed: ") + cublasLtGetStatusName(s) +
                             (devices == 0 ? " (no usable CUDA device)" : ""));
  }
}

GemmRunner::~GemmRunner() {
  impl_->cache.clear();  // the plans' objects go before the handle
  if (impl_->handle) cublasLtDestroy(impl_->handle);
}

size_t GemmRunner::WorkspaceBytes() { return size_t{32} << 20; }

int64_t GemmRunner::HeuristicQueries() const { return impl_->queries; }

void GemmRunner::Run(const GemmDesc& desc, const void* a, const void* b, void* d, const void* bias, void* workspace,
                     size_t workspace_bytes, void* stream, void* bias_grad) {
  const GemmDesc g = Normalized(desc);
  Validate(g);
  if (!a || !b || !d) throw std::invalid_argument("ot::cuda::Gemm: null a, b or d for " + ToString(g));
  if (HasBias(g.epilogue) && !bias)
    throw std::invalid_argument("ot::cuda::Gemm: the epilogue needs a bias for " + ToString(g));
  if (IsBiasGrad(g.epilogue) && !bias_grad)
    throw std::invalid_argument("ot::cuda::Gemm: the epilogue needs bias_grad for " + ToString(g));
  if (!workspace) workspace_bytes = 0;
  const void* vec = IsBiasGrad(g.epilogue) ? bias_grad : HasBias(g.epilogue) ? bias : nullptr;

  const uint32_t aa = Alignment(a), ab = Alignment(b), ad = Alignment(d), abias = Alignment(vec);
  const Key key = MakeKey(g, workspace_bytes, aa, ab, ad, abias);
  auto it = impl_->cache.find(key);
  if (it == impl_->cache.end())
    it = impl_->cache.emplace(key, impl_->MakePlan(g, vec, workspace_bytes, aa, ab, ad)).first;
  Plan& p = *it->second;
  if (vec)
    Check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof(vec)),
          "set BIAS_POINTER", g);
  const float alpha = g.alpha, beta = g.beta;
  // cuBLASLt's A is our b, its B our a; C and D are d.
  Check(cublasLtMatmul(impl_->handle, p.op, &alpha, b, p.la, a, p.lb, &beta, d, p.ld, d, p.ld, &p.algo, workspace,
                       p.workspace, static_cast<cudaStream_t>(stream)),
        "cublasLtMatmul", g);
}

}  // namespace ot::cuda
