#include "cpu_ops/fused_elementwise.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "cpu_ops/fused_elementwise_impl.h"
#include "cpu_ops/half_convert.h"
#include "cpu_ops/row_grad.h"
#include "cpu_ops/row_sum.h"
#include "cpu_ops/softmax.h"
#include "kernel_common/cluster_idioms.h"
#include "kernel_common/scalar_math.h"

namespace ot::cpu {

using cluster::DType;
using cluster::Instr;
using cluster::Op;
using cluster::Program;
using cluster::RowIdiom;
using namespace fused;  // NOLINT: the plan's types (cpu_ops/fused_elementwise_impl.h)

namespace {

// ---- loads and stores between storage types and float tiles ----

template <typename F>
void WithStorage(DType t, const void* p, F&& f) {
  switch (t) {
    case DType::kF32:
      return f(static_cast<const float*>(p));
    case DType::kF16:
      return f(static_cast<const float16*>(p));
    case DType::kBF16:
      return f(static_cast<const bfloat16*>(p));
    case DType::kBool:
      return f(static_cast<const uint8_t*>(p));
  }
}

template <typename T>
inline float LoadOne(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, uint8_t>)
    return p[i] != 0 ? 1.f : 0.f;
  else
    return static_cast<float>(p[i]);
}

template <typename T>
void LoadContig(const T* src, float* dst, int64_t n) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] != 0 ? 1.f : 0.f;
  } else if constexpr (std::is_same_v<T, float>) {
    std::memcpy(dst, src, n * sizeof(float));
  } else {
    LoadFloats(src, dst, n);
  }
}

// dst[0..len) = target elements [start, start + len) of the input (plan p is not kScalar).
template <typename T>
void LoadTile(const InputPlan& p, const T* src, int64_t start, int64_t len, float* dst) {
  switch (p.kind) {
    case InputPlan::kContig:
      return LoadContig(src + start, dst, len);
    case InputPlan::kScalar: {
      const float v = LoadOne(src, 0);
      std::fill(dst, dst + len, v);
      return;
    }
    case InputPlan::kBlock: {
      if (p.inner == 1) {  // wraps around the input: contiguous runs
        int64_t pos = start % p.mid;
        for (int64_t k = 0; k < len;) {
          const int64_t m = std::min(p.mid - pos, len - k);
          LoadContig(src + pos, dst + k, m);
          k += m;
          pos = 0;
        }
      } else {  // each input element repeated `inner` times
        int64_t q = start / p.inner, off = start % p.inner;
        for (int64_t k = 0; k < len; ++q) {
          const int64_t m = std::min(p.inner - off, len - k);
          const float v = LoadOne(src, q % p.mid);
          std::fill(dst + k, dst + k + m, v);
          k += m;
          off = 0;
        }
      }
      return;
    }
    case InputPlan::kGeneral: {
      const int rank = static_cast<int>(p.dims.size()), last = rank - 1;
      int64_t idx[16] = {}, off = 0, rem = start;
      std::vector<int64_t> big_idx;
      int64_t* ix = idx;
      if (rank > 16) {
        big_idx.assign(rank, 0);
        ix = big_idx.data();
      }
      for (int d = last; d >= 0; --d) {
        ix[d] = rem % p.dims[d];
        rem /= p.dims[d];
        off += ix[d] * p.strides[d];
      }
      const int64_t st = p.strides[last];
      for (int64_t k = 0; k < len;) {
        const int64_t m = std::min(p.dims[last] - ix[last], len - k);
        for (int64_t j = 0; j < m; ++j) dst[k + j] = LoadOne(src, off + j * st);
        k += m;
        if (k >= len) break;
        off -= ix[last] * st;  // rewind the innermost dim, carry into the outer ones
        ix[last] = 0;
        for (int d = last - 1; d >= 0; --d) {
          off += p.strides[d];
          if (++ix[d] < p.dims[d]) break;
          off -= ix[d] * p.strides[d];
          ix[d] = 0;
        }
      }
      return;
    }
  }
}

