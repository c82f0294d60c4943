// Convolution backward (the gradients of cpu_ops/conv.h's forward convolution, ONNX layouts):
//   data:    dX [N, C_in, in...]  from dY [N, C_out, out...] and W [C_out, C_in/group, k...]
//   weights: dW [C_out, C_in/group, k...] from dY and X
// f32 (and bf16 where oneDNN has a native kernel) through oneDNN's convolution_backward_data /
// convolution_backward_weights (primitives created once, with a forward_training primitive_desc as hint,
// user-managed scratchpad owned by the object); any T with loops.
// The spec is the forward convolution's (transpose = false).
#pragma once
#include <memory>
#include <string>

#include "cpu_ops/conv.h"

namespace ot::cpu {

class DnnlConvBackward {
 public:
  enum class Kind { kData, kWeights };
  DnnlConvBackward(const ConvSpec& spec, Kind kind);
  ~DnnlConvBackward();
  // kData: a = W, out = dX. kWeights: a = X, out = dW. Buffers of spec.type: f32, or bf16 where native().
  void Run(const void* dy, const void* a, void* out) const;
  // A primitive of spec.type exists (f32: always; bf16: where oneDNN has a jit kernel for it, and
  // ONNXTRAIN_CPU_HALF_GEMM is not f32; f16: never). Where false, Run must not be called: the caller runs an f32
  // object on widened operands.
  bool native() const;
  // A large batch in oneDNN's own layouts runs in blocks of this many images (~1 MiB of dX, or of dY for kWeights,
  // per thread), so the reorders work in cache (as DnnlConv); kWeights adds the blocks' dW in order. 0: the batch in
  // one call.
  int64_t block_images() const;
  // oneDNN's implementation name ("jit_dw:avx2", "x64:gemm:jit", ...); "" where no primitive was made.
  std::string impl_name() const;

 private:
  struct Impl;
  ConvSpec spec_;
  Kind kind_;
  std::shared_ptr<Impl> impl_;
};

// Loops, accumulated in double; parallel over input channels (data) or output channels (weights).
template <typename T>
void NaiveConvGradData(const ConvSpec& spec, const T* dy, const T* w, T* dx);
template <typename T>
void NaiveConvGradWeight(const ConvSpec& spec, const T* dy, const T* x, T* dw);

}  // namespace ot::cpu
