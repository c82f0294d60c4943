// The CUDA DeviceBackend (executor/device.h): a set of streams per backend (kMaxStreams for a plan's kernels, stream 0
// the origin, plus one for batch copies), events between them, plain cudaMalloc'd memory (the plan asks for its
// arena once), pinned host memory for batch staging, kernels from the CUDA factories of executor/cuda/ (or, for ops
// the fusion table lowers, a generated kernel), and CUDA graphs of a plan's steady-state run by stream capture.
//
// Library state and several streams (the kernels of one plan run on up to kMaxStreams streams at once):
// - cuBLASLt: one GemmRunner per process behind a mutex (kernels_linalg.cc); cublasLtMatmul takes the stream and
//   the workspace per call, and the workspace is the step's own region of the arena (KernelInfo::workspace_bytes),
//   which the memory plan's dependency edges keep from being reused while the GEMM may still run. No state is
//   bound to a stream, so GEMMs may go to any stream.
// - cuDNN: one handle per device, leased for each call under a lock and bound to that call's stream
//   (cudnn_util.h: cudnnSetStream inside the lease); workspaces come from the arena as for GEMMs. Issue is
//   asynchronous, so a later lease rebinding the handle to another stream does not affect work already queued.
// - NVRTC kernels, our own kernels, device flags: launched on KernelIO::stream, no per-stream state.
// So every kernel may run on any stream; the events of executor/stream_assign.h carry all ordering.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>

#include "executor/cuda/cuda_kernels.h"
#include "executor/device.h"
#include "graph/error.h"
#include "graph/op_registry.h"

namespace ot {

void CudaCheck(int status, const char* what) {
  const cudaError_t e = static_cast<cudaError_t>(status);
  if (e == cudaSuccess) return;
  throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

int CudaDeviceCountImpl() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

namespace {

const KernelRegistry& CudaRegistry() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    RegisterCudaCopyKernels(*reg);
    RegisterCudaFusedKernels(*reg);
    RegisterCudaLinalgKernels(*reg);
    RegisterCudaRowKernels(*reg);
    RegisterCudaOptimizerKernels(*reg);
    RegisterCudaDataKernels(*reg);
    RegisterCudaConvKernels(*reg);
    RegisterCudaPoolKernels(*reg);
    RegisterCudaBatchNormKernels(*reg);
    RegisterCudaCtcKernels(*reg);
    RegisterCudaRecurrentKernels(*reg);
    RegisterCudaCollectiveKernels(*reg);
    return reg;
  }();
  return *r;
}

std::string Bytes(size_t n) {
  char b[64];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(n) / (1 << 20));
  return b;
}

