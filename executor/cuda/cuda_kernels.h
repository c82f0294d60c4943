// The CUDA backend's kernel factories (built only with CUDA): each adapts an IR node to a launcher of cuda_ops/
// over device buffers and KernelIO::stream, as executor/kernels/ does for cpu_ops/. Elementwise and row-reduction
// ops have no factory of their own: GeneratedKernel lowers the single node to a cluster program
// (passes/cluster_program_builder.h) and runs its NVRTC-compiled kernel, the same code path as a fused cluster
// (ai.onnxtrain.FusedElementwise), so every op the fusion table lowers runs on the GPU with the CPU's formulas.
#pragma once
#include <optional>
#include <string>

#include "executor/kernel_registry.h"

namespace ot {

// Throws Error("CUDA: <what>: <message>") unless `status` (a cudaError_t) is success.
void CudaCheck(int status, const char* what);

// The kernel of a node the fusion table lowers (nullopt when it does not lower, e.g. an opaque op).
std::optional<KernelInfo> GeneratedKernel(const KernelContext& ctx);

void RegisterCudaCopyKernels(CpuKernelRegistry& r);    // executor/cuda/kernels_copy.cc
void RegisterCudaFusedKernels(CpuKernelRegistry& r);   // executor/cuda/kernels_generated.cc
void RegisterCudaLinalgKernels(CpuKernelRegistry& r);  // executor/cuda/kernels_linalg.cc
void RegisterCudaRowKernels(CpuKernelRegistry& r);     // executor/cuda/kernels_rows.cc
void RegisterCudaOptimizerKernels(CpuKernelRegistry& r);  // executor/cuda/kernels_optim.cc
void RegisterCudaDataKernels(CpuKernelRegistry& r);    // executor/cuda/kernels_data.cc

}  // namespace ot
