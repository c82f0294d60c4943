// Process-wide oneDNN state shared by the GEMM, convolution and deconvolution kernels: one CPU engine and
// stream, and the OpenMP team size oneDNN runs with (set from `--threads`).
// Kernels that call oneDNN run with no other kernel beside them (KernelInfo::exclusive), so the team size is
// the whole thread budget.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace dnnl {
struct engine;
struct stream;
}  // namespace dnnl

namespace ot::cpu {

// OpenMP threads oneDNN primitives use; defaults to the number of cores. The same setting as
// cpu_ops/threads.h's IntraOpThreads (which the executor's --threads sets).
int OmpThreads();
// n <= 0 restores the default. Takes effect at the next oneDNN call.
void SetOmpThreads(int n);

// Element types the oneDNN kernels take. Types the CPU has no oneDNN implementation for (f16/bf16 without
// AVX-512) are converted to f32 around the call, so callers never see the difference.
enum class DnnType { kF32, kF16, kBF16 };

// How f16/bf16 GEMM and convolution run. oneDNN implements them natively only with AVX512 (bf16: AVX512-BF16
// or AVX512 emulation, f16: AVX512-FP16); elsewhere it falls back to reference ("ref:") kernels that are orders
// of magnitude slower than converting the operands to f32 and running its jit f32 kernels. kAuto (the default)
// uses a native primitive only when its implementation is not a reference one. The environment variable
// ONNXTRAIN_CPU_HALF_GEMM=native|f32 forces one way (for measurements); read once.
enum class HalfGemmMode { kAuto, kNative, kF32 };
HalfGemmMode GetHalfGemmMode();
// True for oneDNN implementation names of reference (non-jit) kernels: "ref:any", "gemm:ref", "ref_..."...
bool IsReferenceImpl(const char* impl_info);
// Thrown (and caught) inside the GEMM/convolution constructors when the half primitive is a reference one.
struct NotNativeHalf {};

dnnl::engine& DnnlEngine();
// The stream every primitive runs on. oneDNN CPU streams execute synchronously in the calling thread; kernels
// are exclusive, so the shared stream is never used by two threads at once.
dnnl::stream& DnnlStream();
// Sets the calling thread's OpenMP team size (--threads): before a oneDNN execute call, and before creating a
// primitive, whose work split (and cache key) oneDNN fixes for the team size of the thread that creates it -- plans
// are built on threads still at the machine's count, and a GEMM made for 2 threads but run on 1 took up to twice as
// long (bench/fuse_ab.cc, tiny_lm at --threads 1).
void PrepareDnnlCall();
// Host bytes one oneDNN execute call allocates on its own, outside the user scratchpad we hand it, with
// `memory_args` memory objects created for the call: each memory object (~0.7 KB), and the per-thread packing
// block of its GEMM driver (one ~16.6 KB block per OpenMP thread, measured with oneDNN 2.7 on AVX2 and AVX-512
// machines by interposing malloc during a step). An upper estimate the memory plan declares, not places.
size_t DnnlCallHeapBytes(int memory_args);

// Element-wise conversions between a DnnType buffer and float (n elements).
void ToFloat(DnnType t, const void* src, float* dst, int64_t n);
void FromFloat(DnnType t, const float* src, void* dst, int64_t n);
size_t DnnTypeSize(DnnType t);

// An uninitialized float buffer for the widened copies of half operands (a std::vector would zero it first: one
// more pass over memory per call).
inline std::unique_ptr<float[]> NewFloats(int64_t n) { return std::unique_ptr<float[]>(new float[n > 0 ? n : 1]); }

}  // namespace ot::cpu