void StoreTile(DType t, const float* src, void* base, int64_t start, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(static_cast<float*>(base) + start, src, n * sizeof(float));
      return;
    case DType::kF16:
      StoreFloats(src, static_cast<float16*>(base) + start, n);
      return;
    case DType::kBF16:
      StoreFloats(src, static_cast<bfloat16*>(base) + start, n);
      return;
    case DType::kBool: {
      uint8_t* d = static_cast<uint8_t*>(base) + start;
      for (int64_t i = 0; i < n; ++i) d[i] = src[i] != 0.f;
      return;
    }
  }
}

// ---- rounding to a dtype ----

// One float rounded to bfloat16 and back: FloatToBf16Bits (round to nearest even, NaN kept quiet) without its
// branch, and the NaN test a signed compare of magnitudes below 2^31, so a loop of it vectorizes in both clones.
inline __attribute__((always_inline)) float Bf16Round(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u;
  const uint32_t quiet_nan = (x | 0x00400000u) & 0xffff0000u;
  return std::bit_cast<float>(static_cast<int32_t>(x & 0x7fffffffu) > 0x7f800000 ? quiet_nan : rounded);
}

// Every float of v[0..n) through Bf16Round (as an unsigned compare the loop stayed scalar: a third of a bf16
// cluster's time).
OT_VEC_CLONES void RoundBf16InPlace(float* __restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = Bf16Round(v[i]);
}

// In place; u16: n uint16 of scratch. Bit-identical to RoundScalar (half_convert.h's bulk conversions are
// bit-identical to half.h; the bf16 loop is FloatToBf16Bits without its branch).
void RoundVec(DType t, float* __restrict v, int64_t n, uint16_t* u16) {
  switch (t) {
    case DType::kF32:
      return;
    case DType::kF16:
      FloatToHalf(v, reinterpret_cast<float16*>(u16), n);
      HalfToFloat(reinterpret_cast<const float16*>(u16), v, n);
      return;
    case DType::kBF16:
      return RoundBf16InPlace(v, n);
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] != 0.f ? 1.f : 0.f;
      return;
  }
}

// Ops whose result is already 0 or 1 (bool rounding is a no-op).
bool MakesBool(Op op) { return (op >= Op::kLess && op <= Op::kXor) || op == Op::kNot; }
// Ops whose result is one of their operands' values or exact in any format (rounding to the operands' dtype is
// a no-op): skipped when the value operands have the instruction's dtype.
bool Selects(Op op) {
  switch (op) {
    case Op::kNeg:
    case Op::kAbs:
    case Op::kRelu:
    case Op::kIdentity:
    case Op::kFloor:
    case Op::kCeil:
    case Op::kMax:
    case Op::kMin:
    case Op::kWhere:
    case Op::kReluGrad:
    case Op::kSign:
    case Op::kCast:
      return true;
    default:
      return false;
  }
}

// ---- the element loops ----

// Loops kept free of branches other than selects, so GCC vectorizes them (-O3); o never aliases an operand. Compiled
// for AVX2 and for the baseline (OT_VEC_CLONES; the only fmas are vec_math's explicit ones, so both clones give
// bit-identical results), the float exp/erf/tanh being kernel_common/vec_math.h's through scalar_math.h -- the
// functions the op-by-op kernels call. OT_FLATTEN: the element function is inlined at every call site of each clone.
template <typename F>
OT_VEC_CLONES OT_FLATTEN void Map1(F f, const Val& a, float* __restrict o, int64_t n) {
  if (a.scalar) {
    const float r = f(a.s);
    for (int64_t i = 0; i < n; ++i) o[i] = r;
  } else {
    const float* x = a.p;
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
  }
}

