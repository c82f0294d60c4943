// What the epilogue kernels (matmul_epilogue.cc, conv_epilogue.cc) share: the folded cluster program read against
// Y, how each program operand and output moves from one block of Y to the next, the kernel's scratch, and each
// block's pointers. A block is a run of whole units of Y (rows of a GEMM's result, images of a convolution's).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "executor/kernel_registry.h"
#include "kernel_common/cluster_program.h"

namespace ot {

struct EpilogueProgram {
  cluster::Program p;
  std::vector<std::vector<int64_t>> dims;  // program input i's dims: 0 = Y, i >= 1 = the node's input i + 2
  std::vector<cluster::DType> types;
  std::vector<bool> is_full, is_row;  // loaded as a full value / as a row value somewhere in the program
};

// Parses the node's `program` with Y = ydims of type yt as its input 0. Fails naming the node when the program is
// malformed, reads another number of inputs than Y and the node's inputs 3.., does not load Y as a full value, or
// iterates over another domain than Y's shape; UnsupportedError for an operand type clusters do not take.
EpilogueProgram ReadEpilogueProgram(const KernelContext& ctx, const std::vector<int64_t>& ydims, DataType y_type);

// How a program operand or output moves between blocks: not at all, or `step` elements per unit.
struct BlockStride {
  bool advances = false;
  int64_t step = 0;
  size_t elem_size = 0;
};

// n rounded up to a cache line (64 bytes): the pieces of an epilogue's workspace.
inline size_t AlignUp64(size_t n) { return (n + 63) / 64 * 64; }

// The kernel's scratch: io.workspace, or outside a plan (tests, folding) `bytes` of its own, held by `own`.
using OwnedScratch = std::unique_ptr<void, void (*)(void*)>;
uint8_t* EpilogueScratch(const KernelIO& io, size_t bytes, const char* op, OwnedScratch& own);

// The program's inputs and outputs for the block whose first unit is `first`: input 0 is the block of Y (y_block),
// input i >= 1 the node's input i + 2, each moved by its stride.
void BlockPointers(const KernelIO& io, const void* y_block, const std::vector<BlockStride>& in,
                   const std::vector<BlockStride>& out, int64_t first, std::vector<const void*>& ins,
                   std::vector<void*>& outs);

}  // namespace ot
