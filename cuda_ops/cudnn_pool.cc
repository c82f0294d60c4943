// See cudnn_pool.h. Descriptors per desc are cached per device (the handle lease guards the map), like the
// convolution plans: a launch only issues cuDNN's kernel.
#include "cuda_ops/cudnn_pool.h"

#include <map>
#include <memory>
#include <sstream>

#include "cuda_ops/cudnn_util.h"
#include "cuda_ops/data_kernels.h"

namespace ot::cuda {

using cudnn_detail::Check;
using cudnn_detail::FitsInt;
using cudnn_detail::Lease;
using cudnn_detail::TensorDesc;
using cudnn_detail::Vec;

namespace {

constexpr int kPoolFamily = 1;  // Lease slot of this file's per-device cache

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

const char* ModeName(PoolMode m) {
  switch (m) {
    case PoolMode::kMax:
      return "max";
    case PoolMode::kAvgIncludePad:
      return "avg_include_pad";
    case PoolMode::kAvgExcludePad:
      return "avg_exclude_pad";
  }
  return "?";
}

struct Plan {
  TensorDesc x, y;
  cudnnPoolingDescriptor_t pool = nullptr;
  size_t y_bytes = 0;
  Plan() { Check(cudnnCreatePoolingDescriptor(&pool), "cudnnCreatePoolingDescriptor"); }
  ~Plan() {
    if (pool) cudnnDestroyPoolingDescriptor(pool);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
};

struct Cache {
  std::map<std::string, std::unique_ptr<Plan>> plans;  // key: ToString(desc)
};

std::unique_ptr<Plan> MakePlan(const PoolDesc& d) {
  const std::string desc = ToString(d);
  std::vector<int64_t> in = d.in_spatial, out = d.out_spatial, k = d.kernel, s = d.strides, pad = d.pad_begin;
  if (in.size() == 1) {  // 1-D as 2-D: a leading spatial dim of 1, window 1, stride 1, no padding
    for (auto* v : {&in, &out, &k, &s}) v->insert(v->begin(), 1);
    pad.insert(pad.begin(), 0);
  }
  const cudnnDataType_t dt = cudnn_detail::DataType(d.type);
  auto p = std::make_unique<Plan>();
  std::vector<int64_t> xd{d.n, d.c}, yd{d.n, d.c};
  xd.insert(xd.end(), in.begin(), in.end());
  yd.insert(yd.end(), out.begin(), out.end());
  p->x.Set(dt, xd, desc);
  p->y.Set(dt, yd, desc);
  p->y_bytes = static_cast<size_t>(Prod(yd)) * FloatTypeSize(d.type);
  const cudnnPoolingMode_t mode = d.mode == PoolMode::kAvgIncludePad   ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                  : d.mode == PoolMode::kAvgExcludePad ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                  : d.deterministic                    ? CUDNN_POOLING_MAX_DETERMINISTIC
                                                                       : CUDNN_POOLING_MAX;
  const std::vector<int> wi(k.begin(), k.end()), pi(pad.begin(), pad.end()), si(s.begin(), s.end());
  // NaN propagation: cpu::Pool's max keeps a NaN once met, so a window holding one yields NaN here too.
  Check(cudnnSetPoolingNdDescriptor(p->pool, mode, CUDNN_PROPAGATE_NAN, static_cast<int>(wi.size()), wi.data(),
                                    pi.data(), si.data()),
        "cudnnSetPoolingNdDescriptor", desc);
  std::vector<int> got(yd.size());
  Check(cudnnGetPoolingNdForwardOutputDim(p->pool, p->x.d, static_cast<int>(got.size()), got.data()),
        "cudnnGetPoolingNdForwardOutputDim", desc);
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != yd[i])
      throw std::runtime_error("cuDNN: pooling output dim " + std::to_string(i) + " is " + std::to_string(got[i]) +
                               ", expected " + std::to_string(yd[i]) + " for " + desc);
  return p;
}

Plan& PlanFor(Lease& lease, const PoolDesc& d) {
  void*& slot = lease.slot(kPoolFamily);
  if (!slot) slot = new Cache();  // per device, for the process
  Cache& cache = *static_cast<Cache*>(slot);
  const std::string key = ToString(d);
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) it = cache.plans.emplace(key, MakePlan(d)).first;
  return *it->second;
}

void Prepare(const PoolDesc& d, std::initializer_list<const void*> ptrs, const char* what) {
  ValidatePool(d);
  const std::string why = PoolUnsupportedReason(d);
  if (!why.empty()) throw std::invalid_argument(std::string("ot::cuda::") + what + ": " + why + " in " + ToString(d));
  for (const void* p : ptrs)
    if (!p)
      throw std::invalid_argument(std::string("ot::cuda::") + what + ": a null tensor pointer for " + ToString(d));
}

}  // namespace

