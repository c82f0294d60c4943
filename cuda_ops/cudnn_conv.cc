// See cudnn_conv.h. A plan is cuDNN's descriptors for one (desc, pass) plus the algorithm chosen for it; plans live
// in a per-device map (the device's handle lease guards it) keyed by the desc's full text, so a desc seen once
// never queries cuDNN's heuristics again on that device.
#include "cuda_ops/cudnn_conv.h"

#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <sstream>

#include "cuda_ops/cudnn_conv_kernels.h"
#include "cuda_ops/cudnn_util.h"

namespace ot::cuda {

using cudnn_detail::Check;
using cudnn_detail::FilterDesc;
using cudnn_detail::FitsInt;
using cudnn_detail::Lease;
using cudnn_detail::TensorDesc;
using cudnn_detail::Vec;

namespace {

constexpr int kConvFamily = 0;  // Lease slot of this file's per-device cache
std::atomic<int64_t> g_queries{0};

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

int64_t DilatedKernel(int64_t k, int64_t d) { return (k - 1) * d + 1; }

// floor(num / s) + 1 for num >= 0; 0 (no window) for a negative numerator.
int64_t OutSize(int64_t num, int64_t s) { return num < 0 ? 0 : num / s + 1; }

// The desc in cuDNN's terms: 1-D becomes 2-D with a leading spatial dim of 1 (kernel 1, stride 1, no padding).
struct Geometry {
  std::vector<int64_t> in, out, kernel, strides, dilations, pads;  // pads: pad_begin (symmetric in cuDNN)
};
Geometry CudnnGeometry(const ConvDesc& d) {
  Geometry g{d.in_spatial, d.out_spatial, d.kernel, d.strides, d.dilations, d.pad_begin};
  if (g.in.size() == 1) {
    for (auto* v : {&g.in, &g.out, &g.kernel, &g.strides, &g.dilations}) v->insert(v->begin(), 1);
    g.pads.insert(g.pads.begin(), 0);
  }
  return g;
}

std::vector<int> Ints(const std::vector<int64_t>& v) { return std::vector<int>(v.begin(), v.end()); }

const char* AlgoName(ConvPass p, int a) {
  static const char* fwd[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
                              "WINOGRAD",      "WINOGRAD_NONFUSED"};
  static const char* data[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const char* filter[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  switch (p) {
    case ConvPass::kForward:
      return a >= 0 && a < 8 ? fwd[a] : "?";
    case ConvPass::kBackwardData:
      return a >= 0 && a < 6 ? data[a] : "?";
    case ConvPass::kBackwardFilter:
      return a >= 0 && a < 7 ? filter[a] : "?";
  }
  return "?";
}

const char* MathName(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH:
      return "TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH:
      return "FMA_MATH";
  }
  return "?";
}

// cuDNN's algorithms documented as accumulating with atomics (cudnn_ops.h marks them "non-deterministic"); refused
// under `deterministic` even if a perf result called one deterministic.
bool KnownNondeterministic(ConvPass p, int a) {
  return (p == ConvPass::kBackwardData && a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0) ||
         (p == ConvPass::kBackwardFilter &&
          (a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3));
}

struct Plan {
  TensorDesc x, y;
  FilterDesc w;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t of the plan's pass
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
  Plan() { Check(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor"); }
  ~Plan() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
};

struct Cache {
  std::map<std::string, std::unique_ptr<Plan>> plans;  // key: ToString(desc) + pass
};

// Workspace of `algo` for the plan's descriptors (math type already set on p.conv).
cudnnStatus_t WorkspaceOf(cudnnHandle_t h, ConvPass pass, const Plan& p, int algo, size_t* bytes) {
  switch (pass) {
    case ConvPass::kForward:
      return cudnnGetConvolutionForwardWorkspaceSize(h, p.x.d, p.w.d, p.conv, p.y.d,
                                                     static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
    case ConvPass::kBackwardData:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w.d, p.y.d, p.conv, p.x.d,
                                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
    case ConvPass::kBackwardFilter:
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x.d, p.y.d, p.conv, p.w.d,
                                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
  }
  return CUDNN_STATUS_BAD_PARAM;
}

// Candidates of `pass` from the v7 heuristics, best first, as (algo, status, determinism, math type).
struct Candidate {
  int algo;
  cudnnStatus_t status;
  cudnnDeterminism_t determinism;
  cudnnMathType_t math;
};
template <typename Perf>
std::vector<Candidate> ToCandidates(const std::vector<Perf>& perf, int returned) {
  std::vector<Candidate> c;
  for (int i = 0; i < returned; ++i)
    c.push_back({static_cast<int>(perf[i].algo), perf[i].status, perf[i].determinism, perf[i].mathType});
  return c;
}
std::vector<Candidate> Heuristics(cudnnHandle_t h, ConvPass pass, const Plan& p, const std::string& desc) {
  int max = 0, returned = 0;
  ++g_queries;
  switch (pass) {
    case ConvPass::kForward: {
      Check(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max), "cudnnGetConvolutionForwardAlgorithmMaxCount", desc);
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(max > 0 ? max : 1));
      Check(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x.d, p.w.d, p.conv, p.y.d, max, &returned, perf.data()),
            "cudnnGetConvolutionForwardAlgorithm_v7", desc);
      return ToCandidates(perf, returned);
    }
    case ConvPass::kBackwardData: {
      Check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max),
            "cudnnGetConvolutionBackwardDataAlgorithmMaxCount", desc);
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(max > 0 ? max : 1));
      Check(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w.d, p.y.d, p.conv, p.x.d, max, &returned, perf.data()),
            "cudnnGetConvolutionBackwardDataAlgorithm_v7", desc);
      return ToCandidates(perf, returned);
    }
    case ConvPass::kBackwardFilter: {
      Check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max),
            "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", desc);
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(max > 0 ? max : 1));
      Check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x.d, p.y.d, p.conv, p.w.d, max, &returned, perf.data()),
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7", desc);
      return ToCandidates(perf, returned);
    }
  }
  return {};
}

