// What a cluster program would cost as one CUDA kernel (one thread per element of the domain, a block per row for
// row reductions; the code generator of cuda_ops follows this shape), estimated before any code exists, so the
// fusion sizing can refuse a merge that would spill registers or overflow shared memory. Backend-neutral: only the
// program is read.
//   registers  kBaseRegisters (index arithmetic, loop and launch bookkeeping) + 2 per operand pointer (64-bit
//              addresses of inputs and outputs) + the most values live at once between instructions (each a 32-bit
//              float register; half and bool values are computed in float);
//   shared     per row reduction, one float per warp of the block (kMaxWarps) for the block-wide combine.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernel_common/cluster_program.h"

namespace ot::cluster {

struct Resources {
  int registers = 0;
  int64_t shared_bytes = 0;
  int max_live = 0;  // the live-value part of `registers`
};

constexpr int kBaseRegisters = 24;
constexpr int kMaxWarps = 32;

// Values are live from the instruction that makes them to their last reader (outputs: to the end).
inline Resources EstimateResources(const Program& p) {
  const int n = static_cast<int>(p.code.size());
  std::vector<int> last(static_cast<size_t>(n), -1);
  for (int i = 0; i < n; ++i) {
    const Instr& in = p.code[static_cast<size_t>(i)];
    for (int o : {in.a, in.b, in.c})
      if (o >= 0 && o < i && in.op != Op::kInput) last[static_cast<size_t>(o)] = i;
  }
  for (int o : p.outputs)
    if (o >= 0 && o < n) last[static_cast<size_t>(o)] = n;
  Resources r;
  int live = 0, reductions = 0;
  std::vector<int> dies_at(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) {
    const Instr& in = p.code[static_cast<size_t>(i)];
    if (IsReduction(in.op)) ++reductions;
    live -= dies_at[static_cast<size_t>(i)];         // operands read for the last time by instruction i
    if (in.op == Op::kConst) continue;               // an immediate in the instruction stream
    if (last[static_cast<size_t>(i)] < 0) continue;  // never read: computed into a scratch register
    ++live;
    r.max_live = std::max(r.max_live, live);
    ++dies_at[static_cast<size_t>(last[static_cast<size_t>(i)])];
  }
  r.registers = kBaseRegisters + 2 * (p.num_inputs + static_cast<int>(p.outputs.size())) + r.max_live;
  r.shared_bytes = static_cast<int64_t>(reductions) * kMaxWarps * 4;
  return r;
}

}  // namespace ot::cluster