// Map2's row-broadcast loop for rows of RL elements (RL a compile-time constant, 0: rl at run time): with RL
// fixed, a row is a few whole vectors with no remainder loop around them; with the run-time count the loop's
// prologue and epilogue were paid once per row (the tiny LM's four attention clusters, rows of 32: 1.20 -> 1.04-1.08
// ms per step, now below the 1.13 ms of the Div, Add, Softmax and SoftmaxGrad kernels they replace).
template <int64_t RL, typename F>
inline __attribute__((always_inline)) void MapRows(F f, const Val& a, const Val& b, float* __restrict o, int64_t n,
                                                   int64_t rl_runtime) {
  const int64_t rl = RL > 0 ? RL : rl_runtime;
  const int64_t rows = n / rl;
  if (a.rl > 0) {
    for (int64_t r = 0; r < rows; ++r) {
      const float x = a.p[r];
      const float* y = b.p + r * rl;
      float* q = o + r * rl;
      for (int64_t k = 0; k < rl; ++k) q[k] = f(x, y[k]);
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = a.p + r * rl;
      const float y = b.p[r];
      float* q = o + r * rl;
      for (int64_t k = 0; k < rl; ++k) q[k] = f(x[k], y);
    }
  }
}

template <typename F>
OT_VEC_CLONES OT_FLATTEN void Map2(F f, const Val& a, const Val& b, float* __restrict o, int64_t n) {
  if (a.rl > 0 || b.rl > 0) {  // one operand one value per row, the other full: the short inner loop vectorizes
    const int64_t rl = a.rl > 0 ? a.rl : b.rl;
    switch (rl) {
      case 8:
        return MapRows<8>(f, a, b, o, n, rl);
      case 16:
        return MapRows<16>(f, a, b, o, n, rl);
      case 32:
        return MapRows<32>(f, a, b, o, n, rl);
      default:
        return MapRows<0>(f, a, b, o, n, rl);
    }
  }
  if (a.scalar && b.scalar) {
    const float r = f(a.s, b.s);
    for (int64_t i = 0; i < n; ++i) o[i] = r;
  } else if (a.scalar) {
    const float x = a.s;
    const float* y = b.p;
    for (int64_t i = 0; i < n; ++i) o[i] = f(x, y[i]);
  } else if (b.scalar) {
    const float* x = a.p;
    const float y = b.s;
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y);
  } else {
    const float* x = a.p;
    const float* y = b.p;
    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
  }
}

template <bool SA, bool SB, bool SC>
void WhereLoop(const Val& a, const Val& b, const Val& c, float* __restrict o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = SA ? a.s : a.p[i], y = SB ? b.s : b.p[i], z = SC ? c.s : c.p[i];
    o[i] = x != 0.f ? y : z;
  }
}

void Where(const Val& a, const Val& b, const Val& c, float* o, int64_t n) {
  const int k = (a.scalar ? 4 : 0) | (b.scalar ? 2 : 0) | (c.scalar ? 1 : 0);
  switch (k) {
    case 0:
      return WhereLoop<false, false, false>(a, b, c, o, n);
    case 1:
      return WhereLoop<false, false, true>(a, b, c, o, n);
    case 2:
      return WhereLoop<false, true, false>(a, b, c, o, n);
    case 3:
      return WhereLoop<false, true, true>(a, b, c, o, n);
    case 4:
      return WhereLoop<true, false, false>(a, b, c, o, n);
    case 5:
      return WhereLoop<true, false, true>(a, b, c, o, n);
    case 6:
      return WhereLoop<true, true, false>(a, b, c, o, n);
    default:
      return WhereLoop<true, true, true>(a, b, c, o, n);
  }
}

