// Ops whose output is the input's bytes (Reshape, Flatten, Squeeze, Unsqueeze, Identity): the memory plan gives
// the output the input's memory (in place where the input dies, a view where it stays live) and then nothing is
// copied; otherwise one device-to-device copy on the step's stream.
#include <cuda_runtime.h>

#include "executor/cuda/cuda_kernels.h"

namespace ot {

KernelInfo DeviceCopyKernel(const KernelContext& ctx) {
  const size_t n = ctx.out(0).nbytes();
  if (n != ctx.in(0).nbytes()) ctx.Fail("output size differs from input size");
  KernelInfo info{[n](const KernelIO& io) {
    if (io.out[0] != io.in[0] && n)
      CudaCheck(cudaMemcpyAsync(io.out[0], io.in[0], n, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(io.stream)),
                "device copy");
  }};
  if (ctx.in(0).dtype == ctx.out(0).dtype) {
    info.inplace.push_back({0, 0});
    info.views.push_back({0, 0});
  }
  return info;
}

void RegisterCudaCopyKernels(KernelRegistry& r) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) r.Register(op, DeviceCopyKernel);
}

}  // namespace ot
