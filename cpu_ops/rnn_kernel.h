// The fast implementations of cpu_ops/rnn.h's RnnForward / RnnBackward contract for float32 (and half I/O under
// mixed precision) behind one interface, and the choice between them for a node:
//   RnnGemm (cpu_ops/rnn_gemm.h): our kernels around oneDNN GEMMs; every option ONNX defines.
//   RnnPrimitive (cpu_ops/rnn_dnnl.h): oneDNN's own RNN, GRU and LSTM primitives, where a node matches them.
// MakeRnnKernel takes the GEMM path unless asked for the primitives: they shorten a bidirectional node's step (its
// directions side by side) but need ~6x the memory (bench/rnn_ab.py). The environment variable
// ONNXTRAIN_CPU_RNN=gemm|primitive chooses (`primitive` still falls back where the node does not match); read once.
#pragma once
#include <cstdint>
#include <memory>

#include "cpu_ops/dnnl_util.h"
#include "cpu_ops/rnn.h"

namespace ot::cpu {

class RnnKernel {
 public:
  virtual ~RnnKernel() = default;
  // RnnForward's contract for float32 (x, y: the I/O type). `workspace`: forward_workspace_bytes() of scratch,
  // 64-byte aligned (null: the call allocates its own).
  virtual void Forward(const void* x, const float* w, const float* r, const float* b, const int32_t* lens,
                       const float* h0, const float* c0, const float* p, void* y, float* y_h, float* y_c,
                       void* workspace = nullptr) const = 0;
  // RnnBackward's contract for float32 (x, dy, dx: the I/O type); `workspace`: backward_workspace_bytes().
  virtual void Backward(const void* x, const float* w, const float* r, const float* b, const int32_t* lens,
                        const float* h0, const float* c0, const float* p, const void* dy, const float* dy_h,
                        const float* dy_c, void* dx, float* dw, float* dr, float* db, float* dh0, float* dc0, float* dp,
                        void* workspace = nullptr) const = 0;
  // The scratch memory of one call, declared to the memory plan.
  virtual size_t forward_workspace_bytes() const = 0;
  virtual size_t backward_workspace_bytes() const = 0;
  // True when a call runs one oneDNN OpenMP team over the whole thread budget (the executor then runs it alone).
  virtual bool exclusive() const = 0;
  // "gemm" or "primitive" (for profiles and tests).
  virtual const char* name() const = 0;
};

enum class RnnPath { kAuto, kGemm, kPrimitive };
RnnPath GetRnnPath();

// The kernel for a node of spec `s` with I/O type `io`; `lens`: the node has sequence_lens, `peepholes`: an LSTM
// node has P. `path` kAuto: GetRnnPath()'s choice.
std::unique_ptr<RnnKernel> MakeRnnKernel(const RnnSpec& s, DnnType io, bool lens, bool peepholes,
                                         RnnPath path = RnnPath::kAuto);

}  // namespace ot::cpu
