#include "executor/device.h"

#include <algorithm>
#include <cstdlib>

#include "graph/error.h"

namespace ot {

#ifdef OT_WITH_CUDA
std::shared_ptr<DeviceBackend> OpenCudaDevice(int index);  // executor/cuda/cuda_backend.cc
int CudaDeviceCountImpl();
bool CudaHasKernelImpl(const std::string& domain, const std::string& op_type);
#endif

bool CudaBackendBuilt() {
#ifdef OT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool CudaHasKernel([[maybe_unused]] const std::string& domain, [[maybe_unused]] const std::string& op_type) {
#ifdef OT_WITH_CUDA
  return CudaHasKernelImpl(domain, op_type);
#else
  return false;
#endif
}

void* DeviceBackend::AllocHost(size_t bytes) {
  void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!p) throw Error("out of host memory: " + std::to_string(bytes) + " bytes of batch staging");
  return p;
}

void DeviceBackend::FreeHost(void* p) { std::free(p); }

int CudaDeviceCount() {
#ifdef OT_WITH_CUDA
  return CudaDeviceCountImpl();
#else
  return 0;
#endif
}

std::shared_ptr<DeviceBackend> OpenDevice(const std::string& spec, const DeviceOptions& options) {
  if (spec.empty() || spec == "cpu") return nullptr;
  if (spec == "auto") {
    if (CudaDeviceCount() == 0) return nullptr;
    return OpenDevice("cuda:0", options);
  }
  if (spec.rfind("cuda", 0) != 0) throw Error("--device: expected auto, cpu, cuda or cuda:N, got '" + spec + "'");
  [[maybe_unused]] int index = 0;
  if (spec.size() > 4) {
    char* end = nullptr;
    const std::string rest = spec.substr(4);
    if (rest[0] != ':' || rest.size() < 2) throw Error("--device: expected cuda:N, got '" + spec + "'");
    const long v = std::strtol(rest.c_str() + 1, &end, 10);
    if (*end || v < 0) throw Error("--device: expected cuda:N with N >= 0, got '" + spec + "'");
    index = static_cast<int>(v);
  }
#ifdef OT_WITH_CUDA
  const int n = CudaDeviceCount();
  if (n == 0) throw Error("--device " + spec + ": no CUDA GPU is usable on this machine (no device or no driver)");
  if (index >= n) throw Error("--device " + spec + ": this machine has " + std::to_string(n) + " CUDA GPU(s)");
  std::shared_ptr<DeviceBackend> d = OpenCudaDevice(index);
  d->set_options(options);
  return d;
#else
  throw Error("--device " + spec + ": this onnx-train was built without the CUDA backend (no nvcc at build time)");
#endif
}

}  // namespace ot
