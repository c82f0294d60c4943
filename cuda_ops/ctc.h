// The CTC loss on the GPU (ai.onnxtrain.CTCLoss and its gradient CTCLossGrad): cpu_ops/ctc.h's semantics, which
// are the reference and the contract -- PyTorch's F.ctc_loss on unnormalized logits, the log-softmax over the
// classes inside in double, the forward (alpha) and backward (beta) variables in log space in double,
// nll = -lse(alpha[T-1][2L], alpha[T-1][2L-1]), d nll / d logits = softmax - occupancy, zero past each sample's
// frames, times weight w_b. A sample with no frames has nll 0 without labels, else infinity; an infinite nll is 0
// (and its gradient 0) with zero_infinity, else its frames' gradient is NaN (as on the CPU).
//
// Layout: logits [frames, batch, classes] (batch_major: [batch, frames, classes]), float32 or float64; labels
// [batch, max_labels] int64 (row b's first label_lens[b] entries count); logit_lens, label_lens [batch] int64.
//
// Kernels, all deterministic (every sum in a fixed order that does not depend on scheduling):
//   1. the log-softmax's normalizer lz[b][t] = max + log(sum exp(x - max)) of every frame, one warp per frame (lane
//      partials in class order, then a fixed shuffle tree), into the workspace; a log-probability is then
//      logit - lz, formed on the fly in double exactly as the CPU forms it (the normalizer is all of the
//      log-softmax that is not the logit itself: storing [frames, batch] doubles instead of [frames, batch,
//      classes] keeps the workspace small for large vocabularies);
//   2. one block per sample, threads over the 2L+1 extended label states: alpha over the sample's frames (a barrier
//      per frame), nll; for the gradient beta from the last frame back, and per frame the occupancy of every class:
//      a blank's by a fixed-order block tree over the even states, a label's by the thread of its first occurrence
//      adding its repeats in state order (a per-sample table of the next state with the same label is built first);
//      every element of the sample's dlogits rows is written, the softmax term first, then the labels' classes
//      overwritten with the full formula;
//   3. the scalar loss: one thread adding w_b * nll_b in sample order (the CPU's loop), w_b = 1 / max(L_b, 1) /
//      max(batch, 1) for mean, 1 for sum.
// Invalid lengths or labels (a length outside [0, frames] / [0, max_labels], a label outside [0, classes) or equal
// to blank) set *bad = 1 (when not null; never cleared here -- zero it before, read it after) and make that sample's
// nll NaN and its gradient rows NaN (the CPU throws instead; the executor turns the flag into an error after the run).
//
// Plain host C++ over device pointers and a stream (void* = cudaStream_t); no IR types. Asynchronous, no host
// synchronisation (graph-capture safe); argument errors are std::invalid_argument (checked on the host before any CUDA
// call), a failed launch std::runtime_error. Limits: batch and frames below 2^31, classes below 2^31, max_labels below
// 2^29.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ot::cuda {

enum class CtcReduction : uint8_t { kMean, kSum };

struct CtcDesc {
  int64_t frames = 0, batch = 0, classes = 0, max_labels = 0;
  bool batch_major = false;  // logits [batch, frames, classes] ("btc"), else [frames, batch, classes] ("tbc")
  int64_t blank = 0;
  bool zero_infinity = false;
  CtcReduction reduction = CtcReduction::kMean;
  bool f64 = false;  // logits (and loss / dLoss / dlogits) float64, else float32
};

std::string ToString(const CtcDesc& d);

// Host-only. Throws std::invalid_argument for negative sizes, classes < 1, blank outside [0, classes), or sizes past
// the limits above.
void ValidateCtc(const CtcDesc& d);

// Workspace bytes of CtcLossForward (grad = false) / CtcLossBackward (grad = true); 256-byte aligned start expected.
// Forward: the normalizers [batch, frames], two alpha rows per sample and the per-sample nll; backward: the
// normalizers, the full alpha [batch, frames, 2 max_labels + 1], two beta rows per sample and the same-label table.
// Host-only.
size_t CtcWorkspaceBytes(const CtcDesc& d, bool grad);

// loss (a device scalar of the logits' type) = the reduction of the per-sample nll; nll (device, [batch] doubles,
// may be null) receives the per-sample values as cpu::CtcLoss writes them (0 for an infinite one under
// zero_infinity). Every launch writes loss, also for batch 0 (0).
void CtcLossForward(const CtcDesc& d, const void* logits, const int64_t* labels, const int64_t* logit_lens,
                    const int64_t* label_lens, void* loss, double* nll, int* bad, void* workspace,
                    size_t workspace_bytes, void* stream);

// dlogits (the logits' layout and type) = dloss * w_b * d nll_b / d logits, dloss a device scalar of the logits'
// type (read on the device). Every element is written. dlogits may not alias logits.
void CtcLossBackward(const CtcDesc& d, const void* dloss, const void* logits, const int64_t* labels,
                     const int64_t* logit_lens, const int64_t* label_lens, void* dlogits, int* bad, void* workspace,
                     size_t workspace_bytes, void* stream);

}  // namespace ot::cuda
