// A device flag a kernel raises (a label or an index out of range), read one run later from pinned memory, so no
// run waits for it: the error names the node one step after the bad batch (the run that raised it has finished by
// then: a plan's run ends with a synchronisation).
#pragma once
#include <cuda_runtime.h>

#include "executor/cuda/cuda_kernels.h"

namespace ot {

struct DeviceFlag {
  int* dev = nullptr;
  int* host = nullptr;
  DeviceFlag() {
    CudaCheck(cudaMalloc(&dev, sizeof(int)), "flag");
    CudaCheck(cudaMallocHost(&host, sizeof(int)), "flag");
    *host = 0;
    CudaCheck(cudaMemset(dev, 0, sizeof(int)), "flag");
  }
  ~DeviceFlag() {
    cudaFree(dev);
    cudaFreeHost(host);
  }
  DeviceFlag(const DeviceFlag&) = delete;
  DeviceFlag& operator=(const DeviceFlag&) = delete;
  bool raised() const { return *host != 0; }
  void CopyBack(void* stream) {
    CudaCheck(cudaMemcpyAsync(host, dev, sizeof(int), cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)),
              "flag");
  }
};

}  // namespace ot