class CudaBackend final : public DeviceBackend {
 public:
  explicit CudaBackend(int index) : index_(index) {
    CudaCheck(cudaSetDevice(index), "cudaSetDevice");
    cudaDeviceProp prop{};
    CudaCheck(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    name_ = "cuda:" + std::to_string(index) + " (" + prop.name + ")";
    for (cudaStream_t& s : streams_)
      CudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    stream_ = streams_[0];
  }
  ~CudaBackend() override {
    for (cudaStream_t s : streams_)
      if (s) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
      }
  }
  std::string name() const override { return name_; }
  std::optional<KernelInfo> MakeKernel(const KernelContext& ctx) const override {
    cudaSetDevice(index_);
    if (const KernelFactory* f = CudaRegistry().Find(ctx.node.domain, ctx.node.op_type)) return (*f)(ctx);
    return GeneratedKernel(ctx);
  }
  int64_t FreeMemory() const override {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return static_cast<int64_t>(free_b);
  }
  void* Alloc(size_t bytes, const std::string& what) override {
    void* p = nullptr;
    if (bytes == 0) bytes = 256;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw Error("out of GPU memory on " + name_ + ": " + what + " needs " + Bytes(bytes) + ", " + Bytes(free_b) +
                  " of " + Bytes(total_b) + " free (" + cudaGetErrorString(e) + "); try a smaller --batch, --amp or " +
                  "--memory-budget");
    }
    std::lock_guard<std::mutex> l(mu_);
    sizes_[p] = bytes;
    allocated_ += static_cast<int64_t>(bytes);
    peak_ = std::max(peak_, allocated_);
    return p;
  }
  void Free(void* p) override {
    if (!p) return;
    cudaFree(p);
    std::lock_guard<std::mutex> l(mu_);
    auto it = sizes_.find(p);
    if (it == sizes_.end()) return;
    allocated_ -= static_cast<int64_t>(it->second);
    sizes_.erase(it);
  }
  int64_t allocated_bytes() const override {
    std::lock_guard<std::mutex> l(mu_);
    return allocated_;
  }
  int64_t peak_allocated_bytes() const override {
    std::lock_guard<std::mutex> l(mu_);
    return peak_;
  }
  void CopyToDevice(void* dst, const void* src, size_t n) override {
    if (n) CudaCheck(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_), "copy to the GPU");
  }
  void CopyToHost(void* dst, const void* src, size_t n) override {
    if (n) CudaCheck(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_), "copy from the GPU");
  }
  void CopyOnDevice(void* dst, const void* src, size_t n) override {
    if (n && dst != src) CudaCheck(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream_), "copy on the GPU");
  }
  // Every stream: a plan's kernels may have failed on any of them, and its results must be complete.
  void Synchronize() override {
    for (cudaStream_t s : streams_) CudaCheck(cudaStreamSynchronize(s), "a kernel of the step failed");
  }
  void* stream() override { return stream_; }
  int MaxStreams() const override { return kMaxStreams; }
  void* StreamHandle(int s) override { return At(s); }
  void* CreateEvent() override {
    cudaEvent_t e = nullptr;
    CudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    return e;
  }
  void DestroyEvent(void* e) override {
    if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  }
  void RecordEvent(void* e, int s) override {
    CudaCheck(cudaEventRecord(static_cast<cudaEvent_t>(e), At(s)), "cudaEventRecord");
  }
  void WaitEvent(int s, void* e) override {
    CudaCheck(cudaStreamWaitEvent(At(s), static_cast<cudaEvent_t>(e), 0), "cudaStreamWaitEvent");
  }
  void SynchronizeEvent(void* e) override {
    CudaCheck(cudaEventSynchronize(static_cast<cudaEvent_t>(e)), "a batch copy failed");
  }
  void* AllocHost(size_t bytes) override {
    void* p = nullptr;
    CudaCheck(cudaMallocHost(&p, std::max<size_t>(bytes, 1)), "pinned host memory for batch staging");
    return p;
  }
  void FreeHost(void* p) override {
    if (p) cudaFreeHost(p);
  }
  int CopyStream() const override { return kMaxStreams; }
  void CopyToDeviceOn(int s, void* dst, const void* src, size_t n) override {
    if (n) CudaCheck(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, At(s)), "copy to the GPU");
  }
  void CopyOnDeviceOn(int s, void* dst, const void* src, size_t n) override {
    if (n && dst != src) CudaCheck(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, At(s)), "copy on the GPU");
  }
  // CUDA graphs by stream capture. Thread-local mode: only this thread's calls that cannot be recorded (a
  // synchronous copy, a stream synchronisation) invalidate the capture; other threads (the data loader) go on.
  bool SupportsGraphs() const override { return true; }
  // The plan forks the other streams into the capture (they wait for an event recorded on stream 0 after
  // BeginCapture) and joins them back (stream 0 waits for an event recorded on each) before EndCapture; a stream
  // left unjoined makes EndCapture fail (cudaErrorStreamCaptureUnjoined), and the plan then runs directly.
  void BeginCapture() override {
    CudaCheck(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "begin graph capture");
  }
  void* EndCapture() override {
    cudaGraph_t g = nullptr;
    cudaError_t e = cudaStreamEndCapture(stream_, &g);
    if (e != cudaSuccess || !g) {
      cudaGetLastError();  // an invalidated capture: clear the error, the caller runs the work directly
      if (g) cudaGraphDestroy(g);
      return nullptr;
    }
    cudaGraphExec_t x = nullptr;
    e = cudaGraphInstantiate(&x, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return x;
  }
  void Replay(void* graph) override {
    CudaCheck(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream_), "graph launch");
  }
  void ReleaseGraph(void* graph) override {
    if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }

 private:
  // Streams for a plan's kernels (--streams is capped here), and the copy stream after them.
  static constexpr int kMaxStreams = 8;
  cudaStream_t At(int s) const {
    if (s < 0 || s > kMaxStreams) throw Error("CUDA: no stream " + std::to_string(s));
    return streams_[static_cast<size_t>(s)];
  }
  int index_ = 0;
  std::string name_;
  std::array<cudaStream_t, kMaxStreams + 1> streams_{};
  cudaStream_t stream_ = nullptr;
  mutable std::mutex mu_;
  std::map<void*, size_t> sizes_;
  int64_t allocated_ = 0, peak_ = 0;
};

}  // namespace

std::shared_ptr<DeviceBackend> OpenCudaDevice(int index) { return std::make_shared<CudaBackend>(index); }

bool CudaHasKernelImpl(const std::string& domain, const std::string& op_type) {
  if (CudaRegistry().Find(domain, op_type)) return true;
  const OpSchema* s = OpRegistry::Global().Find(domain, op_type);
  return s && s->lower != nullptr;  // GeneratedKernel: the op as a one-node cluster
}

}  // namespace ot
