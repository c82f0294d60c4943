// Multi-tensor optimizer step on the GPU with loss scaling and gradient accumulation: the GPU side of
// cpu::MultiTensorUpdate (cpu_ops/optimizer.h) for every kind it has -- SGD (L2 weight decay), momentum and
// Nesterov (torch.optim.SGD, dampening 0), Adam, AdamW and LAMB (Apex FusedLAMB). The element math is
// kernel_common/optim_math.h's SgdStep / AdamStep / LambDirection / LambTrustRatio in double, with its
// BiasCorrection, ClipCoefficient, LrScheduleFactor and LossScaleUpdate<float>: the functions the CPU calls. No host
// synchronisation: the learning rate, the step and micro-step counters, the loss scale, the finite flag and the
// loss-scale counters live in device memory, so a whole step can be captured in a CUDA graph.
//
// A call (MultiTensorStep issues it all, stream-ordered) is:
//   1. MultiTensorGradCheck: per 16384-element chunk of every gradient (one block each), the sum of squares of
//      g / S in double and whether every element is finite; then one block adds the chunks' sums in chunk order
//      (deterministic) and ORs their flags: *found_inf (0/1), *grad_norm = sqrt(sum) (inf/NaN when not finite).
//      With accumulation (K > 1) the same pass first adds g / S into the tensor's sum `acc` (in double, stored
//      float, the CPU's arithmetic) and, at the K-th micro-step, turns the sum into the mean (acc + g/S) / K and
//      checks and sums *that* (as stored); on micro-steps 1..K-1 it checks nothing: *found_inf = 0, *grad_norm
//      = NaN, and it refreshes the half copies (round(p), unchanged p).
//   2. MultiTensorUpdate: nothing on a micro-step that only accumulated. When *found_inf is set, no parameter or
//      state changes (the half copies are rewritten as round(p), the accumulated sums zeroed). Otherwise t = *step
//      + 1, bias corrections of t, lr (times LrScheduleFactor of *step), gradient factor = ClipCoefficient(norm,
//      max_grad_norm) / S (1/S only on the plain path: the accumulated mean is unscaled already), the kind's step
//      per element in place, the half copy round(p') when given, the sum zeroed. LAMB is three launches
//      (optimizer_lamb.cu): per-chunk sums of ||w||^2 and ||u||^2 of the update direction u (in double, u rounded
//      to float as the CPU stores it), one block per tensor adding its chunks' sums in chunk order into the trust
//      ratio, then the update p -= lr * ratio * u with u recomputed (the same code, so the same bits) -- no
//      buffer of the model's size.
//   3. FinishOptimizerStep (one thread): on a micro-step that only accumulated, ++*micro and nothing else;
//      otherwise *micro = 0, ++*step when the step was applied, and with a dynamic loss scale LossScaleUpdate
//      (x backoff on overflow, x growth after growth_interval good steps) -- on the K-th call only, as the CPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda_ops/row_kernels.h"  // FloatType
#include "kernel_common/optim_math.h"

