// Row idioms of a cluster program (kernel_common/cluster_program.h): instruction sequences that a backend may run
// as one row routine instead of one pass per instruction. The CPU interpreter runs them with the Softmax and
// SoftmaxGrad kernels' row loops (cpu_ops/softmax.h, cpu_ops/row_grad.h), which take the very float steps of these
// instructions, so the bits are the same either way, in 3-5 fewer passes over a tile (warm-cache microbenchmark,
// attention at T = 32: SoftmaxGrad+Div 89 -> 76 us, below its unfused kernels' 86; bench/RESULTS.md, session 20).
//
//   kSoftmax      m = reduce_max x; e = exp(x - m); y = e * reciprocal(reduce_sum e)   (Softmax's decomposition)
//   kSoftmaxGrad  s = reduce_sum(dy * y); dx = y * (dy - s)                         (SoftmaxGrad's decomposition)
//
// Everything but the last instruction is f32 and read only inside the idiom (no output, no other reader); the last
// is full and may round to any float dtype; the operands x, dy, y are full values of any float dtype.
#pragma once
#include <cstdint>
#include <vector>

#include "kernel_common/cluster_program.h"

namespace ot::cluster {

enum class RowIdiom : uint8_t { kNone, kSoftmax, kSoftmaxGrad };

struct RowIdiomMatch {
  RowIdiom kind = RowIdiom::kNone;
  int32_t a = -1, b = -1;         // the routine's operands: x (kSoftmax; b = a), or dy and y (kSoftmaxGrad)
  std::vector<int32_t> internal;  // the idiom's instructions but the last: computed by nobody once it matches
};

// The idiom whose last instruction is `last`, or kind kNone. uses[i]: the reads of instruction i by the
// instructions that run, each output counting as one more.
inline RowIdiomMatch MatchRowIdiom(const Program& p, int32_t last, const std::vector<int>& uses) {
  RowIdiomMatch none;
  auto is = [&](int32_t i, Op op, bool row, int n_uses) {
    if (i < 0) return false;
    const Instr& in = p.code[i];
    return in.op == op && in.dtype == DType::kF32 && in.row == row && uses[i] == n_uses;
  };
  auto full_float = [&](int32_t i) { return i >= 0 && !p.code[i].row && p.code[i].dtype != DType::kBool; };
  const Instr& l = p.code[last];
  if (l.op != Op::kMul || l.row || l.dtype == DType::kBool || l.a < 0 || l.b < 0) return none;
  for (int side = 0; side < 2; ++side) {
    const int32_t u = side == 0 ? l.a : l.b, v = side == 0 ? l.b : l.a;
    // Softmax: last = e * r (either order), r = reciprocal(s), s = reduce_sum(e), e = exp(d), d = x - m,
    // m = reduce_max(x); e is read twice (s and last).
    if (is(u, Op::kExp, false, 2) && is(v, Op::kReciprocal, true, 1)) {
      const int32_t s = p.code[v].a, d = p.code[u].a;
      if (!is(s, Op::kReduceSum, true, 1) || p.code[s].a != u || !is(d, Op::kSub, false, 1)) continue;
      const int32_t x = p.code[d].a, m = p.code[d].b;
      if (!is(m, Op::kReduceMax, true, 1) || p.code[m].a != x || !full_float(x)) continue;
      return {RowIdiom::kSoftmax, x, x, {m, d, u, s, v}};
    }
    // SoftmaxGrad: last = y * t (either order), t = dy - s, s = reduce_sum(q), q = dy * y (either order).
    if (is(u, Op::kSub, false, 1) && full_float(v)) {
      const int32_t dy = p.code[u].a, s = p.code[u].b;
      if (!full_float(dy) || !is(s, Op::kReduceSum, true, 1)) continue;
      const int32_t q = p.code[s].a;
      if (!is(q, Op::kMul, false, 1)) continue;
      const Instr& qi = p.code[q];
      if (!((qi.a == dy && qi.b == v) || (qi.a == v && qi.b == dy))) continue;
      return {RowIdiom::kSoftmaxGrad, dy, v, {q, s, u}};
    }
  }
  return none;
}

}  // namespace ot::cluster
