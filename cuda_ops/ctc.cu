// The CTC loss on the GPU: see ctc.h. The formulas follow cpu_ops/ctc.cc line by line (the same Lse forms, the same
// -inf tests, the same order of the reduction over samples) so that the results agree with the CPU to a few ulps of
// double before the final rounding.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "cuda_ops/ctc.h"
#include "cuda_ops/launch_util.cuh"

namespace ot::cuda {

namespace {

using detail::Align256;
using detail::BlockSum;
using detail::CheckLaunch;
using detail::Require;

constexpr int kNormThreads = 256;  // 8 warps, one frame each
constexpr int kGradThreads = 256;  // the gradient's block (a multiple of 32: BlockSum)
constexpr int64_t kMaxGrid = int64_t{1} << 20;

struct CtcArgs {
  int64_t frames, batch, classes, max_labels, states;  // states: 2 * max_labels + 1, the row stride of alpha / beta
  int64_t blank;
  bool batch_major, zero_infinity, mean;
};

__device__ __forceinline__ double NegInf() { return -CUDART_INF; }
__device__ __forceinline__ double QuietNan() { return __longlong_as_double(0x7ff8000000000000LL); }

// cpu_ops/ctc.cc's Lse forms.
__device__ __forceinline__ double Lse2(double a, double b) {
  const double m = a > b ? a : b;
  if (m == NegInf()) return NegInf();
  return m + log(exp(a - m) + exp(b - m));
}
__device__ __forceinline__ double Lse3(double a, double b, double c) {
  double m = a > b ? a : b;
  m = m > c ? m : c;
  if (m == NegInf()) return NegInf();
  return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

// Offset of frame t of sample b's row of classes.
__device__ __forceinline__ int64_t RowOffset(const CtcArgs& a, int64_t b, int64_t t) {
  return (a.batch_major ? b * a.frames + t : t * a.batch + b) * a.classes;
}

// 1. lz[b * frames + t] = the log-softmax normalizer of frame t of sample b: one warp per frame, lanes over the
// classes in strides of 32, the max exact, the sum of exp(x - max) in double by a fixed shuffle tree.
template <typename T>
__global__ void CtcNormKernel(const T* __restrict__ logits, double* __restrict__ lz, CtcArgs a) {
  const int64_t rows = a.batch * a.frames;
  const unsigned lane = threadIdx.x & 31u;
  const int64_t warps_per_grid = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5); w < rows;
       w += warps_per_grid) {
    const int64_t b = w / a.frames, t = w % a.frames;
    const T* row = logits + RowOffset(a, b, t);
    double m = NegInf();
    for (int64_t c = lane; c < a.classes; c += 32) {
      const double v = static_cast<double>(row[c]);
      m = m < v ? v : m;  // std::max(m, v): a NaN never replaces m
    }
    for (int o = 16; o > 0; o >>= 1) {
      const double v = __shfl_xor_sync(0xffffffffu, m, o);
      m = m < v ? v : m;
    }
    double s = 0.0;
    for (int64_t c = lane; c < a.classes; c += 32) s += exp(static_cast<double>(row[c]) - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) lz[w] = m + log(s);
  }
}

// One sample's view: its lengths, labels and log-probabilities.
template <typename T>
struct SampleView {
  const CtcArgs& a;
  const T* logits;
  const int64_t* lab;  // the sample's row of labels
  const double* lz;    // the sample's normalizers [frames]
  int64_t b;
  __device__ int64_t Ext(int64_t q) const { return (q & 1) ? lab[(q - 1) >> 1] : a.blank; }
  __device__ double Lp(int64_t t, int64_t cls) const {
    return static_cast<double>(logits[RowOffset(a, b, t) + cls]) - lz[t];
  }
  __device__ double LpState(int64_t t, int64_t q) const { return Lp(t, Ext(q)); }
  // State q may be reached from q - 2: a label unlike the one before it.
  __device__ bool Skip(int64_t q) const { return q >= 2 && (q & 1) && lab[(q - 1) >> 1] != lab[(q - 3) >> 1]; }
};

// Reads and checks sample b's lengths and labels (all threads; uniform result). Returns false for an invalid sample
// (and raises *bad).
__device__ bool LoadSample(const CtcArgs& a, const int64_t* labels, const int64_t* logit_lens,
                           const int64_t* label_lens, int64_t b, int* bad, int64_t* sh_len /* [2] */, int* sh_invalid) {
  if (threadIdx.x == 0) {
    const int64_t tl = logit_lens[b], ll = label_lens[b];
    sh_len[0] = tl;
    sh_len[1] = ll;
    *sh_invalid = (tl < 0 || tl > a.frames || ll < 0 || ll > a.max_labels) ? 1 : 0;
  }
  __syncthreads();
  if (!*sh_invalid) {
    const int64_t ll = sh_len[1];
    for (int64_t i = threadIdx.x; i < ll; i += blockDim.x) {
      const int64_t l = labels[b * a.max_labels + i];
      if (l < 0 || l >= a.classes || l == a.blank) atomicOr(sh_invalid, 1);
    }
  }
  __syncthreads();
  const bool ok = *sh_invalid == 0;
  if (!ok && threadIdx.x == 0 && bad) *bad = 1;
  __syncthreads();  // every thread has read *sh_invalid
  return ok;
}

// alpha over frames [0, tb) of the sample's sb states, rows from `row(t)`: full storage (row t at base + t * states)
// or two rows alternating (base + (t & 1) * states). Returns the sample's nll (all threads), cpu Sample::Nll.
template <typename T>
__device__ double AlphaPass(const SampleView<T>& v, double* base, bool full, int64_t tb, int64_t sb, double* sh_nll) {
  const int64_t S = v.a.states;
  auto row = [&](int64_t t) { return base + (full ? t : (t & 1)) * S; };
  if (tb > 0) {
    double* cur = row(0);
    for (int64_t q = threadIdx.x; q < sb; q += blockDim.x) cur[q] = q <= 1 ? v.LpState(0, q) : NegInf();
    __syncthreads();
    for (int64_t t = 1; t < tb; ++t) {
      const double* prev = row(t - 1);
      cur = row(t);
      for (int64_t q = threadIdx.x; q < sb; q += blockDim.x) {
        const double s = Lse3(prev[q], q >= 1 ? prev[q - 1] : NegInf(), v.Skip(q) ? prev[q - 2] : NegInf());
        cur[q] = s == NegInf() ? NegInf() : s + v.LpState(t, q);
      }
      __syncthreads();
    }
  }
  if (threadIdx.x == 0) {
    double nll;
    if (tb == 0) {
      nll = sb == 1 ? 0.0 : CUDART_INF;
    } else {
      const double* last = row(tb - 1);
      nll = -(sb == 1 ? last[0] : Lse2(last[sb - 1], last[sb - 2]));
    }
    *sh_nll = nll;
  }
  __syncthreads();
  const double nll = *sh_nll;
  __syncthreads();
  return nll;
}

// 2a. Per-sample nll (forward): one block per sample, alpha in two alternating rows.
template <typename T>
__global__ void CtcNllKernel(const T* __restrict__ logits, const int64_t* __restrict__ labels,
                             const int64_t* __restrict__ logit_lens, const int64_t* __restrict__ label_lens,
                             const double* __restrict__ lz, double* __restrict__ alpha2, double* __restrict__ nll_out,
                             int* bad, CtcArgs a) {
  __shared__ int64_t sh_len[2];
  __shared__ int sh_invalid;
  __shared__ double sh_nll;
  const int64_t b = blockIdx.x;
  if (!LoadSample(a, labels, logit_lens, label_lens, b, bad, sh_len, &sh_invalid)) {
    if (threadIdx.x == 0) nll_out[b] = QuietNan();
    return;
  }
  const int64_t tb = sh_len[0], sb = 2 * sh_len[1] + 1;
  const SampleView<T> v{a, logits, labels + b * a.max_labels, lz + b * a.frames, b};
  const double nll = AlphaPass(v, alpha2 + b * 2 * a.states, false, tb, sb, &sh_nll);
  if (threadIdx.x == 0) nll_out[b] = isinf(nll) && a.zero_infinity ? 0.0 : nll;
}

// 3. loss = sum over samples in order of w_b * nll_b (executor/kernels/ctc.cc's loop).
template <typename T>
__global__ void CtcReduceKernel(const double* __restrict__ nll, const int64_t* __restrict__ label_lens,
                                T* __restrict__ loss, CtcArgs a) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  double s = 0.0;
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t ll = label_lens[b];
    const double w =
        a.mean ? 1.0 / static_cast<double>(ll > 1 ? ll : 1) / static_cast<double>(a.batch > 1 ? a.batch : 1) : 1.0;
    s += w * nll[b];
  }
  *loss = static_cast<T>(s);
}