// o[0..n) = the op of in over operands v (each an array of n or a scalar). The formulas are the op-by-op
// kernels' (cpu_ops/elementwise_*.cc, executor/kernels/internal.cc, gelu_grad.cc), in float.
template <bool kRoundBf16>
void ApplyOp(const Instr& in, const Val* v, float* o, int64_t n) {
  // The element function, its result rounded to bfloat16 in the same loop when kRoundBf16 (no second pass).
  auto fin = [](auto f) {
    if constexpr (kRoundBf16)
      return [f](auto... x) { return Bf16Round(f(x...)); };
    else
      return f;
  };
  const float alpha = in.imm;
  const bool tanh_form = in.imm != 0.f;
  switch (in.op) {
    case Op::kNeg:
      return Map1(fin([](float x) { return -x; }), v[0], o, n);
    case Op::kAbs:
      return Map1(fin([](float x) { return std::fabs(x); }), v[0], o, n);
    case Op::kSign:
      return Map1(fin([](float x) { return math::Sign(x); }), v[0], o, n);
    case Op::kExp:
      return Map1(fin([](float x) { return math::Exp(x); }), v[0], o, n);
    case Op::kLog:
      return Map1(fin([](float x) { return std::log(x); }), v[0], o, n);
    case Op::kSqrt:
      return Map1(fin([](float x) { return std::sqrt(x); }), v[0], o, n);
    case Op::kReciprocal:
      return Map1(fin([](float x) { return 1.f / x; }), v[0], o, n);
    case Op::kTanh:
      return Map1(fin([](float x) { return math::Tanh(x); }), v[0], o, n);
    case Op::kSigmoid:
      return Map1(fin([](float x) { return math::Sigmoid(x); }), v[0], o, n);
    case Op::kRelu:
      return Map1(fin([](float x) { return math::Relu(x); }), v[0], o, n);
    case Op::kErf:
      return Map1(fin([](float x) { return math::Erf(x); }), v[0], o, n);
    case Op::kFloor:
      return Map1(fin([](float x) { return std::floor(x); }), v[0], o, n);
    case Op::kCeil:
      return Map1(fin([](float x) { return std::ceil(x); }), v[0], o, n);
    case Op::kNot:
      return Map1(fin([](float x) { return x == 0.f ? 1.f : 0.f; }), v[0], o, n);
    case Op::kLeakyRelu:
      return Map1(fin([=](float x) { return math::LeakyRelu(x, alpha); }), v[0], o, n);
    case Op::kGelu:
      if (tanh_form) return Map1(fin([](float x) { return math::GeluTanh(x); }), v[0], o, n);
      return Map1(fin([](float x) { return math::GeluErf(x); }), v[0], o, n);
    case Op::kIdentity:
    case Op::kCast:
      return Map1(fin([](float x) { return x; }), v[0], o, n);  // the rounding to dtype does the cast
    case Op::kAdd:
      return Map2(fin([](float x, float y) { return x + y; }), v[0], v[1], o, n);
    case Op::kSub:
      return Map2(fin([](float x, float y) { return x - y; }), v[0], v[1], o, n);
    case Op::kMul:
      return Map2(fin([](float x, float y) { return x * y; }), v[0], v[1], o, n);
    case Op::kDiv:
      return Map2(fin([](float x, float y) { return x / y; }), v[0], v[1], o, n);
    case Op::kPow:  // in double, as the Pow kernel (elementwise_variadic.cc)
      // A constant exponent of 2 or 1 (T5's RMS norm, x^2, and its gradient's x^1) as the same bits without pow:
      // x^2 of a float is exact in double, so its rounding to float is the float product x * x; x^1 is x. The
      // scalar std::pow made those clusters ~10x slower than their neighbours (2 ms for [4, 128, 512]).
      if (v[1].scalar && v[1].rl == 0 && v[1].s == 2.f) return Map1(fin([](float x) { return x * x; }), v[0], o, n);
      if (v[1].scalar && v[1].rl == 0 && v[1].s == 1.f) return Map1(fin([](float x) { return x; }), v[0], o, n);
      return Map2(fin([](float x, float y) { return static_cast<float>(std::pow(double(x), double(y))); }), v[0], v[1],
                  o, n);
    case Op::kMax:
      return Map2(fin([](float x, float y) { return math::NanMax(x, y); }), v[0], v[1], o, n);
    case Op::kMin:
      return Map2(fin([](float x, float y) { return math::NanMin(x, y); }), v[0], v[1], o, n);
    case Op::kLess:
      return Map2(fin([](float x, float y) { return x < y ? 1.f : 0.f; }), v[0], v[1], o, n);
    case Op::kLessEqual:
      return Map2(fin([](float x, float y) { return x <= y ? 1.f : 0.f; }), v[0], v[1], o, n);
    case Op::kGreater:
      return Map2(fin([](float x, float y) { return x > y ? 1.f : 0.f; }), v[0], v[1], o, n);
    case Op::kGreaterEqual:
      return Map2(fin([](float x, float y) { return x >= y ? 1.f : 0.f; }), v[0], v[1], o, n);
    case Op::kEqual:
      return Map2(fin([](float x, float y) { return x == y ? 1.f : 0.f; }), v[0], v[1], o, n);
    case Op::kAnd:
      return Map2(fin([](float x, float y) { return (x != 0.f) & (y != 0.f) ? 1.f : 0.f; }), v[0], v[1], o, n);
    case Op::kOr:
      return Map2(fin([](float x, float y) { return (x != 0.f) | (y != 0.f) ? 1.f : 0.f; }), v[0], v[1], o, n);
    case Op::kXor:
      return Map2(fin([](float x, float y) { return (x != 0.f) != (y != 0.f) ? 1.f : 0.f; }), v[0], v[1], o, n);
    case Op::kReluGrad:
      return Map2(fin([](float d, float x) { return math::ReluGrad(d, x); }), v[0], v[1], o, n);
    case Op::kGeluGrad:
      if (tanh_form) return Map2(fin([](float d, float x) { return math::GeluGradTanh(d, x); }), v[0], v[1], o, n);
      return Map2(fin([](float d, float x) { return math::GeluGradErf(d, x); }), v[0], v[1], o, n);
    case Op::kWhere:
      Where(v[0], v[1], v[2], o, n);
      if (kRoundBf16) RoundBf16InPlace(o, n);
      return;
    default:
      break;
  }
  throw std::logic_error(std::string("FusedKernel: ") + cluster::OpName(in.op) + " is not elementwise");
}

