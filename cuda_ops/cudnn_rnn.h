// ONNX's RNN (tanh), GRU and LSTM forward and backward on cuDNN's RNN API (cudnnRNNForward,
// cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8; cuDNN 9's libcudnn_adv), one layer, one or two directions,
// per-sequence lengths. cpu_ops/rnn.h is the reference and the contract; what cuDNN's cells cannot compute --
// peepholes, clip, LSTM input_forget, GRU linear_before_reset = 0, activations other than the defaults -- is for the
// caller to refuse (the desc has no field for them).
//
// Operands in ONNX's layouts (cpu::RnnSpec): layout 0 X [seq, batch, input], Y [seq, dirs, batch, hidden], states
// [dirs, batch, hidden]; layout 1 (batch_major) X [batch, seq, input], Y [batch, seq, dirs, hidden], states
// [batch, dirs, hidden]; W [dirs, G*hidden, input], R [dirs, G*hidden, hidden], B [dirs, 2*G*hidden] (W's biases,
// then R's), ONNX's gate order (LSTM i, o, f, c; GRU z, r, h). cuDNN's data are SEQ_MAJOR_UNPACKED (layout 0) or
// BATCH_MAJOR_UNPACKED (layout 1) with padded I/O and Y [.., dirs*hidden] (forward half first), states [dirs, batch,
// hidden]: layout 0's Y with two directions is transposed ([seq, batch, dirs, hidden] <-> [seq, dirs, batch,
// hidden]), layout 1's states with two directions likewise; the rest is used in place.
//
// Weights. cuDNN keeps them in an opaque weight space; cudnnGetRNNWeightParams gives, per pseudo-layer (direction)
// and linear-layer id, where each gate's matrix ([hidden, input] or [hidden, hidden], row-major) and bias live.
// Linear-layer ids 0..G-1 are the input matrices (W) and their biases (Wb), G..2G-1 the recurrent ones (R, Rb), in
// cuDNN's gate order: LSTM i, f, g (ONNX's c), o; GRU r, z, h; RNN one. The mapping is a list of contiguous copies
// (RnnWeightSegments: each ONNX gate block is contiguous) made once per plan; each call packs W, R, B into the weight
// space in the workspace (a zeroed bias when B is absent), and the backward unpacks cuDNN's weight gradient into dW,
// dR, dB with the same list. cuDNN's GRU is ONNX's linear_before_reset = 1 form:
//   h' = tanh(Wh x + bWh + r * (Rh h + bRh)), h = (1 - z) h' + z h.
//
// Lengths. cuDNN's data descriptors take the lengths on the host, its calls a device copy: the caller passes both
// (host_lens null = every sequence seq steps long; it is checked, [0, seq], std::invalid_argument naming the batch
// index as the CPU does). A sequence of length 0 (Y zero, Y_h = initial_h) runs in cuDNN as one step over a zero
// input whose outputs are then replaced: Y zeroed, Y_h / Y_c the initial state, and in the backward a zero dY, dY_h
// and dY_c for it (so it adds nothing to dW, dR, dB) and dInitial_h / dInitial_c = dY_h / dY_c. Y is zero past each
// length (cuDNN's padding fill); dY there is ignored (zeroed in the workspace copy before cuDNN reads it) and dX is
// zero there.
//
// Direction "reverse" (one direction from each sequence's end, which cuDNN has no mode for): X is reversed per
// sequence (x'[t] = x[len-1-t]) into the workspace, cuDNN runs forward, Y is reversed back; the backward reverses dY
// and dX the same way.
//
// The backward has no reserve space from the forward (the executor's RecurrentGrad gets the forward's operands, not
// its internals): it runs cudnnRNNForward in training mode itself (Y and the reserve in its workspace), then
// cudnnRNNBackwardData_v8 (dX, dInitial_h, dInitial_c) and cudnnRNNBackwardWeights_v8 (CUDNN_WGRAD_MODE_ADD into
// a zeroed gradient space, then unpacked).
//
// Precision: fp32 data compute in fp32 with CUDNN_FMA_MATH (CUDNN_DEFAULT_MATH would allow TF32), tf32 = true with
// CUDNN_DEFAULT_MATH; fp16 / bf16 data with fp32 math (mathPrec CUDNN_DATA_FLOAT) and CUDNN_TENSOR_OP_MATH. Algorithm
// CUDNN_RNN_ALGO_STANDARD.
//
// Plain host C++ over device pointers and a stream (void* = cudaStream_t); no IR types. A CudnnRnn is made once
// per desc (it asks cuDNN for the weight layout and the workspace sizes: needs a GPU) and then launches
// asynchronously; calls on one object may come from several threads (cuDNN's handle is leased per call, see
// cudnn_util.h). Errors: std::invalid_argument for a malformed desc, a bad length or a null pointer,
// std::runtime_error when cuDNN refuses or fails (naming the desc and the call).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda_ops/row_kernels.h"  // FloatType