std::string ToString(const PoolDesc& d) {
  std::ostringstream s;
  s << "PoolDesc{" << cudnn_detail::TypeName(d.type) << " " << ModeName(d.mode) << " n=" << d.n << " c=" << d.c
    << " in=" << Vec(d.in_spatial) << " out=" << Vec(d.out_spatial) << " kernel=" << Vec(d.kernel)
    << " strides=" << Vec(d.strides) << " dilations=" << Vec(d.dilations) << " pads=" << Vec(d.pad_begin)
    << Vec(d.pad_end) << (d.deterministic && d.mode == PoolMode::kMax ? " deterministic" : "") << "}";
  return s.str();
}

void ValidatePool(const PoolDesc& d) {
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument("ot::cuda::Pool: " + why + " in " + ToString(d));
  };
  const size_t r = d.in_spatial.size();
  if (r == 0) bad("no spatial dims");
  for (const auto* v : {&d.out_spatial, &d.kernel, &d.strides, &d.dilations, &d.pad_begin, &d.pad_end})
    if (v->size() != r) bad("the spatial vectors have different lengths");
  if (d.n <= 0 || d.c <= 0) bad("n and c must be positive");
  for (size_t i = 0; i < r; ++i) {
    if (d.in_spatial[i] <= 0 || d.out_spatial[i] <= 0 || d.kernel[i] <= 0 || d.strides[i] <= 0 || d.dilations[i] <= 0)
      bad("sizes, kernel, strides and dilations must be positive");
    if (d.pad_begin[i] < 0 || d.pad_end[i] < 0) bad("negative padding");
  }
}

std::string PoolUnsupportedReason(const PoolDesc& d) {
  const size_t r = d.in_spatial.size();
  if (r > 3) return std::to_string(r) + "-D pooling (cuDNN pools 1-D to 3-D)";
  for (size_t i = 0; i < r; ++i) {
    const std::string dim = " on spatial dim " + std::to_string(i);
    if (d.dilations[i] != 1) return "dilations " + Vec(d.dilations) + " (cuDNN's pooling has no dilation)";
    if (d.pad_begin[i] >= d.kernel[i])
      return "pad " + std::to_string(d.pad_begin[i]) + " >= kernel " + std::to_string(d.kernel[i]) + dim +
             " (a window could hold no input element)";
    const int64_t num = d.in_spatial[i] + 2 * d.pad_begin[i] - d.kernel[i];
    const int64_t sym = num < 0 ? 0 : num / d.strides[i] + 1;
    if (sym != d.out_spatial[i])
      return "output size " + std::to_string(d.out_spatial[i]) + dim + ": cuDNN pads symmetrically, and pad " +
             std::to_string(d.pad_begin[i]) + " on both sides gives " + std::to_string(sym) +
             " (asymmetric pads or ceil_mode change the size)";
    const int64_t last_end = (d.out_spatial[i] - 1) * d.strides[i] - d.pad_begin[i] + d.kernel[i];
    if (d.mode == PoolMode::kAvgIncludePad && last_end > d.in_spatial[i] + d.pad_end[i])
      return "count_include_pad with a window past the end padding" + dim +
             " (cuDNN divides by the whole window, ONNX by the part inside the padded input)";
  }
  std::vector<int64_t> all{d.n, d.c, d.n * d.c * Prod(d.in_spatial), d.n * d.c * Prod(d.out_spatial)};
  for (const auto* v : {&d.in_spatial, &d.out_spatial, &d.kernel, &d.strides, &d.pad_begin})
    all.insert(all.end(), v->begin(), v->end());
  if (!FitsInt(all)) return "a tensor of 2^31 elements or more (cuDNN's legacy API indexes with int)";
  return "";
}