// The max (or min) of x[0..n): ReduceMaxStep/ReduceMinStep (v replaces acc when larger (smaller) or NaN, unless acc
// is NaN already) over eight lanes held in one GCC vector (AVX in the x86-64-v3 clone, two SSE halves in the
// baseline; the compiler does not vectorize the scalar select chain itself), the lanes then combined. A NaN
// propagates; the result is exact, only the sign of a zero result may depend on the lanes (max(-0, +0) keeps the
// first it sees), which no consumer can tell apart.
// R rows of len (row stride len) at a time, their chains interleaved, into o[R]; the lanes combined as a tree
// (8 -> 4 -> 2 -> 1: lanes (i, i + 4), then (i, i + 2), then (0, 1)) in vector selects, no branch.
template <bool kMax, int R>
inline __attribute__((always_inline)) void MaxMin8(const float* x, int64_t len, float* o) {
  typedef float V8 __attribute__((vector_size(32)));
  typedef int32_t M8 __attribute__((vector_size(32)));
  typedef float V4 __attribute__((vector_size(16)));
  typedef int32_t M4 __attribute__((vector_size(16)));
  const float init = kMax ? -INFINITY : INFINITY;
  V8 acc[R];
  for (int q = 0; q < R; ++q) acc[q] = V8{init, init, init, init, init, init, init, init};
  int64_t j = 0;
  for (; j + 8 <= len; j += 8)
    for (int q = 0; q < R; ++q) {
      V8 v;
      std::memcpy(&v, x + q * len + j, sizeof v);
      const M8 take = ((kMax ? v > acc[q] : v < acc[q]) | (v != v)) & (acc[q] == acc[q]);
      acc[q] = take ? v : acc[q];
    }
  auto step = [](float a, float v) { return kMax ? math::ReduceMaxStep(a, v) : math::ReduceMinStep(a, v); };
  // acc the running value, v the candidate: v replaces acc when larger (smaller) or NaN, unless acc is NaN.
  auto vstep = [](V4 a, V4 v) {
    const M4 t = ((kMax ? v > a : v < a) | (v != v)) & (a == a);
    return t ? v : a;
  };
  for (int q = 0; q < R; ++q) {
    const V4 a4 =
        vstep(__builtin_shufflevector(acc[q], acc[q], 0, 1, 2, 3), __builtin_shufflevector(acc[q], acc[q], 4, 5, 6, 7));
    const V4 a2 = vstep(a4, __builtin_shufflevector(a4, a4, 2, 3, 2, 3));
    const V4 a1 = vstep(a2, __builtin_shufflevector(a2, a2, 1, 1, 1, 1));
    float m = a1[0];
    for (int64_t k = j; k < len; ++k) m = step(m, x[q * len + k]);
    o[q] = m;
  }
}

