// CUDA C for a fused cluster (kernel_common/cluster_program.h): one `extern "C" __global__` kernel that computes
// what the CPU interpreter (cpu_ops/fused_elementwise.h) computes, plus the host-side rules to launch it. Plain
// C++ (no CUDA runtime, no IR types): the executor compiles the source with cuda_ops/nvrtc_compile.h.
//
// Semantics (the interpreter's, instruction by instruction): every value is computed in float with
// kernel_common/scalar_math.h's functions -- the formulas the CPU calls -- and rounded to its dtype when it is made
// (f16/bf16 through half.h's conversions, bool to 0/1), with the same rounding skips (ops whose result is exact in
// their operands' dtype). Sums and means of row reductions accumulate in double, max/min propagate NaN with
// math::ReduceMaxStep/ReduceMinStep. Storage: f32 as float, f16/bf16 as uint16_t bits, bool as uint8_t 0/1 (the
// CPU's bool tensors). The source is compiled with --fmad=false: no multiply-add is contracted, as on the CPU
// (vec_math.h's no-FMA rule), so exp/erf/tanh give the CPU's bits; log/sqrt/pow are CUDA's libdevice (within an
// ulp or two of glibc), and a row sum is added in another order than the CPU's (double, so rarely a float bit).
//
// Kernel parameters, in order: the argument block (struct OtArgs, by value; its words come from MakeClusterArgs),
// then one pointer per input (const, typed by the input's storage type), then one per output (typed by the
// output instruction's dtype). Pointers are not __restrict__: an output may be an input's memory (in place).
//
// Shapes: a kernel serves any domain of rank <= kClusterMaxRank. Inputs are read through per-axis element strides
// over the domain (0 on broadcast axes; a row input has dims 1 on the reduced axes, so it is a broadcast input
// read at the row's first element). MakeClusterArgs coalesces axes that every input walks contiguously, so the
// common case (same-shaped inputs) indexes with one multiply-add and no division.
//
// Launch shapes (ClusterLaunch):
//   flat  (no row value is needed): a grid-stride loop over the flat domain, one element per thread per trip; it
//         reads every input of element i, then stores the outputs of i (in place is safe: an output may alias
//         only a full input of D's elements, and that is read at element i alone).
//   rows  (reduce_axes > 0 and a row value is needed): one block per row (grid-stride over rows), the row's
//         elements strided over the block's threads. The row values are made in phases: phase p reduces every
//         reduction whose operand depends on p earlier reductions (softmax: max, then sum of exp(x - max)), each
//         phase RECOMPUTING its full values from the inputs (nothing of a row is kept between phases, so rows of
//         any length fit and registers stay those of one element); the last pass computes and stores the outputs.
//         Each thread folds its elements in order; the block combines the threads' partials with a fixed
//         shuffle-down tree per warp then over the warps (shared memory: one double per warp), so a result does
//         not change from run to run. Between phases all threads hold the row values, and the last pass stores
//         element j after reading only element j of the inputs (rows of other blocks are disjoint), so in place
//         stays safe.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_common/cluster_program.h"

namespace ot::cuda {

constexpr int kClusterMaxRank = 8;          // domain axes after coalescing
constexpr int kClusterMaxThreads = 256;     // the block size the kernels are compiled for (__launch_bounds__)
constexpr int64_t kClusterMaxGrid = 65536;  // blocks at most; the kernels loop (grid-stride) past it

struct ClusterKernelSpec {
  // Storage type of each input (the tensor's dtype). Empty: each input takes the dtype of the first kInput
  // instruction that reads it (what the fusion pass emits when no Cast is folded into the load).
  std::vector<cluster::DType> input_types;
};

// How to launch a generated kernel for a concrete domain.
struct ClusterLaunch {
  bool rows = false;         // one block per row (else the flat grid-stride loop)
  int64_t grid = 0;          // blocks (0: nothing to do, do not launch)
  int block = 0;             // threads per block (a multiple of 32, <= kClusterMaxThreads)
  int64_t shared_bytes = 0;  // dynamic shared memory
};

struct ClusterKernel {
  std::string name;    // the entry point
  std::string source;  // CUDA C; includes kernel_common/scalar_math.h (NVRTC gets it in memory)
  bool rows = false;   // the launch shape (see above)
  int num_reduction_phases = 0;
  std::vector<cluster::DType> input_types, output_types;
  size_t args_bytes = 0;  // sizeof(OtArgs): 8 * (4 + kClusterMaxRank * (1 + max(num_inputs, 1)))
  // Grid, block and shared memory for a domain of `numel` elements in `rows` rows of `row_len` (without rows:
  // rows = numel, row_len = 1). Rows shorter than the maximum block get a smaller block (whole warps).
  ClusterLaunch Launch(int64_t numel, int64_t rows, int64_t row_len) const;
};

// The kernel of `p` (validated; throws std::invalid_argument when it is not a valid program or spec).
ClusterKernel GenerateClusterKernel(const cluster::Program& p, const std::string& kernel_name,
                                    const ClusterKernelSpec& spec = {});
std::string GenerateClusterSource(const cluster::Program& p, const std::string& kernel_name);

// The argument block for a concrete domain and input dims (numpy broadcasting, aligned on the right: a full input
// to D, a row input to D with the reduced axes 1), as the words of OtArgs: numel, rows, row_len, rank, dims[8],
// strides[max(num_inputs, 1)][8]. Throws std::invalid_argument naming the input that does not broadcast, or
// when the coalesced domain has more than kClusterMaxRank axes. With empty rows (row_len 0, rows > 0) the strides
// describe D with the reduced axes 1, so the kernel reads each row's row inputs at its row number. `rows`/`row_len` of
// the result are what ClusterKernel::Launch takes.
struct ClusterArgs {
  std::vector<int64_t> words;
  int64_t numel = 0, rows = 0, row_len = 1;
};
ClusterArgs MakeClusterArgs(const cluster::Program& p, const std::vector<int64_t>& domain,
                            const std::vector<std::vector<int64_t>>& input_dims);

}  // namespace ot::cuda
