// Reductions over raw buffers: Reduce* (any set of axes), ArgMax/ArgMin and CumSum (one axis).
// An N-d reduction is first reduced to a geometry: the input dims coalesced into runs of kept and reduced dims.
// Outputs are grouped in rows of `inner` contiguous elements (the trailing kept run, 1 when the last dim is
// reduced); each output element is computed by exactly one task, accumulating its inputs in row-major order,
// so results do not depend on the thread count.
// Accumulation: float32/float64 in double, float16/bfloat16 in float, integers in int64 (L2, LogSum and
// LogSumExp of integers in double, truncated on store).
#pragma once
#include <cstdint>
#include <vector>

namespace ot::cpu {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

struct ReduceGeometry {
  std::vector<int64_t> kept_dims, kept_strides;  // kept runs before the inner one, with their input strides
  std::vector<int64_t> red_dims, red_strides;    // reduced runs, with their input strides
  int64_t inner = 1;                             // trailing kept run (contiguous in input and output)
  int64_t rows = 1;                              // output elements / inner
  int64_t count = 1;                             // input elements per output element
  int64_t out_numel() const { return rows * inner; }
};

// dims: input dims; reduce[d]: whether dim d is reduced.
ReduceGeometry MakeReduceGeometry(const std::vector<int64_t>& dims, const std::vector<bool>& reduce);

// Input offset of the first element of output row r.
int64_t RowBase(const ReduceGeometry& g, int64_t r);

// Calls f(offset, n, stride) for the reduced elements of one output, in row-major order: elements
// offset, offset+stride, ..., offset+(n-1)*stride (offsets relative to the row base).
template <typename F>
void ForEachReducedRun(const ReduceGeometry& g, F&& f) {
  const int nr = static_cast<int>(g.red_dims.size());
  if (nr == 0) {
    f(int64_t{0}, int64_t{1}, int64_t{0});
    return;
  }
  if (g.count == 0) return;
  const int64_t last_n = g.red_dims[nr - 1], last_s = g.red_strides[nr - 1];
  std::vector<int64_t> idx(nr - 1, 0);
  int64_t off = 0;
  while (true) {
    f(off, last_n, last_s);
    int d = nr - 2;
    for (; d >= 0; --d) {
      off += g.red_strides[d];
      if (++idx[d] < g.red_dims[d]) break;
      off -= idx[d] * g.red_strides[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// The sum, in double, of n contiguous elements (T float or double) as ReduceSum's kernel sums each contiguous run
// of the reduced elements (eight lanes, a fixed fold, the tail in order); a fused kernel that sums its own output
// run by run in the same order gives ReduceSum's bits (cpu_ops/norm.h BatchNormGrad's dx_sum).
template <typename T>
double SumRun(const T* p, int64_t n);

// y has g.out_numel() elements. T: float, double, float16, bfloat16, int32_t, int64_t.
template <typename T>
void Reduce(ReduceKind kind, const ReduceGeometry& g, const T* x, T* y);

// Index of the max (min) along the middle dim of [outer, n, inner]; first occurrence unless select_last.
// n must be >= 1. y has outer*inner elements.
template <typename T>
void ArgReduce(bool is_max, bool select_last, int64_t outer, int64_t n, int64_t inner, const T* x, int64_t* y);

// Cumulative sum along the middle dim of [outer, n, inner].
template <typename T>
void CumSum(bool exclusive, bool reverse, int64_t outer, int64_t n, int64_t inner, const T* x, T* y);

// y[j] = sum over r of x[r * cols + j] ([rows, cols] -> [cols]: a bias gradient, ReduceToShape over leading axes).
// Each column in row order, in double, rounded once to T through float for the half types (float16/bfloat16 are
// first widened to float, then to double); column blocks across the threads, each block's rows streamed once.
// T: float, double, float16, bfloat16.
template <typename T>
void SumRowsToColumns(const T* x, int64_t rows, int64_t cols, T* y);
// The same over `batch` consecutive [rows, cols] matrices into batch rows of y ([batch, rows, cols] -> [batch, cols]:
// a channels-last activation's gradient summed over H, W per image), in parallel over the images and column blocks;
// each column's sum the bits SumRowsToColumns gives it.
template <typename T>
void SumRowsToColumnsBatched(const T* x, int64_t batch, int64_t rows, int64_t cols, T* y);

}  // namespace ot::cpu