template <typename T>
__device__ void FillRows(const CtcArgs& a, T* dlogits, int64_t b, int64_t t0, int64_t t1, T value) {
  const int64_t n = (t1 - t0) * a.classes;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t t = t0 + i / a.classes, c = i % a.classes;
    dlogits[RowOffset(a, b, t) + c] = value;
  }
}

// 2b. Per-sample gradient: one block of kGradThreads per sample. alpha in full, beta in two alternating rows,
// next[q] (odd q: the next state with the same label, -1 at the last) and first[q] (odd q: no earlier state has its
// label) in the int table.
template <typename T>
__global__ void __launch_bounds__(kGradThreads)
    CtcGradKernel(const T* __restrict__ dloss, const T* __restrict__ logits, const int64_t* __restrict__ labels,
                  const int64_t* __restrict__ logit_lens, const int64_t* __restrict__ label_lens,
                  const double* __restrict__ lz, double* __restrict__ alpha, double* __restrict__ beta2,
                  int* __restrict__ table, T* __restrict__ dlogits, int* bad, CtcArgs a) {
  __shared__ int64_t sh_len[2];
  __shared__ int sh_invalid;
  __shared__ double sh_nll;
  __shared__ double sh_sum[33];
  const int64_t b = blockIdx.x;
  if (!LoadSample(a, labels, logit_lens, label_lens, b, bad, sh_len, &sh_invalid)) {
    FillRows(a, dlogits, b, 0, a.frames, static_cast<T>(QuietNan()));
    return;
  }
  const int64_t tb = sh_len[0], lb = sh_len[1], sb = 2 * lb + 1, S = a.states;
  // d loss / d nll_b, as executor/kernels/ctc.cc's Weights() times dLoss.
  double w = a.mean ? 1.0 / static_cast<double>(lb > 1 ? lb : 1) / static_cast<double>(a.batch > 1 ? a.batch : 1) : 1.0;
  w *= static_cast<double>(*dloss);
  FillRows(a, dlogits, b, tb, a.frames, static_cast<T>(0));  // frames past the sample's length

  const int64_t* lab = labels + b * a.max_labels;
  const SampleView<T> v{a, logits, lab, lz + b * a.frames, b};
  double* al = alpha + b * a.frames * S;
  const double nll = AlphaPass(v, al, true, tb, sb, &sh_nll);
  if (isinf(nll)) {
    // zero_infinity: no gradient; otherwise the loss is already infinite and the gradient is not a number.
    FillRows(a, dlogits, b, 0, tb, static_cast<T>(a.zero_infinity ? 0.0 : QuietNan()));
    return;
  }

  int* next = table + b * 2 * S;
  int* first = next + S;
  for (int64_t i = threadIdx.x; i < lb; i += blockDim.x) {
    const int64_t l = lab[i];
    int nx = -1, fi = 1;
    for (int64_t j = i + 1; j < lb; ++j)
      if (lab[j] == l) {
        nx = static_cast<int>(2 * j + 1);
        break;
      }
    for (int64_t j = 0; j < i; ++j)
      if (lab[j] == l) {
        fi = 0;
        break;
      }
    next[2 * i + 1] = nx;
    first[2 * i + 1] = fi;
  }
  __syncthreads();

  double* be = beta2 + b * 2 * S;
  for (int64_t t = tb - 1; t >= 0; --t) {
    double* cur = be + (t & 1) * S;
    const double* nxt = be + ((t + 1) & 1) * S;
    if (t == tb - 1) {
      for (int64_t q = threadIdx.x; q < sb; q += blockDim.x) cur[q] = q >= sb - 2 ? v.LpState(t, q) : NegInf();
    } else {
      for (int64_t q = threadIdx.x; q < sb; q += blockDim.x) {
        const double s =
            Lse3(nxt[q], q + 1 < sb ? nxt[q + 1] : NegInf(), q + 2 < sb && v.Skip(q + 2) ? nxt[q + 2] : NegInf());
        cur[q] = s == NegInf() ? NegInf() : s + v.LpState(t, q);
      }
    }
    __syncthreads();
    const double* ar = al + t * S;
    const int64_t off = RowOffset(a, b, t);
    const T* row = logits + off;
    T* out = dlogits + off;
    const double lzt = v.lz[t];
    // Phase 1: every class's softmax term (gamma = 0: no state emits it).
    for (int64_t c = threadIdx.x; c < a.classes; c += blockDim.x)
      out[c] = static_cast<T>(w * (exp(static_cast<double>(row[c]) - lzt) - 0.0));
    __syncthreads();
    // Phase 2: the emitted classes with their occupancy gamma = sum exp(alpha + beta - lp + nll).
    const double lp_blank = static_cast<double>(row[a.blank]) - lzt;
    double s = 0.0;
    for (int64_t q = 2 * threadIdx.x; q < sb; q += 2 * blockDim.x) s += exp(ar[q] + cur[q] - lp_blank + nll);
    s = BlockSum(s, sh_sum);
    if (threadIdx.x == 0) out[a.blank] = static_cast<T>(w * (exp(lp_blank) - s));
    for (int64_t i = threadIdx.x; i < lb; i += blockDim.x) {
      const int64_t q0 = 2 * i + 1;
      if (!first[q0]) continue;
      const int64_t c = lab[i];
      const double lp = static_cast<double>(row[c]) - lzt;
      double g = 0.0;
      for (int64_t q = q0; q >= 0; q = next[q]) g += exp(ar[q] + cur[q] - lp + nll);
      out[c] = static_cast<T>(w * (exp(lp) - g));
    }
    __syncthreads();  // beta's rows alternate; the next frame overwrites the row read here
  }
}