namespace ot::cuda {

enum class RnnCellKind : uint8_t { kTanh, kGru, kLstm };

struct CudnnRnnDesc {
  RnnCellKind cell = RnnCellKind::kLstm;
  FloatType type = FloatType::kF32;  // every operand
  bool tf32 = false;                 // kF32: TF32 tensor cores allowed
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int directions = 1;        // 1, or 2 (bidirectional)
  bool reverse = false;      // one direction, run from each sequence's end
  bool batch_major = false;  // ONNX layout 1
  int gates() const { return cell == RnnCellKind::kLstm ? 4 : cell == RnnCellKind::kGru ? 3 : 1; }
};

std::string ToString(const CudnnRnnDesc& d);

// Host-only. Throws std::invalid_argument: sizes not positive or not below 2^31 (cuDNN's int arguments), directions
// not 1 or 2, reverse with two directions.
void ValidateCudnnRnn(const CudnnRnnDesc& d);

// ---- the ONNX <-> cuDNN weight mapping (host-only) -------------------------------------------------------------

// The ONNX gate (index into ONNX's gate order) of cuDNN's linear layer `lin` (0 .. 2G-1; lin and lin - G are the
// same gate's W and R).
int OnnxGateOfCudnnLinLayer(RnnCellKind cell, int lin);

enum class RnnOperand : uint8_t { kW, kR, kB };

// One contiguous copy between an ONNX operand and the weight space (offsets and count in elements).
struct RnnWeightSegment {
  RnnOperand operand = RnnOperand::kW;
  int64_t onnx_offset = 0, space_offset = 0, count = 0;
};

// Where cuDNN keeps direction d's linear layer `lin` (as cudnnGetRNNWeightParams reports it): its matrix's and its
// bias's element offsets into the weight space and element counts.
struct CudnnLinLayerPlace {
  int64_t matrix_offset = 0, matrix_count = 0, bias_offset = 0, bias_count = 0;
};

// The copies of a desc's weights: places holds directions * 2G entries (index d * 2G + lin). Throws
// std::invalid_argument when a count is not the ONNX block's (hidden * input, hidden * hidden, hidden), a region
// leaves [0, space_elems), or two regions overlap.
std::vector<RnnWeightSegment> RnnWeightSegments(const CudnnRnnDesc& d, const std::vector<CudnnLinLayerPlace>& places,
                                                int64_t space_elems);

// Host versions of the device pack / unpack (the same copies; elements of esz bytes moved as bits), for tests:
// space = the weights of w, r and b (b null: zero biases; bytes of the space no segment covers untouched); dw, dr,
// db (each may be null) = the space's blocks.
void PackRnnWeightsHost(const std::vector<RnnWeightSegment>& segs, size_t esz, const void* w, const void* r,
                        const void* b, void* space);
void UnpackRnnWeightsHost(const std::vector<RnnWeightSegment>& segs, size_t esz, const void* space, void* dw, void* dr,
                          void* db);

// ---- the launchers ------------------------------------------------------------------------------------------------

// Device operands of a forward (ONNX layouts). b, lens, h0, c0 may be null (zeros; every sequence seq steps); y, y_h,
// y_c may be null (not written). c0 / y_c are read / written for LSTM only.
struct RnnForwardArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* r = nullptr;
  const void* b = nullptr;
  const int32_t* lens = nullptr;
  const void* h0 = nullptr;
  const void* c0 = nullptr;
  void* y = nullptr;
  void* y_h = nullptr;
  void* y_c = nullptr;
};

