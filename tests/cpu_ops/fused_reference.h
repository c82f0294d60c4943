// The reference the fused-kernel tests hold cpu_ops/fused_elementwise against (tests/cpu_ops/fused_elementwise_test.cc,
// fused_programs_test.cc): programs built in code, tensors in their storage types, a reference that evaluates a
// program element by element -- in float64 (formulas, with a tolerance), or "exact" (ops computed in float with
// the op-by-op kernels' formulas, every result rounded to its dtype: the interpreter must match it bit for bit; row
// sums in double over four interleaved lanes, ((l0 + l1) + (l2 + l3)) + tail, the order the interpreter documents)
// -- and running the kernel with its outputs pre-filled with NaN (bool: 0xAB), so an element left unwritten fails.
#pragma once
#include <gtest/gtest.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu_ops/fused_elementwise.h"
#include "kernel_common/half.h"
#include "kernel_common/scalar_math.h"

namespace ot::cpu::fused_test {

using cluster::DType;
using cluster::Instr;
using cluster::Op;
using cluster::Program;

inline std::mt19937_64& Gen() {
  static std::mt19937_64 g(std::random_device{}());
  return g;
}
inline double Uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(Gen()); }
inline int64_t RandInt(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(Gen()); }

inline int64_t Numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

// ---- programs built in code ----

struct Builder {
  Program p;
  explicit Builder(int inputs, int reduce_axes = 0) {
    p.num_inputs = inputs;
    p.reduce_axes = reduce_axes;
  }
  int Push(Instr in) {
    p.code.push_back(in);
    return static_cast<int>(p.code.size()) - 1;
  }
  bool Row(int i) const { return p.code[i].row; }
  int In(int k, DType t = DType::kF32, bool row = false) {
    Instr in;
    in.op = Op::kInput;
    in.a = k;
    in.dtype = t;
    in.row = row;
    return Push(in);
  }
  int Const(float v, DType t = DType::kF32, bool row = false) {
    Instr in;
    in.op = Op::kConst;
    in.imm = v;
    in.dtype = t;
    in.row = row;
    return Push(in);
  }
  // Any non-leaf op; the row flag follows the operands (a reduction makes a row).
  int Op_(Op op, DType t, int a, int b = -1, int c = -1, float imm = 0.f) {
    Instr in;
    in.op = op;
    in.a = a;
    in.b = b;
    in.c = c;
    in.imm = imm;
    in.dtype = t;
    if (cluster::IsReduction(op)) {
      in.row = true;
    } else {
      in.row = true;
      for (int x : {a, b, c})
        if (x >= 0) in.row &= Row(x);
    }
    return Push(in);
  }
  void Out(std::vector<int32_t> o) { p.outputs = std::move(o); }
};

// ---- tensors in their storage types ----

inline size_t ElemSize(DType t) { return t == DType::kF32 ? 4 : t == DType::kBool ? 1 : 2; }

inline double ReadElem(DType t, const std::vector<uint8_t>& b, int64_t i) {
  switch (t) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, b.data() + 4 * i, 4);
      return f;
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      return HalfBitsToFloat(h);
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      return Bf16BitsToFloat(h);
    }
    case DType::kBool:
      return b[i];
  }
  return 0;
}

inline void WriteElem(DType t, std::vector<uint8_t>& b, int64_t i, double v) {
  const float f = static_cast<float>(v);
  switch (t) {
    case DType::kF32:
      std::memcpy(b.data() + 4 * i, &f, 4);
      return;
    case DType::kF16: {
      const uint16_t h = FloatToHalfBits(f);
      std::memcpy(b.data() + 2 * i, &h, 2);
      return;
    }
    case DType::kBF16: {
      const uint16_t h = FloatToBf16Bits(f);
      std::memcpy(b.data() + 2 * i, &h, 2);
      return;
    }
    case DType::kBool:
      b[i] = v != 0;
      return;
  }
}

struct Tensor {
  DType type = DType::kF32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  int64_t numel() const { return Numel(dims); }
  double at(int64_t i) const { return ReadElem(type, bytes, i); }
};

// Random values in [lo, hi], stored in `type` (bool: 0/1 at random). `step` > 0 quantizes (so comparisons see ties).
inline Tensor RandomTensor(DType type, std::vector<int64_t> dims, double lo = -2, double hi = 2, double step = 0) {
  Tensor t;
  t.type = type;
  t.dims = std::move(dims);
  t.bytes.assign(t.numel() * ElemSize(type), 0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = type == DType::kBool ? static_cast<double>(RandInt(0, 1)) : Uniform(lo, hi);
    if (step > 0 && type != DType::kBool) v = std::round(v / step) * step;
    WriteElem(type, t.bytes, i, v);
  }
  return t;
}