struct Layout {
  size_t lz = 0, alpha = 0, beta = 0, table = 0, nll = 0, total = 0;
};

// Offsets of the workspace's regions (each 256-byte aligned).
Layout LayoutOf(const CtcDesc& d, bool grad) {
  const size_t S = static_cast<size_t>(2 * d.max_labels + 1), B = static_cast<size_t>(d.batch),
               T = static_cast<size_t>(d.frames);
  Layout l;
  size_t at = 0;
  l.lz = at;
  at += Align256(B * T * sizeof(double));
  if (grad) {
    l.alpha = at;
    at += Align256(B * T * S * sizeof(double));
    l.beta = at;
    at += Align256(B * 2 * S * sizeof(double));
    l.table = at;
    at += Align256(B * 2 * S * sizeof(int));
  } else {
    l.alpha = at;
    at += Align256(B * 2 * S * sizeof(double));
    l.nll = at;
    at += Align256(B * sizeof(double));
  }
  l.total = at;
  return l;
}

CtcArgs ArgsOf(const CtcDesc& d) {
  CtcArgs a{};
  a.frames = d.frames;
  a.batch = d.batch;
  a.classes = d.classes;
  a.max_labels = d.max_labels;
  a.states = 2 * d.max_labels + 1;
  a.blank = d.blank;
  a.batch_major = d.batch_major;
  a.zero_infinity = d.zero_infinity;
  a.mean = d.reduction == CtcReduction::kMean;
  return a;
}

