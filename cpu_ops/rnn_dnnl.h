// RNN, GRU and LSTM on oneDNN's RNN primitives (vanilla_rnn with tanh, gru, lbr_gru for linear_before_reset 1,
// lstm with or without peepholes), float32, for the nodes they match: no sequence_lens (oneDNN has no per-sequence
// lengths), no clip, no input_forget, layout 0 (time-major), every size > 0. Everything else runs on the GEMM path
// (cpu_ops/rnn_gemm.h); cpu_ops/rnn_kernel.h chooses.
//
// ONNX's operands are mapped into oneDNN's at each call: W, R into ldigo with oneDNN's gate order (LSTM i, f, c, o
// from ONNX's i, o, f, c; GRU's z, r, h as they are), then reordered into the layout the primitive asks for; B's two
// halves summed per gate (lbr_gru: the candidate's R bias is oneDNN's fourth bias gate); P's i, o, f to i, f, o. Each
// direction is a unidirectional primitive of its own, the two of a bidirectional node run side by side, each on one
// thread (oneDNN's RNNs make a short parallel region per step: with OpenMP's passive wait a team of 2 spent most of
// its time waking up); a direction's [T, N, H] output is copied into its rows of ONNX's [T, 2, N, H], the states are
// ONNX's own [dirs, N, H] slices, the two directions' dX summed. The backward runs the training forward (oneDNN's
// workspace keeps its gates) and then oneDNN's backward, and maps the gradients back. Every buffer of a call,
// oneDNN's scratchpad and workspace included, comes from the kernel's declared workspace.
#pragma once
#include <memory>
#include <vector>

#include "cpu_ops/rnn_kernel.h"

namespace ot::cpu {

class RnnPrimitive final : public RnnKernel {
 public:
  // Null when the node does not match or oneDNN has only a reference implementation for it.
  static std::unique_ptr<RnnPrimitive> Create(const RnnSpec& s, DnnType io, bool lens, bool peepholes);
  ~RnnPrimitive() override;

  void Forward(const void* x, const float* w, const float* r, const float* b, const int32_t* lens, const float* h0,
               const float* c0, const float* p, void* y, float* y_h, float* y_c,
               void* workspace = nullptr) const override;
  void Backward(const void* x, const float* w, const float* r, const float* b, const int32_t* lens, const float* h0,
                const float* c0, const float* p, const void* dy, const float* dy_h, const float* dy_c, void* dx,
                float* dw, float* dr, float* db, float* dh0, float* dc0, float* dp,
                void* workspace = nullptr) const override;
  size_t forward_workspace_bytes() const override;
  size_t backward_workspace_bytes() const override;
  bool exclusive() const override { return true; }
  const char* name() const override { return "primitive"; }

  struct Impl;

 private:
  explicit RnnPrimitive(std::vector<std::unique_ptr<Impl>> lanes);
  std::vector<std::unique_ptr<Impl>> lanes_;  // one per direction
  size_t dx_tmp_ = 0;
};

}  // namespace ot::cpu
