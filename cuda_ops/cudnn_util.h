// Pieces shared by the cuDNN launchers (cudnn_conv, cudnn_pool, cudnn_batchnorm): status checks, the per-device
// handle, dtype mapping and owned descriptors. Internal to cuda_ops (includes cudnn.h; no public header includes it).
//
// Handles. cuDNN binds a handle to the device current when it is created, and a handle must not be used by two
// threads at once. One handle per device, made on first use and kept for the process (never destroyed: at static
// destruction time the CUDA context may already be gone). A Lease locks that device's handle for one call and
// binds it to the caller's stream (cudnnSetStream): every cuDNN launch is asynchronous, so the lock is held only
// while the call is issued, never while the GPU works. The same mutex guards each launcher's per-device caches
// (algorithms, descriptors), which the lease hands out with the handle.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_ops/row_kernels.h"  // FloatType

namespace ot::cuda::cudnn_detail {

// std::runtime_error("cuDNN: <what> failed: <status name>[ for <desc>]").
[[noreturn]] void Fail(const std::string& what, cudnnStatus_t s, const std::string& desc = "");
inline void Check(cudnnStatus_t s, const char* what, const std::string& desc = "") {
  if (s != CUDNN_STATUS_SUCCESS) Fail(what, s, desc);
}

cudnnDataType_t DataType(FloatType t);
const char* TypeName(FloatType t);

// "[a,b,c]" for error messages and cache keys.
std::string Vec(const std::vector<int64_t>& v);

// True when every value fits cuDNN's int arguments (dims, pads, strides, element counts < 2^31).
bool FitsInt(const std::vector<int64_t>& v);
bool FitsInt(int64_t v);

class Lease {
 public:
  // The current device's handle, locked, bound to `stream` (a cudaStream_t; null = the legacy default stream).
  // Throws std::runtime_error when cuDNN cannot be initialised (no GPU: the message says so).
  explicit Lease(void* stream);
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  cudnnHandle_t handle() const { return handle_; }
  int device() const { return device_; }
  // A slot of per-device state for launcher family `family` (0: conv, 1: pool, 2: batchnorm), null until set. The
  // lease's lock guards it; the owner (the launcher's .cc) stores a pointer it never frees (process lifetime).
  void*& slot(int family);

 private:
  std::unique_lock<std::mutex> lock_;
  cudnnHandle_t handle_ = nullptr;
  int device_ = 0;
  void** slots_ = nullptr;
};

// Owned descriptors (destroyed with the object).
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc();
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // A packed row-major (NCHW / NCDHW) tensor of `dims` (4 or 5 of them).
  void Set(cudnnDataType_t t, const std::vector<int64_t>& dims, const std::string& desc);
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc();
  ~FilterDesc();
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  // [K, C/group, spatial...] in NCHW order (4 or 5 dims).
  void Set(cudnnDataType_t t, const std::vector<int64_t>& dims, const std::string& desc);
};

// 256-byte rounding of workspace carve-outs (cudaMalloc and the arena give 256-byte aligned bases).
inline size_t Align256(size_t b) { return (b + 255) & ~size_t{255}; }

// The checks a ConvDesc and a ConvTransposeDesc share: at least one spatial dim and vectors of one length, positive
// n, c_in, c_out and group, channels divisible by group. bad(why) throws.
template <typename Desc, typename Bad>
void ValidateConvChannels(const Desc& d, Bad&& bad) {
  const size_t r = d.in_spatial.size();
  if (r == 0) bad("no spatial dims");
  for (const auto* v : {&d.out_spatial, &d.kernel, &d.strides, &d.dilations, &d.pad_begin, &d.pad_end})
    if (v->size() != r) bad("the spatial vectors have different lengths");
  if (d.n <= 0 || d.c_in <= 0 || d.c_out <= 0 || d.group <= 0) bad("n, c_in, c_out and group must be positive");
  if (d.c_in % d.group != 0 || d.c_out % d.group != 0) bad("channels not divisible by group");
}

}  // namespace ot::cuda::cudnn_detail
