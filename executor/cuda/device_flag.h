// A device flag a kernel raises (a label or an index out of range): the kernel's launch is followed by a copy of
// the flag into pinned host memory (part of the run, so a captured graph replays it too), and the kernel's
// KernelInfo::after_run (FlagCheck) reads it once the run has finished -- no synchronisation of its own, and the
// error names the node at the run of the bad batch.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>

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

// KernelInfo::after_run of a kernel that raises `flag`: throws Error("<node>: <problem> (seen on the GPU)").
inline std::function<void()> FlagCheck(std::shared_ptr<DeviceFlag> flag, std::string what) {
  return [flag, what] {
    if (flag->raised()) throw Error(what + " (seen on the GPU)");
  };
}

}  // namespace ot