void RunNorm(const CtcDesc& d, const CtcArgs& a, const void* logits, double* lz, cudaStream_t st) {
  const int64_t rows = d.batch * d.frames;
  if (rows == 0) return;
  const int64_t warps = kNormThreads / 32, blocks = (rows + warps - 1) / warps;
  const unsigned grid = static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
  if (d.f64)
    CtcNormKernel<double><<<grid, kNormThreads, 0, st>>>(static_cast<const double*>(logits), lz, a);
  else
    CtcNormKernel<float><<<grid, kNormThreads, 0, st>>>(static_cast<const float*>(logits), lz, a);
}

void RequireWorkspace(const CtcDesc& d, bool grad, void* ws, size_t bytes, const char* what) {
  const size_t need = CtcWorkspaceBytes(d, grad);
  if (bytes < need || (need && !ws))
    throw std::invalid_argument(std::string(what) + ": workspace of " + std::to_string(bytes) + " bytes, " +
                                std::to_string(need) + " needed for " + ToString(d));
}

}  // namespace

std::string ToString(const CtcDesc& d) {
  std::ostringstream s;
  s << "CtcDesc{" << (d.f64 ? "f64" : "f32") << " frames=" << d.frames << " batch=" << d.batch
    << " classes=" << d.classes << " max_labels=" << d.max_labels << " layout=" << (d.batch_major ? "btc" : "tbc")
    << " blank=" << d.blank << " reduction=" << (d.reduction == CtcReduction::kMean ? "mean" : "sum")
    << (d.zero_infinity ? " zero_infinity" : "") << "}";
  return s.str();
}

void ValidateCtc(const CtcDesc& d) {
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument("ot::cuda::Ctc: " + why + " in " + ToString(d));
  };
  if (d.frames < 0 || d.batch < 0 || d.max_labels < 0) bad("negative size");
  if (d.classes < 1) bad("no classes");
  if (d.blank < 0 || d.blank >= d.classes) bad("blank outside [0, classes)");
  constexpr int64_t k31 = int64_t{1} << 31;
  if (d.frames >= k31 || d.batch >= k31 || d.classes >= k31) bad("frames, batch and classes must be below 2^31");
  if (d.max_labels >= (int64_t{1} << 29)) bad("max_labels must be below 2^29");
  // The gradient's full alpha: batch * frames * states doubles must be addressable.
  const double alpha =
      static_cast<double>(d.batch) * static_cast<double>(d.frames) * static_cast<double>(2 * d.max_labels + 1) * 8.0;
  if (alpha > 0x1p60) bad("the alpha table does not fit in memory");
}