// ---- the reference ----

enum class Mode { kExact, kFloat64 };

// Index into x_dims of the element at multi-index idx of `shape`, numpy broadcasting aligned on the right.
inline int64_t BroadcastIndex(const std::vector<int64_t>& shape, const std::vector<int64_t>& x_dims,
                              const std::vector<int64_t>& idx) {
  int64_t off = 0, stride = 1;
  const int r = static_cast<int>(shape.size()), xr = static_cast<int>(x_dims.size());
  for (int d = xr - 1; d >= 0; --d) {
    const int sd = r - xr + d;
    if (sd >= 0 && x_dims[d] != 1) off += idx[sd] * stride;
    stride *= x_dims[d];
  }
  return off;
}

inline std::vector<int64_t> Unravel(int64_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    if (shape[d]) i /= shape[d];
  }
  return idx;
}

template <typename A>
A RoundTo(DType t, A v, Mode mode) {
  switch (t) {
    case DType::kF32:
      return mode == Mode::kExact ? static_cast<A>(static_cast<float>(v)) : v;
    case DType::kF16:
      return static_cast<A>(HalfBitsToFloat(FloatToHalfBits(static_cast<float>(v))));
    case DType::kBF16:
      return static_cast<A>(Bf16BitsToFloat(FloatToBf16Bits(static_cast<float>(v))));
    case DType::kBool:
      return v != A(0) ? A(1) : A(0);
  }
  return v;
}

// One element of a non-leaf, non-reduction op. Exact mode (A = float) spells the formulas as the op-by-op
// kernels do (same operation order, and their exp/erf/tanh: math::Exp/Erf/Tanh, kernel_common/vec_math.h for a
// float, std:: for a double); float64 mode uses the textbook forms.
template <typename A>
A EvalOp(const Instr& in, A x, A y, A z, Mode mode) {
  const bool exact = mode == Mode::kExact;
  const A nan = std::numeric_limits<A>::quiet_NaN();
  const A k = A(0.79788456080286535588), a3 = A(0.044715);
  switch (in.op) {
    case Op::kNeg:
      return -x;
    case Op::kAbs:
      return std::fabs(x);
    case Op::kSign:
      return x > 0 ? A(1) : x < 0 ? A(-1) : x;
    case Op::kExp:
      return math::Exp(x);
    case Op::kLog:
      return std::log(x);
    case Op::kSqrt:
      return std::sqrt(x);
    case Op::kReciprocal:
      return A(1) / x;
    case Op::kTanh:
      return math::Tanh(x);
    case Op::kSigmoid:
      if (!exact) return A(1) / (A(1) + std::exp(-x));
      return x >= 0 ? A(1) / (A(1) + math::Exp(-x)) : math::Exp(x) / (A(1) + math::Exp(x));
    case Op::kRelu:
      return x < 0 ? A(0) : x;  // NaN and -0 stay (the Relu kernel)
    case Op::kErf:
      return math::Erf(x);
    case Op::kFloor:
      return std::floor(x);
    case Op::kCeil:
      return std::ceil(x);
    case Op::kNot:
      return x == 0 ? A(1) : A(0);
    case Op::kLeakyRelu:
      return x < 0 ? A(in.imm) * x : x;
    case Op::kGelu:
      if (in.imm == 0.f)
        return exact ? math::GeluErf(x)  // a float's: x Phi(x) (vec_math's VecNormalCdfGauss)
                     : 0.5 * x * (1 + std::erf(x / std::sqrt(A(2))));
      return A(0.5) * x * (A(1) + math::Tanh(k * (x + a3 * x * x * x)));
    case Op::kIdentity:
    case Op::kCast:
      return x;
    case Op::kAdd:
      return x + y;
    case Op::kSub:
      return x - y;
    case Op::kMul:
      return x * y;
    case Op::kDiv:
      return x / y;
    case Op::kPow:
      return static_cast<A>(std::pow(static_cast<double>(x), static_cast<double>(y)));
    case Op::kMax:
      return std::isnan(x) || std::isnan(y) ? nan : std::max(x, y);
    case Op::kMin:
      return std::isnan(x) || std::isnan(y) ? nan : std::min(x, y);
    case Op::kLess:
      return x < y;
    case Op::kLessEqual:
      return x <= y;
    case Op::kGreater:
      return x > y;
    case Op::kGreaterEqual:
      return x >= y;
    case Op::kEqual:
      return x == y;
    case Op::kAnd:
      return (x != 0) && (y != 0);
    case Op::kOr:
      return (x != 0) || (y != 0);
    case Op::kXor:
      return (x != 0) != (y != 0);
    case Op::kReluGrad:
      return y > 0 ? x : A(0);
    case Op::kGeluGrad: {
      if (in.imm == 0.f) {
        if (!exact)
          return x * (0.5 * std::erfc(-y / std::sqrt(2.0)) + y * std::exp(-0.5 * y * y) / std::sqrt(2 * M_PI));
        return math::GeluGradErf(x, y);
      }
      const A y2 = y * y, t = math::Tanh(k * (y + a3 * y2 * y));
      if (!exact) return x * (0.5 * (1 + t) + 0.5 * y * (1 - t * t) * k * (1 + 3 * a3 * y2));
      return x * (A(0.5) * (A(1) + t) + A(0.5) * y * (A(1) - t * t) * k * (A(1) + A(3 * 0.044715) * y2));
    }
    case Op::kWhere:
      return x != 0 ? y : z;
    default:
      break;
  }
  ADD_FAILURE() << "EvalOp of " << cluster::OpName(in.op);
  return 0;
}

