// CPU kernel factories, one per op, adapting an IR node to the plain kernels of cpu_ops/.
// A factory runs once when a plan is made: it reads the node's attributes, the concrete input/output dtypes and
// dims, and any input values known at plan time, and returns a closure over raw buffers that the executor calls
// every step. Unsupported attribute values or dtypes throw UnsupportedError naming the node.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "graph/graph.h"

namespace ot {

class DeviceBackend;  // executor/device.h

struct TensorDesc {
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;
  bool present = false;
  int64_t numel() const { return NumElements(dims); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * SizeOf(dtype); }
};

struct KernelContext {
  const Node& node;
  std::vector<TensorDesc> inputs;
  std::vector<const Tensor*> input_values;  // known at plan time, else nullptr
  std::vector<TensorDesc> outputs;          // concrete, from the registry's inference
  uint64_t seed = 0;                        // for random ops (Dropout): fixed per node and run seed
  const Graph* graph = nullptr;             // the graph of `node` (device kernels that lower a node need it)
  const DeviceBackend* device = nullptr;    // the device the kernel runs on (its options); null on the CPU

  bool has_input(int i) const { return i < static_cast<int>(inputs.size()) && inputs[i].present; }
  bool has_output(int i) const { return i < static_cast<int>(outputs.size()) && outputs[i].present; }
  const TensorDesc& in(int i) const;
  const TensorDesc& out(int i) const;
  [[noreturn]] void Fail(const std::string& msg) const { throw Error(node.Describe() + ": " + msg); }
  [[noreturn]] void Unsupported(const std::string& msg) const { throw UnsupportedError(node.Describe() + ": " + msg); }
  // Throws UnsupportedError unless input i's dtype is one of `allowed`.
  void RequireDType(int i, std::initializer_list<DataType> allowed) const;
};

// Buffers of one kernel call: in[i] is null for an absent input (also for optional inputs past the node's input
// count: the arrays have at least 16 slots); every present output has a buffer of
// out(i).nbytes() (never null, even for empty tensors). The kernel must write every output element.
struct KernelIO {
  const void* const* in;
  void* const* out;
  // The executor's run counter (Executor::run_counter): random kernels key their draws on it, so a run's random
  // numbers depend on (seed, node, run) only and a resumed training run draws what the uninterrupted one did.
  uint64_t run = 0;
  // KernelInfo::workspace_bytes of scratch memory (64-byte aligned), private to this call; null when the kernel
  // declared none, or when it is called outside a plan (tests, folding without one): a kernel that declares a
  // workspace must then allocate its own.
  void* workspace = nullptr;
  // Device kernels: the stream (cudaStream_t) to issue on, in order with the plan's other work; null on the CPU.
  // Buffers are then device memory.
  void* stream = nullptr;
  template <typename T>
  const T* In(int i) const {
    return static_cast<const T*>(in[i]);
  }
  template <typename T>
  T* Out(int i) const {
    return static_cast<T*>(out[i]);
  }
};

using Kernel = std::function<void(const KernelIO&)>;

struct KernelInfo {
  Kernel fn;
  // True for kernels whose library runs its own OpenMP team (oneDNN): the executor runs them with no other
  // kernel beside them, so `--threads N` is never exceeded.
  bool exclusive = false;
  // True when the outputs are random draws (Dropout in training mode with ratio > 0): a reference computed
  // with another RNG cannot match, so the conformance runner reports such a mismatch as a skip.
  bool random = false;
  // Scratch memory the kernel needs while it runs (KernelIO::workspace): the memory plan places it in the arena
  // for this kernel's step only, so every byte a step uses is planned. Allocations a library makes on its own
  // are declared here too where the library lets us hand it the memory (oneDNN's user scratchpad).
  size_t workspace_bytes = 0;
  // Heap the library allocates on its own during a call and will not take from us (oneDNN's memory objects and
  // its GEMM driver's per-thread blocks): declared, so the measured peak of a step can be held against the plan
  // plus what is declared outside it; not placed in the arena.
  size_t heap_bytes = 0;
  // (output index, input index) pairs the kernel may run in place: it reads element i of that input before it
  // writes element i of the output (and no other element of the input after that), and the input has the
  // output's dtype and element count. The memory plan takes a pair only where the input dies at this kernel.
  std::vector<std::pair<int, int>> inplace{};
  // (output index, input index) pairs where the output is the input's bytes, unchanged (Reshape-like ops): the
  // memory plan may give the output the input's memory even where the input stays live (a view), and the kernel
  // then copies nothing (it must check out == in). Neither is written again while the other is read.
  std::vector<std::pair<int, int>> views{};
  // Floating-point operations of one call where they are the point of the kernel (GEMMs: 2 m n k per matrix), so
  // a profile can report the rate its time gives; 0 for the rest.
  double flops = 0;
  // Host work after every run of the plan, once the device has finished it (a device plan's run ends with a
  // synchronisation): reads what a kernel left in pinned host memory -- a device flag raised for a bad label or
  // index -- and throws Error naming it. The kernel function itself must not depend on such host state: a device
  // plan may replay its steady-state run as a captured graph, which issues the recorded work without calling fn.
  std::function<void()> after_run{};
};

// Adds (out, in) to info.inplace when input `in` has output `out`'s dtype and dims (the caller vouches that its
// loop is element-wise in the sense of KernelInfo::inplace).
inline void AllowInPlace(KernelInfo& info, const KernelContext& ctx, int out, int in) {
  if (!ctx.has_input(in) || !ctx.has_output(out)) return;
  if (ctx.in(in).dtype != ctx.out(out).dtype || ctx.in(in).dims != ctx.out(out).dims) return;
  info.inplace.push_back({out, in});
}

using KernelFactory = std::function<KernelInfo(const KernelContext&)>;

// Kernel factories by (domain, op type), one registry per backend: Cpu() here, the CUDA backend's own in
// executor/cuda/cuda_backend.cc (CudaRegistry()), each filled by its backend's registration functions.
class KernelRegistry {
 public:
  static const KernelRegistry& Cpu();
  void Register(const std::string& op_type, KernelFactory f, const std::string& domain = "");
  const KernelFactory* Find(const std::string& domain, const std::string& op_type) const;

 private:
  std::map<std::pair<std::string, std::string>, KernelFactory> factories_;
};

// One registration function per family (executor/kernels/<family>.cc).
void RegisterElementwiseKernels(KernelRegistry& r);
void RegisterReductionKernels(KernelRegistry& r);
void RegisterNormKernels(KernelRegistry& r);
void RegisterLinalgKernels(KernelRegistry& r);
void RegisterShapeKernels(KernelRegistry& r);
void RegisterInternalKernels(KernelRegistry& r);
void RegisterNormGradKernels(KernelRegistry& r);   // executor/kernels/internal_norm.cc
void RegisterConvGradKernels(KernelRegistry& r);   // executor/kernels/internal_conv.cc
void RegisterOptimizerKernels(KernelRegistry& r);  // executor/kernels/internal_optim.cc

}  // namespace ot