namespace ot::cuda {

using OptimKind = ::ot::OptimizerKind;

// State tensors per parameter: 0 (sgd), 1 (the momentum buffer), 2 (the first and second moments).
int OptimStateCount(OptimKind k);

// One parameter of the list (an element of the device descriptor block). Everything is updated in place.
struct OptimTensor {
  float* param = nullptr;      // fp32 master weights [n]
  const void* grad = nullptr;  // [n] of grad_type (scaled by the loss scale S when loss scaling is on)
  float* s0 = nullptr;         // [n] fp32: momentum buffer (momentum, nesterov) or first moment (adam, adamw, lamb)
  float* s1 = nullptr;         // [n] fp32: second moment (adam, adamw, lamb)
  float* acc = nullptr;        // [n] fp32: the running gradient sum (accumulation only; zero after each update)
  void* half_copy = nullptr;   // optional [n] of half_type: round-to-nearest-even of the parameter
  int64_t n = 0;
  FloatType grad_type = FloatType::kF32;
  FloatType half_type = FloatType::kF16;  // kF16 or kBF16 (only read when half_copy is set)
};

constexpr int64_t kOptimChunk = 16384;  // elements per block of every pass

// Host: the descriptor block of a list -- the OptimTensor array followed by the int64 prefix sums of the tensors'
// chunk counts -- to be copied once into device memory (8-byte aligned, as cudaMalloc gives) and described by an
// OptimList. Throws std::invalid_argument on a negative n, a null pointer that `kind` (its states) or `accumulate`
// (acc) needs for a non-empty tensor, or a half_type other than kF16/kBF16 where half_copy is set.
struct OptimPack {
  std::vector<uint8_t> bytes;
  int num_tensors = 0;
  int64_t num_chunks = 0;
  int states = 0;           // OptimStateCount(kind): the states every tensor has
  bool accumulate = false;  // every tensor has its sum
};
OptimPack PackOptimTensors(const std::vector<OptimTensor>& tensors, OptimKind kind, bool accumulate = false);

// The launchers check that the list has what a call needs (h.kind's states, the sums when accumulating): copy
// num_tensors, num_chunks, states and accumulate from the OptimPack.
struct OptimList {
  const void* device_block = nullptr;  // OptimPack::bytes in device memory
  int num_tensors = 0;
  int64_t num_chunks = 0;
  int states = 0;
  bool accumulate = false;
};

struct OptimHyper {
  OptimKind kind = OptimKind::kAdam;
  double lr = 1e-3;                  // base learning rate, used when neither device scalar is given
  const float* lr_device = nullptr;  // optional device scalar: the base learning rate (read at pass 2)
  const double* lr_device_f64 =
      nullptr;  // the same as a double (the executor's learning-rate state); wins over lr_device
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  double momentum = 0.9;     // momentum and nesterov
  double max_grad_norm = 0;  // <= 0: no clipping
  // LR schedule (kernel_common/optim_math.h's LrScheduleFactor, evaluated on the device from *step):
  // 0 constant, 1 linear, 2 cosine; warmup / total steps.
  int lr_schedule = 0;
  int64_t warmup = 0, total_steps = 0;
};

// Gradient accumulation (--grad-accum K): `micro` is the device counter of micro-steps already summed (0..K-1),
// advanced by FinishOptimizerStep; the list's tensors carry their sums (OptimTensor::acc). micro null or k <= 1:
// no accumulation (every call is an optimizer step).
struct AccumState {
  int64_t* micro = nullptr;
  int64_t k = 1;
  bool on() const { return micro != nullptr && k > 1; }
};

struct LossScaleState {
  float* scale = nullptr;   // device scalar S; null: no loss scaling (S = 1)
  int64_t* good = nullptr;  // device counters of LossScaleUpdate (needed when dynamic)
  int64_t* bad = nullptr;
  bool dynamic = true;  // false: a static scale (unscaling only)
  float growth = 2.f, backoff = 0.5f, min_scale = 1.f;
  int64_t growth_interval = 2000, overflows = 1;
};

// Workspace of passes 1-2 (bytes): the per-chunk partial sums and flags, the total, LAMB's per-chunk norms and
// per-tensor ratios.
size_t OptimWorkspaceBytes(int64_t num_chunks, int num_tensors);

// Pass 1. loss_scale: device scalar S or null (1). found_inf: device int, written 0/1. grad_norm: device float or
// null. With accumulation, every list tensor needs its acc (PackOptimTensors(..., accumulate = true)).
void MultiTensorGradCheck(const OptimList& list, const float* loss_scale, const AccumState& accum, int* found_inf,
                          float* grad_norm, void* workspace, size_t workspace_bytes, void* stream);

// Pass 2 (reads pass 1's total from the workspace, *found_inf and *micro). step: device counter of steps taken so
// far. The list must have been packed for h.kind.
void MultiTensorUpdate(const OptimList& list, const OptimHyper& h, const float* loss_scale, const AccumState& accum,
                       const int64_t* step, const int* found_inf, void* workspace, size_t workspace_bytes,
                       void* stream);

// Pass 3.
void FinishOptimizerStep(const int* found_inf, int64_t* step, const LossScaleState& ls, const AccumState& accum,
                         void* stream);

// Passes 1-3 in order on `stream`.
void MultiTensorStep(const OptimList& list, const OptimHyper& h, const LossScaleState& ls, const AccumState& accum,
                     int64_t* step, int* found_inf, float* grad_norm, void* workspace, size_t workspace_bytes,
                     void* stream);

// Statistics after a step (the executor's OptimizerUpdate with stats = 1, cpu::OptimResult's param_norm and
// zero_fraction): *param_norm = L2 norm of every parameter as it is now, *zero_fraction = the share of this call's
// incoming gradient elements (OptimTensor::grad, not the accumulated sum) that are exactly zero (+0 or -0) among
// total_elements. Deterministic two-stage sums in double / int64. Either output may be null.
size_t MultiTensorStatsWorkspaceBytes(int64_t num_chunks);
void MultiTensorStats(const OptimList& list, int64_t total_elements, float* param_norm, float* zero_fraction,
                      void* workspace, size_t workspace_bytes, void* stream);

}  // namespace ot::cuda