// Values of every output of p over domain D, as doubles (each rounded to its dtype in exact mode).
template <typename A>
std::vector<std::vector<double>> Reference(const Program& p, const std::vector<int64_t>& D,
                                           const std::vector<Tensor>& ins, Mode mode) {
  const int rank = static_cast<int>(D.size()), lead = rank - p.reduce_axes;
  std::vector<int64_t> row_shape = D;
  for (int d = lead; d < rank; ++d) row_shape[d] = 1;
  const int64_t N = Numel(D), R = Numel(row_shape), L = R ? N / R : 0;
  std::vector<std::vector<A>> val(p.code.size());
  for (size_t i = 0; i < p.code.size(); ++i) {
    const Instr& in = p.code[i];
    const int64_t n = in.row ? R : N;
    std::vector<A>& v = val[i];
    v.assign(n, A(0));
    if (in.op == Op::kInput) {
      const Tensor& t = ins[in.a];
      for (int64_t e = 0; e < n; ++e) {
        const std::vector<int64_t> idx = Unravel(e, in.row ? row_shape : D);
        A x = static_cast<A>(t.at(BroadcastIndex(in.row ? row_shape : D, t.dims, idx)));
        v[e] = in.dtype == t.type ? x : RoundTo(in.dtype, x, mode);
      }
    } else if (in.op == Op::kConst) {
      for (auto& x : v) x = RoundTo(in.dtype, static_cast<A>(in.imm), mode);
    } else if (cluster::IsReduction(in.op)) {
      const std::vector<A>& x = val[in.a];
      for (int64_t r = 0; r < R; ++r) {
        const A* row = x.data() + r * L;
        A res;
        if (in.op == Op::kReduceSum || in.op == Op::kReduceMean) {
          double s = 0;
          if (mode == Mode::kExact) {
            double lane[4] = {0, 0, 0, 0}, tail = 0;
            int64_t j = 0;
            for (; j + 4 <= L; j += 4)
              for (int q = 0; q < 4; ++q) lane[q] += row[j + q];
            for (; j < L; ++j) tail += row[j];
            s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + tail;
          } else {
            long double ls = 0;
            for (int64_t j = 0; j < L; ++j) ls += row[j];
            s = static_cast<double>(ls);
          }
          res = static_cast<A>(in.op == Op::kReduceMean ? s / static_cast<double>(L) : s);
        } else {
          const bool mx = in.op == Op::kReduceMax;
          res = mx ? -INFINITY : INFINITY;
          for (int64_t j = 0; j < L; ++j) {
            if (std::isnan(row[j])) {
              res = row[j];
              break;
            }
            res = mx ? std::max(res, row[j]) : std::min(res, row[j]);
          }
        }
        v[r] = RoundTo(in.dtype, res, mode);
      }
    } else {
      const int32_t ops[3] = {in.a, in.b, in.c};
      for (int64_t e = 0; e < n; ++e) {
        A x[3] = {0, 0, 0};
        for (int q = 0; q < cluster::Arity(in.op); ++q) {
          const bool op_row = p.code[ops[q]].row;
          x[q] = val[ops[q]][op_row && !in.row ? e / L : e];
        }
        const A r = EvalOp<A>(in, x[0], x[1], x[2], mode);
        v[e] =
            (mode == Mode::kExact || in.op == Op::kCast || in.dtype == DType::kBool) ? RoundTo(in.dtype, r, mode) : r;
      }
    }
  }
  std::vector<std::vector<double>> out;
  for (int32_t o : p.outputs) out.emplace_back(val[o].begin(), val[o].end());
  return out;
}

