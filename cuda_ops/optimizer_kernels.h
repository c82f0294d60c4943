// Multi-tensor Adam/AdamW step on the GPU with loss scaling: the GPU side of cpu::MultiTensorUpdate
// (cpu_ops/optimizer.h; the element math is kernel_common/optim_math.h's AdamStep<double>, bias corrections,
// ClipCoefficient and LossScaleUpdate<float>, the same functions the CPU calls). No host synchronisation: the
// loss scale, the step counter, the finite flag and the loss-scale counters live in device memory, so a whole
// step can be captured in a CUDA graph.
//
// A step is three stream-ordered launches (MultiTensorAdamStep issues all three):
//   1. MultiTensorGradCheck: per 16384-element chunk of every gradient (one block each), the sum of squares of
//      g / S in double and whether every element is finite; then one block adds the chunks' sums in chunk order
//      (deterministic) and ORs their flags: *found_inf (0/1), *grad_norm = sqrt(sum) (inf/NaN when not finite).
//   2. MultiTensorAdamUpdate: every block returns at once when *found_inf is set (nothing changes: parameters,
//      moments and half copies keep their bits); otherwise t = *step + 1, bias corrections of t, lr (times the
//      schedule factor of *step), gradient factor = ClipCoefficient(grad_norm, max_grad_norm) / S, and
//      AdamStep<double> per element, in place; the half copy (fp16/bf16) of each updated parameter is written
//      when given.
//   3. FinishOptimizerStep (one thread): ++*step when the step was applied; with a dynamic loss scale,
//      LossScaleUpdate (x backoff on overflow, x growth after growth_interval good steps; PyTorch GradScaler /
//      the executor's OptimizerUpdate defaults).
// Not here: SGD/momentum/LAMB, gradient accumulation, the param-norm / zero-fraction statistics.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda_ops/row_kernels.h"  // FloatType

namespace ot::cuda {

// One parameter of the list (an element of the device descriptor block). Everything is updated in place.
struct AdamTensor {
  float* param = nullptr;       // fp32 master weights [n]
  const void* grad = nullptr;   // [n] of grad_type (scaled by the loss scale S when loss scaling is on)
  float* m = nullptr;           // first moment [n], fp32
  float* v = nullptr;           // second moment [n], fp32
  void* half_copy = nullptr;    // optional [n] of half_type: round-to-nearest-even of the updated param
  int64_t n = 0;
  FloatType grad_type = FloatType::kF32;
  FloatType half_type = FloatType::kF16;  // kF16 or kBF16 (only read when half_copy is set)
};

constexpr int64_t kAdamChunk = 16384;  // elements per block of passes 1 and 2

// Host: the descriptor block of a list -- the AdamTensor array followed by the int64 prefix sums of the tensors'
// chunk counts -- to be copied once into device memory (8-byte aligned, as cudaMalloc gives) and described by an
// AdamList. Throws std::invalid_argument on a negative n, a null pointer of a non-empty tensor, or a half_type
// other than kF16/kBF16 where half_copy is set.
struct AdamPack {
  std::vector<uint8_t> bytes;
  int num_tensors = 0;
  int64_t num_chunks = 0;
};
AdamPack PackAdamTensors(const std::vector<AdamTensor>& tensors);

struct AdamList {
  const void* device_block = nullptr;  // AdamPack::bytes in device memory
  int num_tensors = 0;
  int64_t num_chunks = 0;
};

struct AdamHyper {
  double lr = 1e-3;                 // base learning rate, used when lr_device is null
  const float* lr_device = nullptr;  // optional device scalar: the base learning rate (read at pass 2)
  const double* lr_device_f64 = nullptr;  // the same as a double (the executor's learning-rate state); wins over lr_device
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool adamw = false;           // decoupled weight decay (torch.optim.AdamW); else L2 added to the gradient (Adam)
  double max_grad_norm = 0;     // <= 0: no clipping
  // LR schedule (kernel_common/optim_math.h's LrScheduleFactor, evaluated on the device from *step):
  // 0 constant, 1 linear, 2 cosine; warmup / total steps.
  int lr_schedule = 0;
  int64_t warmup = 0, total_steps = 0;
};

struct LossScaleState {
  float* scale = nullptr;    // device scalar S; null: no loss scaling (S = 1)
  int64_t* good = nullptr;   // device counters of LossScaleUpdate (needed when dynamic)
  int64_t* bad = nullptr;
  bool dynamic = true;       // false: a static scale (unscaling only)
  float growth = 2.f, backoff = 0.5f, min_scale = 1.f;
  int64_t growth_interval = 2000, overflows = 1;
};

// Workspace of passes 1-2 (bytes): the per-chunk partial sums and flags and the total.
size_t AdamWorkspaceBytes(int64_t num_chunks);

// Pass 1. loss_scale: device scalar S or null (1). found_inf: device int, written 0/1. grad_norm: device float or
// null.
void MultiTensorGradCheck(const AdamList& list, const float* loss_scale, int* found_inf, float* grad_norm,
                          void* workspace, size_t workspace_bytes, void* stream);

// Pass 2 (reads pass 1's total from the workspace and *found_inf). step: device counter of steps taken so far.
void MultiTensorAdamUpdate(const AdamList& list, const AdamHyper& h, const float* loss_scale, const int64_t* step,
                           const int* found_inf, const void* workspace, size_t workspace_bytes, void* stream);

// Pass 3.
void FinishOptimizerStep(const int* found_inf, int64_t* step, const LossScaleState& ls, void* stream);

// Passes 1-3 in order on `stream`.
void MultiTensorAdamStep(const AdamList& list, const AdamHyper& h, const LossScaleState& ls, int64_t* step,
                         int* found_inf, float* grad_norm, void* workspace, size_t workspace_bytes, void* stream);

// Statistics after a step (the executor's OptimizerUpdate with stats = 1, cpu::OptimResult's param_norm and
// zero_fraction): *param_norm = L2 norm of every parameter as it is now, *zero_fraction = the share of gradient
// elements that are exactly zero (+0 or -0) among total_elements. Deterministic two-stage sums in double / int64.
// Either output may be null.
size_t MultiTensorStatsWorkspaceBytes(int64_t num_chunks);
void MultiTensorStats(const AdamList& list, int64_t total_elements, float* param_norm, float* zero_fraction,
                      void* workspace, size_t workspace_bytes, void* stream);

}  // namespace ot::cuda
