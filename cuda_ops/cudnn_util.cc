// See cudnn_util.h.
#include "cuda_ops/cudnn_util.h"

#include <cuda_runtime.h>

#include <climits>
#include <map>
#include <memory>

namespace ot::cuda::cudnn_detail {

void Fail(const std::string& what, cudnnStatus_t s, const std::string& desc) {
  std::string msg = "cuDNN: " + what + " failed: " + cudnnGetErrorString(s);
  if (!desc.empty()) msg += " for " + desc;
  throw std::runtime_error(msg);
}

cudnnDataType_t DataType(FloatType t) {
  switch (t) {
    case FloatType::kF32:
      return CUDNN_DATA_FLOAT;
    case FloatType::kF16:
      return CUDNN_DATA_HALF;
    case FloatType::kBF16:
      return CUDNN_DATA_BFLOAT16;
  }
  throw std::invalid_argument("cuDNN: unknown FloatType");
}

const char* TypeName(FloatType t) {
  switch (t) {
    case FloatType::kF32:
      return "f32";
    case FloatType::kF16:
      return "f16";
    case FloatType::kBF16:
      return "bf16";
  }
  return "?";
}

std::string Vec(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  s += ']';
  return s;
}

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }
bool FitsInt(const std::vector<int64_t>& v) {
  for (int64_t x : v)
    if (!FitsInt(x)) return false;
  return true;
}

namespace {

constexpr int kFamilies = 3;

// One device's handle and the launchers' per-device state, behind one mutex.
struct DeviceState {
  std::mutex mu;
  cudnnHandle_t handle = nullptr;
  void* slots[kFamilies] = {};
};

// Device index -> state. Entries are never removed (handles live for the process), so a pointer taken under the
// map's lock stays valid after it is released.
DeviceState& StateOf(int device) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<DeviceState>>* states = new std::map<int, std::unique_ptr<DeviceState>>();
  std::lock_guard<std::mutex> l(mu);
  auto& p = (*states)[device];
  if (!p) p = std::make_unique<DeviceState>();
  return *p;
}

std::vector<int> IntDims(const std::vector<int64_t>& dims, const std::string& desc) {
  if (!FitsInt(dims)) throw std::invalid_argument("cuDNN: a dimension does not fit in int for " + desc);
  return std::vector<int>(dims.begin(), dims.end());
}

}  // namespace

Lease::Lease(void* stream) {
  if (cudaGetDevice(&device_) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    throw std::runtime_error("cuDNN: no usable CUDA device (cudaGetDevice failed)");
  }
  DeviceState& st = StateOf(device_);
  lock_ = std::unique_lock<std::mutex>(st.mu);
  if (!st.handle) {
    const cudnnStatus_t s = cudnnCreate(&st.handle);
    if (s != CUDNN_STATUS_SUCCESS) {
      st.handle = nullptr;
      int devices = 0;
      if (cudaGetDeviceCount(&devices) != cudaSuccess) {
        cudaGetLastError();
        devices = 0;
      }
      throw std::runtime_error(std::string("cuDNN: cudnnCreate failed: ") + cudnnGetErrorString(s) +
                               (devices == 0 ? " (no usable CUDA device)" : ""));
    }
  }
  handle_ = st.handle;
  slots_ = st.slots;
  Check(cudnnSetStream(handle_, static_cast<cudaStream_t>(stream)), "cudnnSetStream");
}

Lease::~Lease() = default;

void*& Lease::slot(int family) {
  if (family < 0 || family >= kFamilies) throw std::logic_error("cuDNN: bad cache family");
  return slots_[family];
}

TensorDesc::TensorDesc() { Check(cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor"); }
TensorDesc::~TensorDesc() {
  if (d) cudnnDestroyTensorDescriptor(d);
}
void TensorDesc::Set(cudnnDataType_t t, const std::vector<int64_t>& dims, const std::string& desc) {
  const std::vector<int> di = IntDims(dims, desc);
  std::vector<int> strides(di.size());
  int64_t s = 1;
  for (size_t i = di.size(); i-- > 0;) {
    if (s > INT_MAX) throw std::invalid_argument("cuDNN: a tensor stride does not fit in int for " + desc);
    strides[i] = static_cast<int>(s);
    s *= di[i];
  }
  Check(cudnnSetTensorNdDescriptor(d, t, static_cast<int>(di.size()), di.data(), strides.data()),
        "cudnnSetTensorNdDescriptor", desc);
}

FilterDesc::FilterDesc() { Check(cudnnCreateFilterDescriptor(&d), "cudnnCreateFilterDescriptor"); }
FilterDesc::~FilterDesc() {
  if (d) cudnnDestroyFilterDescriptor(d);
}
void FilterDesc::Set(cudnnDataType_t t, const std::vector<int64_t>& dims, const std::string& desc) {
  const std::vector<int> di = IntDims(dims, desc);
  Check(cudnnSetFilterNdDescriptor(d, t, CUDNN_TENSOR_NCHW, static_cast<int>(di.size()), di.data()),
        "cudnnSetFilterNdDescriptor", desc);
}

}  // namespace ot::cuda::cudnn_detail
