// See cudnn_batchnorm.h. cuDNN's descriptors per desc are cached per device (the handle lease guards the map).
#include "cuda_ops/cudnn_batchnorm.h"

#include <map>
#include <memory>
#include <sstream>

#include "cuda_ops/cudnn_batchnorm_kernels.h"
#include "cuda_ops/cudnn_util.h"

namespace ot::cuda {

using cudnn_detail::Align256;
using cudnn_detail::Check;
using cudnn_detail::Lease;
using cudnn_detail::TensorDesc;

namespace {

constexpr int kBnFamily = 2;  // Lease slot of this file's per-device cache

struct Plan {
  TensorDesc x;  // [n, c, spatial, 1] of xt: X, Y, dY and dX
  TensorDesc p;  // [1, c, 1, 1] fp32: scale, bias, statistics and their gradients
};
struct Cache {
  std::map<std::string, std::unique_ptr<Plan>> plans;  // key: ToString(desc)
};

Plan& PlanFor(Lease& lease, const BatchNormDesc& d) {
  void*& slot = lease.slot(kBnFamily);
  if (!slot) slot = new Cache();  // per device, for the process
  Cache& cache = *static_cast<Cache*>(slot);
  const std::string key = ToString(d);
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) {
    auto p = std::make_unique<Plan>();
    p->x.Set(cudnn_detail::DataType(d.xt), {d.n, d.c, d.spatial, 1}, key);
    p->p.Set(CUDNN_DATA_FLOAT, {1, d.c, 1, 1}, key);
    it = cache.plans.emplace(key, std::move(p)).first;
  }
  return *it->second;
}

// The workspace, carved: partial sums, batch statistics (2c doubles), backward sums (2c doubles), and fp32 scratch
// for the dScale/dBias cuDNN always writes (2c floats).
struct Carved {
  double* partials;
  double* stats;
  double* sums;
  float* scratch;
};
Carved Carve(const BatchNormDesc& d, void* workspace, size_t bytes) {
  if (!workspace || bytes < BatchNormWorkspaceBytes(d))
    throw std::invalid_argument("ot::cuda::BatchNorm: needs " + std::to_string(BatchNormWorkspaceBytes(d)) +
                                " bytes of workspace, got " + std::to_string(workspace ? bytes : 0) + " for " +
                                ToString(d));
  uint8_t* w = static_cast<uint8_t*>(workspace);
  const size_t part = Align256(bn_detail::PartialBytes(d.c, d.n * d.spatial));
  const size_t two_c = Align256(static_cast<size_t>(2 * d.c) * sizeof(double));
  return Carved{reinterpret_cast<double*>(w), reinterpret_cast<double*>(w + part),
                reinterpret_cast<double*>(w + part + two_c), reinterpret_cast<float*>(w + part + 2 * two_c)};
}

void Require(bool ok, const char* what, const BatchNormDesc& d) {
  if (!ok) throw std::invalid_argument(std::string("ot::cuda::BatchNorm: ") + what + " for " + ToString(d));
}

const char* TypeName(FloatType t) { return cudnn_detail::TypeName(t); }

}  // namespace

std::string ToString(const BatchNormDesc& d) {
  std::ostringstream s;
  s.precision(17);
  s << "BatchNormDesc{" << TypeName(d.xt) << " n=" << d.n << " c=" << d.c << " spatial=" << d.spatial
    << " eps=" << d.eps << (d.own_kernels ? " own_kernels" : "") << "}";
  return s.str();
}

void ValidateBatchNorm(const BatchNormDesc& d) {
  Require(d.n > 0 && d.c > 0 && d.spatial > 0, "n, c and spatial must be positive", d);
  Require(d.eps > 0, "eps must be positive", d);
  Require(d.c <= 65535, "more than 65535 channels", d);  // the grid of our per-channel kernels
}

bool BatchNormUsesCudnn(const BatchNormDesc& d) {
  // The legacy API documents float/half/double X (not bfloat16) and indexes with int.
  return !d.own_kernels && (d.xt == FloatType::kF32 || d.xt == FloatType::kF16) &&
         cudnn_detail::FitsInt({d.n, d.c, d.spatial, d.n * d.c * d.spatial});
}

size_t BatchNormWorkspaceBytes(const BatchNormDesc& d) {
  ValidateBatchNorm(d);
  return Align256(bn_detail::PartialBytes(d.c, d.n * d.spatial)) +
         2 * Align256(static_cast<size_t>(2 * d.c) * sizeof(double)) +
         Align256(static_cast<size_t>(2 * d.c) * sizeof(float));
}