std::unique_ptr<Plan> MakePlan(cudnnHandle_t h, const ConvDesc& d, ConvPass pass) {
  const std::string desc = ToString(d) + " " + ToString(pass);
  const Geometry g = CudnnGeometry(d);
  const cudnnDataType_t dt = cudnn_detail::DataType(d.type);
  auto p = std::make_unique<Plan>();
  std::vector<int64_t> xd{d.n, d.c_in}, yd{d.n, d.c_out}, wd{d.c_out, d.c_in / d.group};
  xd.insert(xd.end(), g.in.begin(), g.in.end());
  yd.insert(yd.end(), g.out.begin(), g.out.end());
  wd.insert(wd.end(), g.kernel.begin(), g.kernel.end());
  p->x.Set(dt, xd, desc);
  p->y.Set(dt, yd, desc);
  p->w.Set(dt, wd, desc);
  const std::vector<int> pads = Ints(g.pads), strides = Ints(g.strides), dils = Ints(g.dilations);
  // Compute type fp32 for every data type: halves accumulate in fp32 (never CUDNN_DATA_HALF "true half").
  Check(cudnnSetConvolutionNdDescriptor(p->conv, static_cast<int>(pads.size()), pads.data(), strides.data(),
                                        dils.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolutionNdDescriptor", desc);
  Check(cudnnSetConvolutionGroupCount(p->conv, static_cast<int>(d.group)), "cudnnSetConvolutionGroupCount", desc);
  const bool exact_f32 = d.type == FloatType::kF32 && !d.tf32;
  const cudnnMathType_t requested =
      d.type != FloatType::kF32 ? CUDNN_TENSOR_OP_MATH : (d.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
  Check(cudnnSetConvolutionMathType(p->conv, requested), "cudnnSetConvolutionMathType", desc);

  // The validation above and cuDNN must agree on Y's dims; a disagreement is a bug here, not a user error.
  std::vector<int> out(yd.size());
  Check(cudnnGetConvolutionNdForwardOutputDim(p->conv, p->x.d, p->w.d, static_cast<int>(out.size()), out.data()),
        "cudnnGetConvolutionNdForwardOutputDim", desc);
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != yd[i])
      throw std::runtime_error("cuDNN: output dim " + std::to_string(i) + " is " + std::to_string(out[i]) +
                               ", expected " + std::to_string(yd[i]) + " for " + desc);

  const std::vector<Candidate> cands = Heuristics(h, pass, *p, desc);
  std::string tried;
  for (const Candidate& c : cands) {
    if (c.status != CUDNN_STATUS_SUCCESS) continue;
    if (d.deterministic && (c.determinism != CUDNN_DETERMINISTIC || KnownNondeterministic(pass, c.algo))) {
      tried += std::string(" ") + AlgoName(pass, c.algo) + "(nondeterministic)";
      continue;
    }
    // Exact fp32 runs every algorithm under FMA math (the heuristic was asked under it; an algorithm reporting
    // DEFAULT_MATH would otherwise be allowed TF32). Halves and TF32 run the math type the algorithm reports.
    const cudnnMathType_t math = exact_f32 ? CUDNN_FMA_MATH : c.math;
    if (cudnnSetConvolutionMathType(p->conv, math) != CUDNN_STATUS_SUCCESS) continue;
    size_t ws = 0;
    if (WorkspaceOf(h, pass, *p, c.algo, &ws) != CUDNN_STATUS_SUCCESS) continue;
    if (ws > ConvWorkspaceLimit()) {
      tried += std::string(" ") + AlgoName(pass, c.algo) + "(workspace " + std::to_string(ws) + ")";
      continue;
    }
    p->algo = c.algo;
    p->math = math;
    p->workspace = ws;
    return p;
  }
  throw std::runtime_error("cuDNN has no algorithm for " + desc + " (" + std::to_string(cands.size()) + " candidates;" +
                           (tried.empty() ? std::string(" none succeeded") : tried) + ")");
}

Plan& PlanFor(Lease& lease, const ConvDesc& d, ConvPass pass) {
  void*& slot = lease.slot(kConvFamily);
  if (!slot) slot = new Cache();  // per device, for the process
  Cache& cache = *static_cast<Cache*>(slot);
  const std::string key = ToString(d) + " " + ToString(pass);
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) it = cache.plans.emplace(key, MakePlan(lease.handle(), d, pass)).first;
  return *it->second;
}

void Prepare(const ConvDesc& d, std::initializer_list<const void*> ptrs, const char* what) {
  ValidateConv(d);
  const std::string why = ConvUnsupportedReason(d);
  if (!why.empty()) throw std::invalid_argument(std::string("ot::cuda::") + what + ": " + why + " in " + ToString(d));
  for (const void* p : ptrs)
    if (!p)
      throw std::invalid_argument(std::string("ot::cuda::") + what + ": a null tensor pointer for " + ToString(d));
}

void CheckWorkspace(const Plan& p, const void* workspace, size_t bytes, const ConvDesc& d, ConvPass pass) {
  if (p.workspace > 0 && (!workspace || bytes < p.workspace))
    throw std::invalid_argument("ot::cuda::Conv: " + std::string(ToString(pass)) + " needs " +
                                std::to_string(p.workspace) + " bytes of workspace, got " +
                                std::to_string(workspace ? bytes : 0) + " for " + ToString(d));
}

}  // namespace

