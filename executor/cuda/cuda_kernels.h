// The CUDA backend's kernel factories (built only with CUDA): each adapts an IR node to a launcher of cuda_ops/
// over device buffers and KernelIO::stream, as executor/kernels/ does for cpu_ops/. Elementwise and row-reduction
// ops have no factory of their own: GeneratedKernel lowers the single node to a cluster program
// (passes/cluster_program_builder.h) and runs its NVRTC-compiled kernel, the same code path as a fused cluster
// (ai.onnxtrain.FusedElementwise), so every op the fusion table lowers runs on the GPU with the CPU's formulas.
#pragma once
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cuda_ops/row_kernels.h"  // cuda::FloatType
#include "executor/kernel_registry.h"
#include "graph/error.h"

namespace ot {

// cuda_ops' storage type of a float dtype; UnsupportedError naming `what` and the dtype for any other.
inline cuda::FloatType DeviceFloatType(const KernelContext& ctx, DataType t, const std::string& what) {
  switch (t) {
    case DataType::kFloat32:
      return cuda::FloatType::kF32;
    case DataType::kFloat16:
      return cuda::FloatType::kF16;
    case DataType::kBFloat16:
      return cuda::FloatType::kBF16;
    default:
      ctx.Unsupported(what + " of " + DataTypeName(t) + " on the GPU");
  }
}

// The product of d[from, to).
inline int64_t DimsProduct(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

// A kernel's info with only its function set (the other KernelInfo members keep their defaults).
inline KernelInfo MakeInfo(Kernel fn) {
  KernelInfo info;
  info.fn = std::move(fn);
  return info;
}

// Runs a cuda_ops launcher, turning its argument and launch errors (std::exception) into errors naming the node.
template <typename F>
void RunLauncher(const std::string& node, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    throw Error(node.empty() ? std::string(e.what()) : node + ": " + e.what());
  }
}

// Throws Error("CUDA: <what>: <message>") unless `status` (a cudaError_t) is success.
void CudaCheck(int status, const char* what);

// Output 0 holds input 0's bytes: a view or in place where the memory plan allows, else one device copy
// (executor/cuda/kernels_copy.cc).
KernelInfo DeviceCopyKernel(const KernelContext& ctx);

// The kernel of a node the fusion table lowers (nullopt when it does not lower, e.g. an opaque op).
std::optional<KernelInfo> GeneratedKernel(const KernelContext& ctx);

void RegisterCudaCopyKernels(KernelRegistry& r);       // executor/cuda/kernels_copy.cc
void RegisterCudaFusedKernels(KernelRegistry& r);      // executor/cuda/kernels_generated.cc
void RegisterCudaLinalgKernels(KernelRegistry& r);     // executor/cuda/kernels_linalg.cc
void RegisterCudaRowKernels(KernelRegistry& r);        // executor/cuda/kernels_rows.cc
void RegisterCudaOptimizerKernels(KernelRegistry& r);  // executor/cuda/kernels_optim.cc
void RegisterCudaDataKernels(KernelRegistry& r);       // executor/cuda/kernels_data.cc (also Expand, Tile)
void RegisterCudaConvKernels(KernelRegistry& r);  // kernels_conv.cc (Conv, its gradients, ConvTranspose, ReduceSum)
void RegisterCudaPoolKernels(KernelRegistry& r);  // executor/cuda/kernels_conv_pool.cc (cuDNN pooling, LpPool)
void RegisterCudaBatchNormKernels(KernelRegistry& r);   // executor/cuda/kernels_conv_norm.cc
void RegisterCudaCtcKernels(KernelRegistry& r);         // executor/cuda/kernels_ctc.cc (CTCLoss, CTCLossGrad)
void RegisterCudaRecurrentKernels(KernelRegistry& r);   // kernels_recurrent.cc (RNN, GRU, LSTM, RecurrentGrad)
void RegisterCudaCollectiveKernels(KernelRegistry& r);  // kernels_collective.cc (data-parallel's, on NCCL)

}  // namespace ot