void BatchNormForwardTraining(const BatchNormDesc& d, const void* x, const float* scale, const float* bias,
                              const float* running_mean, const float* running_var, double momentum, void* y,
                              float* running_mean_out, float* running_var_out, void* workspace, size_t workspace_bytes,
                              void* stream) {
  ValidateBatchNorm(d);
  Require(x && scale && bias && y, "null x, scale, bias or y", d);
  Require((!running_mean_out || running_mean) && (!running_var_out || running_var),
          "a running-statistics output without its input", d);
  const Carved w = Carve(d, workspace, workspace_bytes);
  const bool cudnn = BatchNormUsesCudnn(d);
  // Batch statistics and the running update: ours in both implementations (the biased variance, see the header);
  // cuDNN needs them only for the update. Run before Y is written, so a Y aliasing X could not change them.
  if (!cudnn || running_mean_out || running_var_out)
    bn_detail::ChannelStats(d.xt, d.n, d.c, d.spatial, x, momentum, running_mean, running_var, running_mean_out,
                            running_var_out, w.partials, w.stats, stream);
  if (!cudnn) {
    bn_detail::Apply(d.xt, d.n, d.c, d.spatial, x, scale, bias, w.stats, nullptr, nullptr, d.eps, y, stream);
    return;
  }
  Lease lease(stream);
  const Plan& p = PlanFor(lease, d);
  const float one = 1.f, zero = 0.f;
  // No running buffers (null, null: cuDNN skips its own update) and no saved statistics (the backward recomputes).
  Check(cudnnBatchNormalizationForwardTraining(lease.handle(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, p.x.d, x, p.x.d, y,
                                               p.p.d, scale, bias, 1.0, nullptr, nullptr, d.eps, nullptr, nullptr),
        "cudnnBatchNormalizationForwardTraining", ToString(d));
}

void BatchNormForwardInference(const BatchNormDesc& d, const void* x, const float* scale, const float* bias,
                               const float* mean, const float* var, void* y, void* stream) {
  ValidateBatchNorm(d);
  Require(x && scale && bias && mean && var && y, "null pointer", d);
  if (!BatchNormUsesCudnn(d)) {
    bn_detail::Apply(d.xt, d.n, d.c, d.spatial, x, scale, bias, nullptr, mean, var, d.eps, y, stream);
    return;
  }
  Lease lease(stream);
  const Plan& p = PlanFor(lease, d);
  const float one = 1.f, zero = 0.f;
  Check(cudnnBatchNormalizationForwardInference(lease.handle(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, p.x.d, x, p.x.d,
                                                y, p.p.d, scale, bias, mean, var, d.eps),
        "cudnnBatchNormalizationForwardInference", ToString(d));
}

void BatchNormBackward(const BatchNormDesc& d, const void* dy, const void* x, const float* scale, const float* mean,
                       const float* var, void* dx, float* dscale, float* dbias, void* workspace, size_t workspace_bytes,
                       void* stream) {
  ValidateBatchNorm(d);
  Require(dy && x && scale && dx, "null dy, x, scale or dx", d);
  Require((mean == nullptr) == (var == nullptr), "mean and var must be both given or both null", d);
  Require(dx != dy && dx != x, "dx aliases dy or x", d);
  const Carved w = Carve(d, workspace, workspace_bytes);
  const bool training = mean == nullptr;
  if (!training) {  // cuDNN has no backward with given statistics
    bn_detail::Backward(d.xt, d.n, d.c, d.spatial, dy, x, scale, nullptr, mean, var, d.eps, false, dx, dscale, dbias,
                        w.partials, w.sums, stream);
    return;
  }
  if (!BatchNormUsesCudnn(d)) {
    bn_detail::ChannelStats(d.xt, d.n, d.c, d.spatial, x, 0.0, nullptr, nullptr, nullptr, nullptr, w.partials, w.stats,
                            stream);
    bn_detail::Backward(d.xt, d.n, d.c, d.spatial, dy, x, scale, w.stats, nullptr, nullptr, d.eps, true, dx, dscale,
                        dbias, w.partials, w.sums, stream);
    return;
  }
  Lease lease(stream);
  const Plan& p = PlanFor(lease, d);
  const float one = 1.f, zero = 0.f;
  // dScale/dBias are written (beta 0); cuDNN needs both buffers, so an unwanted one goes to the scratch.
  Check(cudnnBatchNormalizationBackward(lease.handle(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, p.x.d, x,
                                        p.x.d, dy, p.x.d, dx, p.p.d, scale, dscale ? dscale : w.scratch,
                                        dbias ? dbias : w.scratch + d.c, d.eps, nullptr, nullptr),
        "cudnnBatchNormalizationBackward", ToString(d));
}

}  // namespace ot::cuda