std::string ToString(const ConvDesc& d) {
  std::ostringstream s;
  s << "ConvDesc{" << cudnn_detail::TypeName(d.type) << (d.type == FloatType::kF32 && d.tf32 ? " tf32" : "")
    << " n=" << d.n << " c_in=" << d.c_in << " c_out=" << d.c_out << " group=" << d.group << " in=" << Vec(d.in_spatial)
    << " out=" << Vec(d.out_spatial) << " kernel=" << Vec(d.kernel) << " strides=" << Vec(d.strides)
    << " dilations=" << Vec(d.dilations) << " pads=" << Vec(d.pad_begin) << Vec(d.pad_end)
    << (d.deterministic ? " deterministic" : "") << "}";
  return s.str();
}

const char* ToString(ConvPass p) {
  switch (p) {
    case ConvPass::kForward:
      return "forward";
    case ConvPass::kBackwardData:
      return "backward-data";
    case ConvPass::kBackwardFilter:
      return "backward-filter";
  }
  return "?";
}

void ValidateConv(const ConvDesc& d) {
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument("ot::cuda::Conv: " + why + " in " + ToString(d));
  };
  cudnn_detail::ValidateConvChannels(d, bad);
  const size_t r = d.in_spatial.size();
  for (size_t i = 0; i < r; ++i) {
    if (d.in_spatial[i] <= 0 || d.kernel[i] <= 0 || d.strides[i] <= 0 || d.dilations[i] <= 0)
      bad("sizes, kernel, strides and dilations must be positive");
    if (d.pad_begin[i] < 0 || d.pad_end[i] < 0) bad("negative padding");
    const int64_t out = OutSize(
        d.in_spatial[i] + d.pad_begin[i] + d.pad_end[i] - DilatedKernel(d.kernel[i], d.dilations[i]), d.strides[i]);
    if (out <= 0) bad("the kernel is larger than the padded input");
    if (out != d.out_spatial[i])
      bad("out_spatial[" + std::to_string(i) + "] is " + std::to_string(d.out_spatial[i]) + ", the geometry gives " +
          std::to_string(out));
  }
}