// The backward's: the forward's inputs, the gradients of its outputs (dy, dy_h, dy_c; null: zero) and the
// gradients it writes (each may be null: not written; db has B's shape whether B is present or not).
struct RnnBackwardArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* r = nullptr;
  const void* b = nullptr;
  const int32_t* lens = nullptr;
  const void* h0 = nullptr;
  const void* c0 = nullptr;
  const void* dy = nullptr;
  const void* dy_h = nullptr;
  const void* dy_c = nullptr;
  void* dx = nullptr;
  void* dw = nullptr;
  void* dr = nullptr;
  void* db = nullptr;
  void* dh0 = nullptr;
  void* dc0 = nullptr;
};

class CudnnRnn {
 public:
  // Asks cuDNN for the weight layout and the workspace sizes (for every sequence at full length, the most any call
  // needs). Needs a GPU.
  explicit CudnnRnn(const CudnnRnnDesc& d);
  ~CudnnRnn();
  CudnnRnn(const CudnnRnn&) = delete;
  CudnnRnn& operator=(const CudnnRnn&) = delete;

  const CudnnRnnDesc& desc() const;
  const std::vector<RnnWeightSegment>& segments() const;
  size_t weight_space_bytes() const;
  size_t ForwardWorkspaceBytes() const;
  size_t BackwardWorkspaceBytes() const;

  // host_lens: the lengths of a.lens on the host (null exactly when a.lens is null).
  void Forward(const RnnForwardArgs& a, const int32_t* host_lens, void* workspace, size_t workspace_bytes,
               void* stream) const;
  void Backward(const RnnBackwardArgs& a, const int32_t* host_lens, void* workspace, size_t workspace_bytes,
                void* stream) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- the kernels the launchers use (cudnn_rnn.cu), declared for cudnn_rnn.cc and the tests -------------------------
namespace rnn_detail {

// Copies of at most kMaxSegments segments (two directions of LSTM: 2 x (8 matrices + 8 biases)).
constexpr int kMaxSegments = 32;

// space (space_bytes, zeroed first) = the blocks of w, r, b (b null: left zero).
void PackWeights(const std::vector<RnnWeightSegment>& segs, size_t esz, const void* w, const void* r, const void* b,
                 void* space, size_t space_bytes, void* stream);
// dw, dr, db (each may be null) = the space's blocks.
void UnpackWeights(const std::vector<RnnWeightSegment>& segs, size_t esz, const void* space, void* dw, void* dr,
                   void* db, void* stream);
// out[n] = max(lens[n], 1) (lens null: seq) -- cuDNN's lengths, a length-0 sequence run as one step.
void PrepareLengths(const int32_t* lens, int64_t seq, int64_t batch, int32_t* out, void* stream);
// Sequence data [seq, batch, vec] (batch_major: [batch, seq, vec]) of esz-byte elements: rows t >= lens[n] zeroed
// (lens null: nothing to do).
void SeqMask(void* data, size_t esz, bool batch_major, int64_t seq, int64_t batch, int64_t vec, const int32_t* lens,
             void* stream);
// dst[n, t] = src[n, len - 1 - t] for t < len, zero from len on (lens null: len = seq). dst may not alias src.
void SeqReverse(const void* src, void* dst, size_t esz, bool batch_major, int64_t seq, int64_t batch, int64_t vec,
                const int32_t* lens, void* stream);
// States [dirs, batch, hidden]: for every n with lens[n] == 0, dst[d, n, :] = src[d, n, :] (src null: zero).
void StateFix(void* dst, const void* src, size_t esz, int64_t dirs, int64_t batch, int64_t hidden, const int32_t* lens,
              void* stream);

}  // namespace rnn_detail

}  // namespace ot::cuda
