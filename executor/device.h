// Where a plan runs: the CPU (the default; no backend object) or a CUDA device. A DeviceBackend owns the device's
// memory and its streams and makes the device's kernels; the Plan (executor/plan.h) keeps its arena, the state and
// constants it reads, the fed inputs and the outputs in that memory and issues the kernels on those streams, with
// events between them (executor/stream_assign.h). The CUDA
// backend is built only with the CUDA toolkit (executor/cuda/); without it OpenDevice("cuda") throws, and "auto"
// means the CPU.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "executor/kernel_registry.h"

namespace ot {

// --tf32 / --deterministic: how a device computes (the CPU backend is always exact fp32 and deterministic).
struct DeviceOptions {
  bool tf32 = false;           // float32 GEMMs may use TF32 tensor cores (else exact fp32, cuBLASLt COMPUTE_32F)
  bool deterministic = false;  // GEMM algorithms without split-K reductions (our own kernels never use atomics)
  bool graphs = true;          // replay a plan's steady-state run as a captured graph (--no-cuda-graph: off)
  // --streams N: the streams a plan's kernels are spread over (independent branches overlap); 1 = every kernel on
  // stream 0 in plan order. A device that has fewer (DeviceBackend::MaxStreams) uses what it has.
  int streams = 2;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  const DeviceOptions& options() const { return options_; }
  void set_options(const DeviceOptions& o) { options_ = o; }
  virtual std::string name() const = 0;  // "cuda:0 (NVIDIA H100 80GB HBM3)"
  // The device kernel of ctx.node, or nullopt when the device has none for this op (the plan then names the op).
  // Throws UnsupportedError naming the node for a configuration of a supported op that the device cannot run.
  virtual std::optional<KernelInfo> MakeKernel(const KernelContext& ctx) const = 0;
  // Device memory (256-byte aligned); throws Error naming `what`, the size and the free memory when it is short.
  virtual void* Alloc(size_t bytes, const std::string& what) = 0;
  virtual void Free(void* p) = 0;
  // Device memory free now, in bytes; 0 when the device cannot tell.
  virtual int64_t FreeMemory() const { return 0; }
  // Copies queued on the device's stream, in order with its kernels; host memory must stay valid until the next
  // Synchronize.
  virtual void CopyToDevice(void* dst, const void* src, size_t n) = 0;
  virtual void CopyToHost(void* dst, const void* src, size_t n) = 0;
  virtual void CopyOnDevice(void* dst, const void* src, size_t n) = 0;
  // Waits for everything queued; throws Error with the device's message when a kernel failed.
  virtual void Synchronize() = 0;
  virtual void* stream() = 0;  // cudaStream_t: stream 0, where the copies above go

  // Streams and events (multi-stream issue, executor/stream_assign.h). Streams are numbered: 0 is stream(), the
  // origin (copies, forks and joins); a plan issues on 0 .. min(options().streams, MaxStreams())-1. Each stream runs
  // its work in issue order; work on two streams is ordered only by events: RecordEvent(e, s) marks the point after
  // everything issued on s so far, WaitEvent(t, e) makes the work issued on t after it wait for the latest record
  // of e made before the call (CUDA's cudaEventRecord / cudaStreamWaitEvent). Synchronize waits for every stream.
  // Events are made once and recorded again each run. While capturing (BeginCapture on stream 0), another stream
  // joins the capture by waiting for an event recorded on a captured stream, and must be joined back (stream 0
  // waits for an event recorded on it after its last captured work) before EndCapture.
  // The defaults are a single-stream device: everything on stream 0, in issue order, so events order nothing.
  virtual int MaxStreams() const { return 1; }
  virtual void* StreamHandle(int s) { return s == 0 ? stream() : nullptr; }  // cudaStream_t for KernelIO::stream
  virtual void* CreateEvent() { return nullptr; }
  virtual void DestroyEvent(void* /*event*/) {}
  virtual void RecordEvent(void* /*event*/, int /*stream*/) {}
  virtual void WaitEvent(int /*stream*/, void* /*event*/) {}
  // The host waits until the latest record of `event` has run (e.g. before it overwrites memory a copy reads).
  virtual void SynchronizeEvent(void* /*event*/) { Synchronize(); }

  // Batch copies beside the step (executor/batch_stager.h). Pinned host memory: page-locked, so a copy from it runs
  // asynchronously while the host goes on (plain host memory by default). CopyStream(): the stream such copies go
  // on (its own on CUDA, so a batch's upload overlaps the previous step; 0 by default). CopyToDeviceOn queues a
  // copy on stream `s`; `src` must stay unchanged until that copy has run (an event recorded after it tells when).
  virtual void* AllocHost(size_t bytes);
  virtual void FreeHost(void* p);
  virtual int CopyStream() const { return 0; }
  virtual void CopyToDeviceOn(int s, void* dst, const void* src, size_t n) {
    (void)s;
    CopyToDevice(dst, src, n);
  }
  virtual void CopyOnDeviceOn(int s, void* dst, const void* src, size_t n) {
    (void)s;
    CopyOnDevice(dst, src, n);
  }
  // Graphs (CUDA graphs): between BeginCapture and EndCapture the work issued on the stream -- kernels and device
  // copies -- is recorded instead of run; EndCapture returns the recorded run, ready to Replay on the stream as
  // often as wanted (the same kernels on the same buffers), or null when the capture failed (something in the
  // run cannot be recorded). Then nothing of the captured work has run: the caller runs it again directly.
  // A device without graphs returns false from SupportsGraphs and is never asked to capture.
  virtual bool SupportsGraphs() const { return false; }
  virtual void BeginCapture() {}
  virtual void* EndCapture() { return nullptr; }
  virtual void Replay(void* /*graph*/) {}
  virtual void ReleaseGraph(void* /*graph*/) {}
  // Bytes of device memory taken through Alloc now and at most so far (plans' arenas, state, constants, inputs,
  // outputs; the libraries' own handles and the kernels' small flags are not counted).
  virtual int64_t allocated_bytes() const { return 0; }
  virtual int64_t peak_allocated_bytes() const { return 0; }

 private:
  DeviceOptions options_;
};

// "cpu" -> null (the CPU backend); "cuda" / "cuda:N" -> that GPU (throws Error when the build has no CUDA backend
// or there is no such GPU); "auto" -> CUDA device 0 when one is present, else null.
std::shared_ptr<DeviceBackend> OpenDevice(const std::string& spec, const DeviceOptions& options = {});
// CUDA devices usable now (0 without a GPU, a driver or a CUDA build).
int CudaDeviceCount();
// Whether the CUDA backend has a kernel for (domain, op): one of its own, or NVRTC-generated code for an op with a
// cluster lowering (which may still refuse an attribute or dtype when the plan is made). Answers without a GPU;
// false when this build has no CUDA backend.
bool CudaHasKernel(const std::string& domain, const std::string& op_type);
// Whether this build has the CUDA backend (nvcc found at build time).
bool CudaBackendBuilt();

}  // namespace ot