namespace {

int64_t NumX(const PoolDesc& d) { return d.n * d.c * Prod(d.in_spatial); }
int64_t NumY(const PoolDesc& d) { return d.n * d.c * Prod(d.out_spatial); }
size_t F32Bytes(int64_t n) { return cudnn_detail::Align256(static_cast<size_t>(n) * sizeof(float)); }

// The fp32 desc a bf16 one runs as.
PoolDesc AsF32(const PoolDesc& d) {
  PoolDesc f = d;
  f.type = FloatType::kF32;
  return f;
}

void RequireWorkspace(const void* workspace, size_t bytes, size_t need, const char* what, const PoolDesc& d) {
  if (need > 0 && (!workspace || bytes < need))
    throw std::invalid_argument(std::string("ot::cuda::") + what + ": needs " + std::to_string(need) +
                                " bytes of workspace, got " + std::to_string(workspace ? bytes : 0) + " for " +
                                ToString(d));
}

// fp32/fp16 forward through cuDNN into y.
void CudnnForward(const PoolDesc& d, const void* x, void* y, void* stream) {
  Lease lease(stream);
  const Plan& p = PlanFor(lease, d);
  const float one = 1.f, zero = 0.f;  // float scaling factors for float and half data
  Check(cudnnPoolingForward(lease.handle(), p.pool, &one, p.x.d, x, &zero, p.y.d, y), "cudnnPoolingForward",
        ToString(d));
}

// fp32/fp16 backward through cuDNN; y_ws: Y's bytes of scratch for max pooling.
void CudnnBackward(const PoolDesc& d, const void* dy, const void* x, void* dx, void* y_ws, void* stream) {
  const bool max = d.mode == PoolMode::kMax;
  Lease lease(stream);
  const Plan& p = PlanFor(lease, d);
  const float one = 1.f, zero = 0.f;
  const void* y = dy;  // averages: cuDNN reads neither y nor x; dy and dx stand in (same shapes)
  const void* xin = max ? x : dx;
  if (max) {
    // The forward again, into the workspace: cuDNN finds each window's argmax by comparing x with y.
    Check(cudnnPoolingForward(lease.handle(), p.pool, &one, p.x.d, x, &zero, p.y.d, y_ws),
          "cudnnPoolingForward (for the backward)", ToString(d));
    y = y_ws;
  }
  Check(cudnnPoolingBackward(lease.handle(), p.pool, &one, p.y.d, y, p.y.d, dy, p.x.d, xin, &zero, p.x.d, dx),
        "cudnnPoolingBackward", ToString(d));
}

}  // namespace

size_t PoolForwardWorkspaceBytes(const PoolDesc& d) {
  ValidatePool(d);
  return d.type == FloatType::kBF16 ? F32Bytes(NumX(d)) + F32Bytes(NumY(d)) : 0;
}

void PoolForward(const PoolDesc& d, const void* x, void* y, void* workspace, size_t workspace_bytes, void* stream) {
  Prepare(d, {x, y}, "PoolForward");
  RequireWorkspace(workspace, workspace_bytes, PoolForwardWorkspaceBytes(d), "PoolForward", d);
  if (d.type != FloatType::kBF16) {
    CudnnForward(d, x, y, stream);
    return;
  }
  uint8_t* w = static_cast<uint8_t*>(workspace);
  float* x32 = reinterpret_cast<float*>(w);
  float* y32 = reinterpret_cast<float*>(w + F32Bytes(NumX(d)));
  Cast(FloatType::kBF16, x, FloatType::kF32, x32, NumX(d), stream);
  CudnnForward(AsF32(d), x32, y32, stream);
  Cast(FloatType::kF32, y32, FloatType::kBF16, y, NumY(d), stream);
}

size_t PoolBackwardWorkspaceBytes(const PoolDesc& d) {
  ValidatePool(d);
  const bool max = d.mode == PoolMode::kMax, bf16 = d.type == FloatType::kBF16;
  const size_t esz = bf16 ? sizeof(float) : FloatTypeSize(d.type);
  size_t bytes = max ? cudnn_detail::Align256(static_cast<size_t>(NumY(d)) * esz) : 0;       // Y recomputed
  if (bf16) bytes += F32Bytes(NumY(d)) + F32Bytes(NumX(d)) + (max ? F32Bytes(NumX(d)) : 0);  // dY, dX, X in fp32
  return bytes;
}

void PoolBackward(const PoolDesc& d, const void* dy, const void* x, void* dx, void* workspace, size_t workspace_bytes,
                  void* stream) {
  const bool max = d.mode == PoolMode::kMax;
  Prepare(d, {dy, dx, max ? x : dy}, "PoolBackward");
  RequireWorkspace(workspace, workspace_bytes, PoolBackwardWorkspaceBytes(d), "PoolBackward", d);
  uint8_t* w = static_cast<uint8_t*>(workspace);
  if (d.type != FloatType::kBF16) {
    CudnnBackward(d, dy, x, dx, w, stream);
    return;
  }
  // bf16: dY (and X) widened, the fp32 backward, dX rounded once.
  const int64_t nx = NumX(d), ny = NumY(d);
  const size_t y_bytes = max ? F32Bytes(ny) : 0;
  float* dy32 = reinterpret_cast<float*>(w + y_bytes);
  float* dx32 = reinterpret_cast<float*>(w + y_bytes + F32Bytes(ny));
  float* x32 = max ? reinterpret_cast<float*>(w + y_bytes + F32Bytes(ny) + F32Bytes(nx)) : nullptr;
  Cast(FloatType::kBF16, dy, FloatType::kF32, dy32, ny, stream);
  if (max) Cast(FloatType::kBF16, x, FloatType::kF32, x32, nx, stream);
  CudnnBackward(AsF32(d), dy32, x32, dx32, max ? w : nullptr, stream);
  Cast(FloatType::kF32, dx32, FloatType::kBF16, dx, nx, stream);
}

}  // namespace ot::cuda
