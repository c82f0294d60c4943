// Multi-tensor optimizer update (one call updates every parameter and optimizer state of a model).
// Order of work, all deterministic (fixed chunking, partial sums reduced in chunk order):
//   1. per chunk of every gradient: sum of squares (in double) and a finite check;
//   2. global norm = sqrt(sum); when any gradient element is not finite, every output is a copy of its input
//      (parameters, states, step) and `skipped` is set: the step changes nothing;
//   3. clip coefficient (torch clip_grad_norm_), step t = step + 1, bias corrections;
//   4. element-wise update (kernel_common/optim_math.h; Adam/AdamW on float32 storage take the direction
//      m / (sqrt(v) / sqrt(bc2) + eps) in float, the rest in double), parallel over chunks of all tensors;
//   5. LAMB only: per-tensor norms of w and of the update direction, then p -= lr * trust_ratio * update.
// Mixed precision (OptimStepOptions, OptimTensor::half_out):
//   - grad_scale (1/S with loss scaling) multiplies every incoming gradient in step 1 (and in the accumulation
//     pass), so the norm, the finite check, clipping and the running sums all see unscaled gradients;
//   - each chunk ends with an epilogue over the chunk just written (still in cache, so no second pass over
//     memory): the half copy round(p') of parameters that have one, and the chunk's sum of squares of p' for
//     param_norm. Skipped steps and micro-steps run the same epilogue on their copy of p;
//   - a half gradient (OptimTensor::grad_half) is widened to float32 one chunk at a time into a per-thread buffer
//     (in cache) by every pass that reads it, which then runs as on a float32 gradient.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kernel_common/optim_math.h"

namespace ot::cpu {

using OptimKind = ::ot::OptimizerKind;

// Number of state tensors per parameter (momentum buffer; or Adam's m and v).
int OptimStatesPerParam(OptimKind k);

// The storage format of a parameter's half copy.
enum class HalfKind : uint8_t { kNone, kFloat16, kBFloat16 };

struct OptimHyper {
  OptimKind kind = OptimKind::kAdam;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0, momentum = 0.9;
  double clip_grad_norm = 0;  // <= 0: no clipping
};

// One parameter. Buffers of `n` elements of float (f64 = false) or double (f64 = true); s0/s1 are the states
// (null when the kind has fewer). Outputs never alias inputs.
struct OptimTensor {
  int64_t n = 0;
  bool f64 = false;
  const void* p = nullptr;
  const void* g = nullptr;
  const void* s0 = nullptr;
  const void* s1 = nullptr;
  void* p_out = nullptr;
  void* s0_out = nullptr;
  void* s1_out = nullptr;
  // Gradient accumulation (accumulate > 1): the running sum of this micro-step's predecessors' gradients, and
  // where the new sum goes (zeros again after the optimizer step).
  const void* acc = nullptr;
  void* acc_out = nullptr;
  // Half copy (float32 parameters only): n uint16 elements, round-to-nearest-even of p_out as float.
  void* half_out = nullptr;
  HalfKind half = HalfKind::kNone;
  // The gradient's storage (float32 parameters only): kNone, g (and acc) are of the parameter's dtype; a half kind,
  // g is n uint16 elements of that format (a mixed-precision step's half gradient, read without a float32 copy:
  // widening is exact, so the update is the one a Cast to float32 followed by this call would make, bit for bit).
  // The sums of accumulation (acc, acc_out) stay float32.
  HalfKind grad_half = HalfKind::kNone;
};

// Per-call options of the mixed-precision step.
struct OptimStepOptions {
  double grad_scale = 1.0;  // every incoming gradient is multiplied by this first (1/S with loss scaling)
  bool stats = false;       // fill OptimResult::param_norm and zero_fraction
  // A sharded update (--shard-optimizer: the tensors are this rank's slices of the parameters): sums `n` values
  // over the ranks in place. Called with {sum of squared gradients, 1 when some gradient is not finite else 0}
  // before the update -- so the norm, clipping and the skip decision are the whole model's on every rank -- and,
  // with stats, with {sum of squared parameters, zero gradient elements, gradient elements} at the end.
  std::function<void(double* values, int n)> reduce;
};

struct OptimResult {
  double grad_norm = 0;  // of the gradients as given (before clipping); inf/NaN when some are not finite
  bool skipped = false;
  int64_t step = 0;     // the step counter after the call (unchanged when skipped)
  bool applied = true;  // false for a micro-step that only accumulated its gradients
  int64_t micro = 0;    // micro-steps accumulated after the call (0 after an optimizer step)
  // With OptimStepOptions::stats: L2 norm of every parameter after the call, and the share of elements of the
  // gradients passed to this call (not the accumulated mean) that are exactly zero (+0 or -0).
  double param_norm = 0;
  double zero_fraction = 0;
};

// `step`: optimizer steps taken so far (0 before the first).
// `accumulate` K > 1: gradient accumulation. `micro` micro-steps (0..K-1) have been summed into acc already. Micro-
// steps 1..K-1 write acc + g to acc_out and copy everything else (no finite check: a non-finite gradient is
// carried in the sum); the K-th updates with the mean (acc + g) / K -- checked for finiteness, clipped, applied --
// and leaves acc_out zero, whether applied or skipped.
// With grad_scale, the sums hold unscaled gradients: acc_out = acc + g * grad_scale (mean at the K-th).
OptimResult MultiTensorUpdate(const OptimHyper& h, double lr, int64_t step, const std::vector<OptimTensor>& ts,
                              int64_t accumulate = 1, int64_t micro = 0, const OptimStepOptions& x = {});

}  // namespace ot::cpu
