#include <cuda_runtime.h>

#include "cuda_ops/device_info.h"

namespace ot::cuda {
int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}
}  // namespace ot::cuda