// The row reductions of rows x[r*len .. (r+1)*len) into o[r], r < rows. Sums accumulate in double over four
// interleaved lanes combined in a fixed order (vectorizable, and the same for any thread count); the mean divides
// the double sum by the row length; max/min propagate NaN (cpu_ops/reduce.cc). An empty row: sum 0, mean NaN,
// max -inf, min +inf.
OT_VEC_CLONES void Reduce(Op op, const float* x, int64_t rows, int64_t len, float* o) {
  if (op == Op::kReduceSum || op == Op::kReduceMean) {
    // The unfused softmax kernels' order (cpu_ops/row_sum.h), four rows' chains at a time.
    constexpr int64_t kGroup = 64;
    double s[kGroup];
    for (int64_t r0 = 0; r0 < rows; r0 += kGroup) {
      const int64_t n = std::min(kGroup, rows - r0);
      RowSums(x + r0 * len, n, len, len, s);
      for (int64_t q = 0; q < n; ++q)
        o[r0 + q] = static_cast<float>(op == Op::kReduceMean ? s[q] / static_cast<double>(len) : s[q]);
    }
    return;
  }
  const bool max = op == Op::kReduceMax;
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4)
    max ? MaxMin8<true, 4>(x + r * len, len, o + r) : MaxMin8<false, 4>(x + r * len, len, o + r);
  for (; r < rows; ++r) max ? MaxMin8<true, 1>(x + r * len, len, o + r) : MaxMin8<false, 1>(x + r * len, len, o + r);
}

// Rows shorter than this are spread into a temp when a Where reads a row value (one long loop instead of a call
// per row).
constexpr int64_t kShortRow = 64;

}  // namespace

FusedKernel::~FusedKernel() = default;
FusedKernel::FusedKernel(const FusedKernel&) = default;
FusedKernel& FusedKernel::operator=(const FusedKernel&) = default;

// Scratch slots: one per tile when there are no more tiles than threads (tile t uses slot t, whichever thread
// runs it), else one per thread (slot = the thread's index in the arena). A kernel of a few big tiles (long rows)
// so never reserves more slots than it can use.
static int64_t NumSlots(const FusedKernel::Impl& m);

size_t FusedKernel::workspace_bytes() const {
  return static_cast<size_t>(impl_->slot_floats) * sizeof(float) * static_cast<size_t>(NumSlots(*impl_));
}
const Program& FusedKernel::program() const { return impl_->prog; }
int FusedKernel::row_routines() const {
  return static_cast<int>(
      std::count_if(impl_->idiom.begin(), impl_->idiom.end(), [](RowIdiom r) { return r != RowIdiom::kNone; }));
}
int64_t FusedKernel::num_tiles() const { return impl_->num_tiles; }
int64_t FusedKernel::tile_elements() const { return impl_->tile_units * impl_->unit; }
int64_t FusedKernel::rows() const { return impl_->rows; }
int64_t FusedKernel::numel() const { return impl_->numel; }

