// The float32 path of cpu_ops/rnn.h's RNN, GRU and LSTM, built on oneDNN GEMMs: the same contract (every option,
// per-sequence lengths, both layouts) and the same math as RnnForward / RnnBackward, laid out for speed:
//   forward, per direction: one GEMM X W^T for every step and sequence at once, then per step one GEMM of the batch's
//     states h R^T (GRU without linear_before_reset: the z and r rows, then (r * h) R_h^T) and the gates of every
//     sequence (sigmoid, tanh from kernel_common/vec_math.h);
//   backward: the forward again, keeping each step's states and gate activations (the tape), then newest step first
//     the gate gradients of the batch and one GEMM dpre R for the previous state's gradient; after the last step
//     three GEMMs give dX (both directions summed), dW and dR over every step at once, and column sums the biases.
// A sequence past its length keeps its state (the GEMMs run over the whole batch; its rows are masked). Sums over
// steps and sequences are in a fixed order: the same result on every run. Memory: X W^T is computed into the tape's
// activation rows and each step overwrites the row it reads; the backward overwrites them again with the gate
// gradients, so the tape is the backward's largest buffer.
#pragma once
#include <cstdint>
#include <memory>

#include "cpu_ops/dnnl_util.h"
#include "cpu_ops/rnn.h"
#include "cpu_ops/rnn_kernel.h"

namespace ot::cpu {

class RnnGemm final : public RnnKernel {
 public:
  // Creates the GEMM primitives for the spec's sizes (once per plan). `io`: the element type of X, Y, dY and dX --
  // float32, or float16/bfloat16 under mixed precision (converted a chunk of rows, or a step's rows, at a time; every
  // other operand is float32, the caller converting those small ones).
  explicit RnnGemm(const RnnSpec& s, DnnType io = DnnType::kF32);
  ~RnnGemm() override;
  // RnnForward's contract for float32. `workspace`: forward_workspace_bytes() of scratch, 64-byte aligned (null: the
  // call allocates its own).
  void Forward(const void* x, const float* w, const float* r, const float* b, const int32_t* lens, const float* h0,
               const float* c0, const float* p, void* y, float* y_h, float* y_c,
               void* workspace = nullptr) const override;
  // RnnBackward's contract for float32; `workspace`: backward_workspace_bytes().
  void Backward(const void* x, const float* w, const float* r, const float* b, const int32_t* lens, const float* h0,
                const float* c0, const float* p, const void* dy, const float* dy_h, const float* dy_c, void* dx,
                float* dw, float* dr, float* db, float* dh0, float* dc0, float* dp,
                void* workspace = nullptr) const override;
  // The scratch memory of one call: X W^T of a direction and the batch's states (forward); the tape -- activations,
  // states, cell states -- and the step buffers (backward). The kernels declare it to the memory plan.
  size_t forward_workspace_bytes() const override;
  size_t backward_workspace_bytes() const override;
  bool exclusive() const override { return false; }
  const char* name() const override { return "gemm"; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ot::cpu
