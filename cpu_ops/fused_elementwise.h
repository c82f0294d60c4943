// The CPU interpreter of a fused cluster (kernel_common/cluster_program.h): one pass over the domain in tiles that
// stay in cache, every instruction computed over a whole tile in float registers (arrays of tile length), each
// result rounded to its dtype exactly as a tensor of that dtype would hold it, so the cluster computes bit for bit
// what its ops computed one by one wherever the math functions are the same (sums of row reductions accumulate in
// double in a fixed order, so they may differ from a reduce kernel in the last bit). No IR types.
//
// Tiles: without row values a tile is kTileElements elements of the flat domain; with row values (a program with
// reduce_axes > 0 and a row instruction) it is a whole number of rows, at least one row (a long row makes one big
// tile). Tiles run in parallel (tbb::parallel_for); every tile is computed by one thread alone, and a row is
// reduced inside one tile in a fixed order, so the result never depends on the thread count or the schedule.
//
// In place: an output may share its buffer with an input of the same element count and element size: a tile reads
// everything it needs of its inputs before it stores any output (outputs are stored at the end of the tile), and a
// tile stores only its own elements.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernel_common/cluster_program.h"

namespace ot::cpu {

class FusedKernel {
 public:
  // Target elements per tile (without rows): 2048 floats = 8 KiB per register, a few registers stay in L1/L2.
  static constexpr int64_t kTileElements = 2048;

  // domain: the concrete iteration shape D; input_dims[i]: dims of input i (broadcasts to D, or to the row shape
  // for a row kInput; throws std::invalid_argument naming the input when it does not); input_types[i]: storage
  // type of input i (an input used by several kInput instructions has one type). max_threads: the most threads
  // that may run the kernel at once (scratch slots). Validates the program.
  FusedKernel(cluster::Program p, std::vector<int64_t> domain, std::vector<std::vector<int64_t>> input_dims,
              std::vector<cluster::DType> input_types, int max_threads);
  ~FusedKernel();
  FusedKernel(const FusedKernel&);
  FusedKernel& operator=(const FusedKernel&);

  // Scratch the kernel needs (tiles of registers, per slot: min(max_threads, tiles) slots, so a kernel of one
  // big tile needs one); the executor gives it from its arena.
  size_t workspace_bytes() const;
  // Output j has the dtype of its instruction and numel(D) elements (full) or rows(D) (row). Writes every output
  // element. workspace: workspace_bytes() bytes, 64-byte aligned (null when that is 0). May be called from any
  // thread, in an arena or not: with more tiles than max_threads it runs in the caller's arena when that has at
  // most max_threads slots (the executor's), else in an arena of max_threads threads it makes.
  void Run(const void* const* in, void* const* out, void* workspace) const;

  // Introspection (tests, the plan report).
  const cluster::Program& program() const;  // as run: plain copies forwarded, a row idiom's last instruction
                                            // reading the idiom's operands
  int row_routines() const;                 // row idioms run as one routine (kernel_common/cluster_idioms.h)
  int64_t num_tiles() const;
  int64_t tile_elements() const;  // full elements per tile (the last tile may be shorter)
  int64_t rows() const;           // rows(D): elements of a row output
  int64_t numel() const;          // numel(D): elements of a full output

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace ot::cpu