// ---- running the kernel ----

struct KernelRun {
  std::vector<Tensor> outputs;
  std::vector<std::vector<double>> values;
};

inline KernelRun RunKernel(const Program& p, const std::vector<int64_t>& D, const std::vector<Tensor>& ins,
                           int threads = 2) {
  std::vector<std::vector<int64_t>> dims;
  std::vector<DType> types;
  std::vector<const void*> in_ptrs;
  for (const Tensor& t : ins) {
    dims.push_back(t.dims);
    types.push_back(t.type);
    in_ptrs.push_back(t.bytes.data());
  }
  FusedKernel k(p, D, dims, types, threads);
  const int rank = static_cast<int>(D.size());
  std::vector<int64_t> row_dims(D.begin(), D.begin() + (rank - p.reduce_axes));
  KernelRun run;
  std::vector<void*> out_ptrs;
  for (int32_t o : p.outputs) {
    Tensor t;
    t.type = p.code[o].dtype;
    t.dims = p.code[o].row ? row_dims : D;
    EXPECT_EQ(t.numel(), p.code[o].row ? k.rows() : k.numel());
    t.bytes.assign(t.numel() * ElemSize(t.type), 0);
    for (int64_t i = 0; i < t.numel(); ++i) WriteElem(t.type, t.bytes, i, NAN);  // bool: NaN != 0 gives 1
    if (t.type == DType::kBool) std::fill(t.bytes.begin(), t.bytes.end(), uint8_t{0xAB});
    run.outputs.push_back(std::move(t));
  }
  for (Tensor& t : run.outputs) out_ptrs.push_back(t.bytes.data());
  const size_t ws_bytes = k.workspace_bytes();
  void* ws = ws_bytes ? std::aligned_alloc(64, (ws_bytes + 63) / 64 * 64) : nullptr;
  tbb::task_arena arena(threads);
  arena.execute([&] { k.Run(in_ptrs.data(), out_ptrs.data(), ws); });
  std::free(ws);
  for (const Tensor& t : run.outputs) {
    std::vector<double> v(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.type == DType::kBool) {
        EXPECT_TRUE(t.bytes[i] == 0 || t.bytes[i] == 1) << "bool element " << i << " not written";
      }
      v[i] = t.at(i);
    }
    run.values.push_back(std::move(v));
  }
  return run;
}

// Every element equal (NaN where the reference is NaN; ties of +-0 are equal) or, with rtol > 0, close.
inline void ExpectMatch(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want,
                        double rtol = 0, double atol = 0, const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < got.size(); ++j) {
    ASSERT_EQ(got[j].size(), want[j].size()) << what << " output " << j;
    int bad = 0;
    for (size_t i = 0; i < got[j].size() && bad < 5; ++i) {
      const double g = got[j][i], w = want[j][i];
      bool ok;
      if (std::isnan(w))
        ok = std::isnan(g);
      else if (std::isinf(w) || rtol == 0)
        ok = g == w;
      else
        ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
      if (!ok) {
        ++bad;
        ADD_FAILURE() << what << " output " << j << " element " << i << ": got " << g << ", want " << w;
      }
    }
  }
}

// Runs p on ins and checks it against the exact reference (and the float64 one when rtol > 0).
inline void Check(const Program& p, const std::vector<int64_t>& D, const std::vector<Tensor>& ins, double rtol = 0,
                  double atol = 0, int threads = 2) {
  SCOPED_TRACE(cluster::ToText(p));
  const KernelRun run = RunKernel(p, D, ins, threads);
  ExpectMatch(run.values, Reference<float>(p, D, ins, Mode::kExact), 0, 0, "exact");
  if (rtol > 0) ExpectMatch(run.values, Reference<double>(p, D, ins, Mode::kFloat64), rtol, atol, "float64");
}

}  // namespace ot::cpu::fused_test