void FusedKernel::Impl::RunTile(int64_t t, const void* const* in, void* const* out, float* ws, Val* vals,
                                bool direct) const {
  const int64_t u0 = t * tile_units, nu = std::min(tile_units, total_units - u0);
  const int64_t e0 = u0 * unit, ne = nu * unit;  // full elements of the tile
  const int64_t r0 = u0, nr = nu;                // rows of the tile (with has_rows)
  float* tmp = ws + tmp_base;
  uint16_t* u16 = reinterpret_cast<uint16_t*>(ws + u16_base);
  const size_t n = prog.code.size();
  for (size_t i = 0; i < n; ++i) {
    if (kind[i] == VKind::kDead) continue;
    const Instr& ins = prog.code[i];
    const int64_t start = ins.row ? r0 : e0, len = ins.row ? nr : ne;
    Val& v = vals[i];
    float* o = kind[i] == VKind::kReg ? ws + (ins.row ? row_base + reg[i] * rowreg_len : reg[i] * full_len) : nullptr;
    if (direct && static_cast<int>(i) == direct_instr) o = static_cast<float*>(out[direct_out]) + e0;
    v.p = o;
    v.scalar = false;
    if (ins.op == Op::kInput) {
      const InputPlan& pl = plan[i];
      if (kind[i] == VKind::kView) {
        v.p = static_cast<const float*>(in[pl.input]) + (pl.kind == InputPlan::kBlock ? start % pl.mid : start);
      } else if (kind[i] == VKind::kScalar) {
        WithStorage(pl.type, in[pl.input], [&](auto* src) { v.s = RoundScalar(ins.dtype, LoadOne(src, 0)); });
        v.scalar = true;
      } else {
        WithStorage(pl.type, in[pl.input], [&](auto* src) { LoadTile(pl, src, start, len, o); });
        if (ins.dtype != pl.type && ins.dtype != DType::kF32 && pl.type != DType::kBool)
          RoundVec(ins.dtype, o, len, u16);
      }
      continue;
    }
    if (ins.op == Op::kConst) {
      v.s = scalar[i];
      v.scalar = true;
      continue;
    }
    if (idiom[i] != RowIdiom::kNone) {
      // Operands full and not scalar (checked when matched); o never aliases them (a register, or the direct output
      // only when no operand view is its memory) -- and both routines allow it anyway.
      if (idiom[i] == RowIdiom::kSoftmax)
        SoftmaxRowsF32(nr, row_len, vals[ins.a].p, o);
      else
        SoftmaxGradRowsF32(nr, row_len, vals[ins.a].p, vals[ins.b].p, o);
      if (ins.dtype != DType::kF32) RoundVec(ins.dtype, o, len, u16);
      continue;
    }
    if (cluster::IsReduction(ins.op)) {
      const Val& x = vals[ins.a];
      const float* src = x.p;
      if (x.scalar) {
        std::fill(tmp, tmp + ne, x.s);
        src = tmp;
      }
      Reduce(ins.op, src, nr, row_len, o);
      RoundVec(ins.dtype, o, nr, u16);
      continue;
    }
    const int ar = cluster::Arity(ins.op);
    const int32_t opi[3] = {ins.a, ins.b, ins.c};
    Val ops[3];
    bool row_operand = false, skip_round = Selects(ins.op);
    for (int k = 0; k < ar; ++k) {
      ops[k] = vals[opi[k]];
      row_operand |= !ins.row && prog.code[opi[k]].row && !ops[k].scalar;
      if (!(ins.op == Op::kWhere && k == 0)) skip_round &= prog.code[opi[k]].dtype == ins.dtype;
    }
    if (ins.dtype == DType::kBool && MakesBool(ins.op)) skip_round = true;
    // A bf16 result is rounded inside the op's own loop; other dtypes in a pass of RoundVec after it.
    const bool round_in_loop = !skip_round && ins.dtype == DType::kBF16;
    auto apply = round_in_loop ? &ApplyOp<true> : &ApplyOp<false>;
    if (kind[i] == VKind::kScalar) {
      float r = 0.f;
      ApplyOp<false>(ins, ops, &r, 1);
      v.s = RoundScalar(ins.dtype, r);
      v.scalar = true;
      continue;
    }
    if (!row_operand || row_len == 1) {
      // Same-shaped operands (a row value in a full op with one-element rows is laid out like the full value).
      apply(ins, ops, o, len);
    } else if (ar == 2 && !ops[0].scalar && !ops[1].scalar && prog.code[opi[0]].row != prog.code[opi[1]].row) {
      // A binary op of a row and a full array: Map2 broadcasts the row value along its row, every row of the tile
      // in one call (rows of 128 as one call each: 4% slower over a softmax cluster).
      ops[prog.code[opi[0]].row ? 0 : 1].rl = row_len;
      apply(ins, ops, o, len);
    } else if (row_len < kShortRow) {
      // Short rows otherwise (Where): each row operand spread over its row into a temp, then one loop over the tile.
      for (int k = 0; k < ar; ++k) {
        if (!prog.code[opi[k]].row || ops[k].scalar) continue;
        float* spread = tmp + k * tmp_len;
        for (int64_t r = 0; r < nr; ++r) std::fill(spread + r * row_len, spread + (r + 1) * row_len, ops[k].p[r]);
        ops[k].p = spread;
      }
      apply(ins, ops, o, len);
    } else {
      // A full op with a row operand: row by row, the row operand a scalar within its row.
      Val seg[3];
      for (int64_t r = 0; r < nr; ++r) {
        for (int k = 0; k < ar; ++k) {
          seg[k] = ops[k];
          if (ops[k].scalar) continue;
          if (prog.code[opi[k]].row) {
            seg[k].s = ops[k].p[r];
            seg[k].scalar = true;
          } else {
            seg[k].p = ops[k].p + r * row_len;
          }
        }
        apply(ins, seg, o + r * row_len, row_len);
      }
    }
    if (!skip_round && !round_in_loop) RoundVec(ins.dtype, o, len, u16);
  }
  // Outputs, after every input of the tile was read (in place is safe).
  for (size_t j = 0; j < prog.outputs.size(); ++j) {
    const int32_t i = prog.outputs[j];
    if (direct && static_cast<int>(j) == direct_out) continue;  // computed in place
    const Instr& ins = prog.code[i];
    const int64_t start = ins.row ? r0 : e0, len = ins.row ? nr : ne;
    const float* src = vals[i].p;
    if (vals[i].scalar) {
      std::fill(tmp, tmp + len, vals[i].s);
      src = tmp;
    }
    StoreTile(ins.dtype, src, out[j], start, len);
  }
}