std::string ConvUnsupportedReason(const ConvDesc& d) {
  const size_t r = d.in_spatial.size();
  if (r > 3) return std::to_string(r) + "-D convolution (cuDNN's legacy API runs 1-D to 3-D)";
  for (size_t i = 0; i < r; ++i) {
    const int64_t sym =
        OutSize(d.in_spatial[i] + 2 * d.pad_begin[i] - DilatedKernel(d.kernel[i], d.dilations[i]), d.strides[i]);
    if (sym != d.out_spatial[i])
      return "pads " + Vec(d.pad_begin) + " (begin) and " + Vec(d.pad_end) + " (end) on spatial dim " +
             std::to_string(i) + ": cuDNN pads symmetrically, and pad " + std::to_string(d.pad_begin[i]) +
             " on both sides gives " + std::to_string(sym) + " outputs, not " + std::to_string(d.out_spatial[i]);
  }
  const int64_t cg = d.c_in / d.group;
  std::vector<int64_t> all{d.n,
                           d.c_in,
                           d.c_out,
                           d.n * d.c_in * Prod(d.in_spatial),
                           d.n * d.c_out * Prod(d.out_spatial),
                           d.c_out * cg * Prod(d.kernel)};
  for (const auto* v : {&d.in_spatial, &d.out_spatial, &d.kernel, &d.strides, &d.dilations, &d.pad_begin})
    all.insert(all.end(), v->begin(), v->end());
  if (!FitsInt(all)) return "a tensor of 2^31 elements or more (cuDNN's legacy API indexes with int)";
  return "";
}

size_t ConvWorkspaceLimit() { return size_t{256} << 20; }

int64_t ConvAlgorithmQueries() { return g_queries.load(); }

size_t ConvWorkspaceBytes(const ConvDesc& d, ConvPass pass) {
  Prepare(d, {}, "ConvWorkspaceBytes");
  Lease lease(nullptr);
  return PlanFor(lease, d, pass).workspace;
}

std::string ConvAlgorithmName(const ConvDesc& d, ConvPass pass) {
  Prepare(d, {}, "ConvAlgorithmName");
  Lease lease(nullptr);
  const Plan& p = PlanFor(lease, d, pass);
  return std::string(AlgoName(pass, p.algo)) + " " + MathName(p.math);
}

void ConvForward(const ConvDesc& d, const void* x, const void* w, const void* bias, void* y, void* workspace,
                 size_t workspace_bytes, void* stream) {
  Prepare(d, {x, w, y}, "ConvForward");
  Lease lease(stream);
  const Plan& p = PlanFor(lease, d, ConvPass::kForward);
  CheckWorkspace(p, workspace, workspace_bytes, d, ConvPass::kForward);
  // Scaling factors are float for float, half and bfloat16 data (cuDNN: double only for double data).
  const float one = 1.f, zero = 0.f;
  Check(
      cudnnConvolutionForward(lease.handle(), &one, p.x.d, x, p.w.d, w, p.conv,
                              static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), workspace, p.workspace, &zero, p.y.d, y),
      "cudnnConvolutionForward", ToString(d));
  // The bias in a second pass over y (y += bias[c], our kernel: cudnnAddTensor documents no bfloat16): for halves
  // the convolution's fp32 result is rounded once to y and again after the bias (cudnnConvolutionBiasActivationForward
  // would fuse it, but only with the IMPLICIT_PRECOMP_GEMM algorithm for an identity activation).
  if (bias) conv_detail::AddChannelBias(d.type, d.n, d.c_out, Prod(d.out_spatial), bias, y, stream);
}

void ConvBackwardData(const ConvDesc& d, const void* dy, const void* w, void* dx, void* workspace,
                      size_t workspace_bytes, void* stream) {
  Prepare(d, {dy, w, dx}, "ConvBackwardData");
  Lease lease(stream);
  const Plan& p = PlanFor(lease, d, ConvPass::kBackwardData);
  CheckWorkspace(p, workspace, workspace_bytes, d, ConvPass::kBackwardData);
  const float one = 1.f, zero = 0.f;
  Check(cudnnConvolutionBackwardData(lease.handle(), &one, p.w.d, w, p.y.d, dy, p.conv,
                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), workspace, p.workspace, &zero,
                                     p.x.d, dx),
        "cudnnConvolutionBackwardData", ToString(d));
}

void ConvBackwardFilter(const ConvDesc& d, const void* dy, const void* x, void* dw, void* workspace,
                        size_t workspace_bytes, void* stream) {
  Prepare(d, {dy, x, dw}, "ConvBackwardFilter");
  Lease lease(stream);
  const Plan& p = PlanFor(lease, d, ConvPass::kBackwardFilter);
  CheckWorkspace(p, workspace, workspace_bytes, d, ConvPass::kBackwardFilter);
  const float one = 1.f, zero = 0.f;
  Check(cudnnConvolutionBackwardFilter(lease.handle(), &one, p.x.d, x, p.y.d, dy, p.conv,
                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo), workspace, p.workspace,
                                       &zero, p.w.d, dw),
        "cudnnConvolutionBackwardFilter", ToString(d));
}

}  // namespace ot::cuda