size_t CtcWorkspaceBytes(const CtcDesc& d, bool grad) {
  ValidateCtc(d);
  return LayoutOf(d, grad).total;
}

void CtcLossForward(const CtcDesc& d, const void* logits, const int64_t* labels, const int64_t* logit_lens,
                    const int64_t* label_lens, void* loss, double* nll, int* bad, void* workspace,
                    size_t workspace_bytes, void* stream) {
  ValidateCtc(d);
  RequireWorkspace(d, false, workspace, workspace_bytes, "ot::cuda::CtcLossForward");
  Require(loss != nullptr, "ot::cuda::CtcLossForward: null loss");
  if (d.batch > 0)
    Require(logit_lens && label_lens && (labels || d.max_labels == 0) && (logits || d.frames == 0),
            "ot::cuda::CtcLossForward: null input");
  const Layout l = LayoutOf(d, false);
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  double* lz = reinterpret_cast<double*>(ws + l.lz);
  double* alpha2 = reinterpret_cast<double*>(ws + l.alpha);
  double* per = nll ? nll : reinterpret_cast<double*>(ws + l.nll);
  const CtcArgs a = ArgsOf(d);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  RunNorm(d, a, logits, lz, st);
  if (d.batch > 0) {
    // Threads over the states: a warp multiple, at most 256.
    const int64_t s = 2 * d.max_labels + 1;
    const int threads = static_cast<int>(s >= 256 ? 256 : (s + 31) / 32 * 32);
    const unsigned grid = static_cast<unsigned>(d.batch);
    if (d.f64)
      CtcNllKernel<double><<<grid, threads, 0, st>>>(static_cast<const double*>(logits), labels, logit_lens, label_lens,
                                                     lz, alpha2, per, bad, a);
    else
      CtcNllKernel<float><<<grid, threads, 0, st>>>(static_cast<const float*>(logits), labels, logit_lens, label_lens,
                                                    lz, alpha2, per, bad, a);
  }
  if (d.f64)
    CtcReduceKernel<double><<<1, 1, 0, st>>>(per, label_lens, static_cast<double*>(loss), a);
  else
    CtcReduceKernel<float><<<1, 1, 0, st>>>(per, label_lens, static_cast<float*>(loss), a);
  CheckLaunch("CtcLossForward");
}

void CtcLossBackward(const CtcDesc& d, const void* dloss, const void* logits, const int64_t* labels,
                     const int64_t* logit_lens, const int64_t* label_lens, void* dlogits, int* bad, void* workspace,
                     size_t workspace_bytes, void* stream) {
  ValidateCtc(d);
  RequireWorkspace(d, true, workspace, workspace_bytes, "ot::cuda::CtcLossBackward");
  if (d.batch == 0) return;  // dlogits is empty
  // No frames: nothing to write, but the lengths and labels are still checked.
  Require(dloss && (d.frames == 0 || (logits && dlogits)) && logit_lens && label_lens && (labels || d.max_labels == 0),
          "ot::cuda::CtcLossBackward: null pointer");
  Require(d.frames == 0 || dlogits != logits, "ot::cuda::CtcLossBackward: dlogits may not alias logits");
  const Layout l = LayoutOf(d, true);
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  double* lz = reinterpret_cast<double*>(ws + l.lz);
  double* alpha = reinterpret_cast<double*>(ws + l.alpha);
  double* beta2 = reinterpret_cast<double*>(ws + l.beta);
  int* table = reinterpret_cast<int*>(ws + l.table);
  const CtcArgs a = ArgsOf(d);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  RunNorm(d, a, logits, lz, st);
  const unsigned grid = static_cast<unsigned>(d.batch);
  if (d.f64)
    CtcGradKernel<double><<<grid, kGradThreads, 0, st>>>(
        static_cast<const double*>(dloss), static_cast<const double*>(logits), labels, logit_lens, label_lens, lz,
        alpha, beta2, table, static_cast<double*>(dlogits), bad, a);
  else
    CtcGradKernel<float><<<grid, kGradThreads, 0, st>>>(
        static_cast<const float*>(dloss), static_cast<const float*>(logits), labels, logit_lens, label_lens, lz, alpha,
        beta2, table, static_cast<float*>(dlogits), bad, a);
  CheckLaunch("CtcLossBackward");
}

}  // namespace ot::cuda