static int64_t NumSlots(const FusedKernel::Impl& m) { return std::min<int64_t>(m.max_threads, m.num_tiles); }

void FusedKernel::Run(const void* const* in, void* const* out, void* workspace) const {
  const Impl& m = *impl_;
  if (m.num_tiles == 0) return;
  if (workspace == nullptr) throw std::invalid_argument("FusedElementwise: no workspace given");
  const size_t slot_bytes = static_cast<size_t>(m.slot_floats) * sizeof(float);
  const bool slot_per_tile = m.num_tiles <= m.max_threads;
  // The direct output (if any) only when no input view its instruction reads is that output's memory (in place):
  // the loops take their result array as __restrict.
  bool direct = m.direct_instr >= 0;
  if (direct) {
    const Instr& ins = m.prog.code[m.direct_instr];
    const int32_t opi[3] = {ins.a, ins.b, ins.c};
    for (int k = 0; k < cluster::Arity(ins.op); ++k)
      if (m.kind[opi[k]] == VKind::kView && in[m.plan[opi[k]].input] == out[m.direct_out]) direct = false;
  }
  auto body = [&](const tbb::blocked_range<int64_t>& r) {
    int64_t slot = 0;
    if (!slot_per_tile) {
      slot = tbb::this_task_arena::current_thread_index();
      if (slot < 0 || slot >= m.max_threads)
        throw std::logic_error("FusedElementwise: thread slot " + std::to_string(slot) + " but max_threads is " +
                               std::to_string(m.max_threads));
    }
    std::vector<Val> vals(m.prog.code.size());
    for (int64_t t = r.begin(); t < r.end(); ++t) {
      float* ws = reinterpret_cast<float*>(static_cast<char*>(workspace) + (slot_per_tile ? t : slot) * slot_bytes);
      m.RunTile(t, in, out, ws, vals.data(), direct);
    }
  };
  const tbb::blocked_range<int64_t> tiles(0, m.num_tiles, 1);
  if (m.num_tiles == 1) {
    body(tiles);
  } else if (!slot_per_tile && tbb::this_task_arena::max_concurrency() > m.max_threads) {
    // Called from an arena wider than max_threads (or from no arena: the default one is as wide as the machine):
    // an arena of max_threads threads, so every thread index is a slot.
    tbb::task_arena arena(m.max_threads);
    arena.execute([&] { tbb::parallel_for(tiles, body); });
  } else {
    tbb::parallel_for(tiles, body);
  }
}

}  // namespace ot::cpu
