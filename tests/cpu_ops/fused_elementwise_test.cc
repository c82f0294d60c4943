// cpu_ops/fused_elementwise (the CPU interpreter of cluster programs) and kernel_common/cluster_program's text
// form, against a reference written here that evaluates a program element by element:
//   - in float64 (ops computed in double, nothing rounded but Casts): checks the formulas, with a tolerance;
//   - "exact" (ops computed in float with the formulas of the op-by-op kernels, every result rounded to its
//     dtype with kernel_common/half.h): what the ops would compute one by one; the interpreter must match it
//     exactly. Row sums accumulate in double over four interleaved lanes, ((l0 + l1) + (l2 + l3)) + tail, the
//     order the interpreter documents.
// Outputs are pre-filled with NaN (bool outputs with the byte 0xAB), so an element left unwritten fails.
#include "cpu_ops/fused_elementwise.h"

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

#include "kernel_common/half.h"
#include "kernel_common/scalar_math.h"

namespace ot::cpu {
namespace {

using cluster::DType;
using cluster::Instr;
using cluster::Op;
using cluster::Program;

std::mt19937_64& Gen() {
  static std::mt19937_64 g(std::random_device{}());
  return g;
}
double Uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(Gen()); }
int64_t RandInt(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(Gen()); }

int64_t Numel(const std::vector<int64_t>& d) {
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

size_t ElemSize(DType t) { return t == DType::kF32 ? 4 : t == DType::kBool ? 1 : 2; }

double ReadElem(DType t, const std::vector<uint8_t>& b, int64_t i) {
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

void WriteElem(DType t, std::vector<uint8_t>& b, int64_t i, double v) {
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
Tensor RandomTensor(DType type, std::vector<int64_t> dims, double lo = -2, double hi = 2, double step = 0) {
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
int64_t BroadcastIndex(const std::vector<int64_t>& shape, const std::vector<int64_t>& x_dims,
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

std::vector<int64_t> Unravel(int64_t i, const std::vector<int64_t>& shape) {
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

KernelRun RunKernel(const Program& p, const std::vector<int64_t>& D, const std::vector<Tensor>& ins, int threads = 2) {
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
void ExpectMatch(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want,
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
void Check(const Program& p, const std::vector<int64_t>& D, const std::vector<Tensor>& ins, double rtol = 0,
           double atol = 0, int threads = 2) {
  SCOPED_TRACE(cluster::ToText(p));
  const KernelRun run = RunKernel(p, D, ins, threads);
  ExpectMatch(run.values, Reference<float>(p, D, ins, Mode::kExact), 0, 0, "exact");
  if (rtol > 0) ExpectMatch(run.values, Reference<double>(p, D, ins, Mode::kFloat64), rtol, atol, "float64");
}

// ---- text form ----

Program AllOpsProgram() {
  Builder b(3, 1);
  const int x = b.In(0), y = b.In(1, DType::kF16), r = b.In(2, DType::kBF16, true);
  b.Const(-0.f);
  b.Const(1e-45f, DType::kF16);
  b.Const(INFINITY, DType::kBF16, true);
  b.Const(0.1f);
  for (int op = static_cast<int>(Op::kNeg); op <= static_cast<int>(Op::kReduceMin); ++op) {
    const Op o = static_cast<Op>(op);
    const int ar = cluster::Arity(o);
    const float imm = o == Op::kLeakyRelu ? 0.01f : (o == Op::kGelu || o == Op::kGeluGrad) ? 1.f : 0.f;
    b.Op_(o, op % 2 ? DType::kF32 : DType::kBool, x, ar > 1 ? (op % 3 ? y : r) : -1, ar > 2 ? r : -1, imm);
  }
  b.Out({x, static_cast<int32_t>(b.p.code.size()) - 1, 5});
  return b.p;
}

bool SameProgram(const Program& a, const Program& b) {
  if (a.num_inputs != b.num_inputs || a.reduce_axes != b.reduce_axes || a.outputs != b.outputs ||
      a.code.size() != b.code.size())
    return false;
  for (size_t i = 0; i < a.code.size(); ++i) {
    const Instr &x = a.code[i], &y = b.code[i];
    if (x.op != y.op || x.a != y.a || x.b != y.b || x.c != y.c || x.dtype != y.dtype || x.row != y.row ||
        std::memcmp(&x.imm, &y.imm, 4) != 0)
      return false;
  }
  return true;
}

TEST(ClusterProgramText, RoundTripsExactly) {
  const Program p = AllOpsProgram();
  ASSERT_NO_THROW(cluster::Validate(p));
  const std::string text = cluster::ToText(p);
  EXPECT_NE(text.find("reduce_axes 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("%0 = input input=0 : f32\n"), std::string::npos) << text;
  EXPECT_NE(text.find("%2 = input input=2 : bf16 row\n"), std::string::npos) << text;
  EXPECT_NE(text.find("%3 = const imm=-0 : f32\n"), std::string::npos) << text;
  EXPECT_NE(text.find("= leaky_relu %0 imm=0.00999999978 :"), std::string::npos) << text;
  EXPECT_NE(text.find("= greater_equal %0 "), std::string::npos) << text;
  EXPECT_NE(text.find("= reduce_min %0 : "), std::string::npos) << text;
  const Program q = cluster::ParseProgram(text);
  EXPECT_TRUE(SameProgram(p, q)) << text << "\n---\n" << cluster::ToText(q);
  EXPECT_EQ(cluster::ToText(q), text);
  // Blank lines and comments are ignored; NaN and odd floats survive.
  Builder b(1);
  const int x = b.In(0);
  const int c = b.Const(NAN);
  b.Op_(Op::kAdd, DType::kF32, x, b.Const(3.4028235e38f));
  b.Out({b.Op_(Op::kMul, DType::kF32, x, c)});
  const Program r = cluster::ParseProgram("# a comment\n\n" + cluster::ToText(b.p));
  EXPECT_TRUE(std::isnan(r.code[1].imm));
  EXPECT_EQ(r.code[2].imm, 3.4028235e38f);
  EXPECT_EQ(cluster::ToText(r), cluster::ToText(b.p));
  for (int op = 0; op <= static_cast<int>(Op::kReduceMin); ++op)
    EXPECT_STRNE(cluster::OpName(static_cast<Op>(op)), "?");
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kBool})
    EXPECT_EQ(cluster::ParseDType(cluster::DTypeName(t)), t);
  EXPECT_THROW(cluster::ParseDType("f64"), std::invalid_argument);
}

void ExpectParseError(const std::string& text, const std::string& want) {
  try {
    cluster::ParseProgram(text);
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << "message: " << e.what() << "\nwant: " << want;
  }
}

TEST(ClusterProgramText, ParseErrorsNameTheLine) {
  const std::string head = "inputs 2\n%0 = input input=0 : f32\n";
  ExpectParseError(head + "%1 = frobnicate %0 : f32\noutputs %1\n", "line 3: unknown op 'frobnicate'");
  ExpectParseError(head + "%1 = add %0 : f32\noutputs %1\n", "line 3: add takes 2 operand(s), got 1");
  ExpectParseError(head + "%1 = neg %4 : f32\noutputs %1\n", "line 3: operand %4 is not an earlier instruction");
  ExpectParseError(head + "%1 = neg %1 : f32\noutputs %1\n", "line 3: operand %1 is not an earlier");
  ExpectParseError(head + "%1 = input input=2 : f32\noutputs %1\n", "line 3: input index 2 out of range");
  ExpectParseError(head + "%1 = neg %0 : f64\noutputs %1\n", "line 3: unknown cluster dtype 'f64'");
  ExpectParseError(head + "%1 = neg %0\noutputs %1\n", "line 3: expected '%N = op [operands] : dtype'");
  ExpectParseError(head + "%2 = neg %0 : f32\noutputs %2\n", "line 3: instruction %2 out of order");
  ExpectParseError(head + "%1 = neg %0 imm=x1 : f32\noutputs %1\n", "line 3: bad number in 'imm=x1'");
  ExpectParseError(head + "%1 = const : f32\noutputs %1\n", "line 3: const without imm=");
  ExpectParseError(head + "%1 = neg %0 : f32 rowx\noutputs %1\n", "line 3: after the dtype only 'row'");
  ExpectParseError(head + "outputs %5\n", "line 3: output %5 is not an instruction");
  ExpectParseError(head, "no 'outputs' line");
  ExpectParseError("%0 = input input=0 : f32\noutputs %0\n", "line 1: an instruction before the 'inputs N' line");
  // Validate's errors (row flags) come with the line of the instruction.
  ExpectParseError("inputs 1\nreduce_axes 1\n%0 = input input=0 : f32\n%1 = reduce_sum %0 : f32\noutputs %1\n",
                   "line 4: %1 (reduce_sum): a reduction makes a row value");
  ExpectParseError("inputs 1\nreduce_axes 1\n%0 = input input=0 : f32\n%1 = neg %0 : f32 row\noutputs %1\n",
                   "line 4: %1 (neg): marked row but has a full operand");
  ExpectParseError(head + "%1 = reduce_max %0 : f32 row\noutputs %1\n", "reduce_axes is 0");
  ExpectParseError(head + "%1 = gelu %0 imm=2 : f32\noutputs %1\n", "imm must be 0 (erf form) or 1 (tanh form)");
}

TEST(ClusterProgramText, ValidateRejectsBrokenPrograms) {
  Builder b(1, 1);
  const int x = b.In(0);
  const int s = b.Op_(Op::kReduceSum, DType::kF32, x);
  b.Out({s});
  ASSERT_NO_THROW(cluster::Validate(b.p));
  Program p = b.p;
  p.code[1].a = 1;
  EXPECT_THROW(cluster::Validate(p), std::invalid_argument);
  p = b.p;
  p.code.push_back(p.code[1]);
  p.code[2].a = 1;  // reduces a row
  try {
    cluster::Validate(p);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("%2 (reduce_sum): reduces %1, a row value"), std::string::npos) << e.what();
  }
  p = b.p;
  p.outputs = {7};
  EXPECT_THROW(cluster::Validate(p), std::invalid_argument);
  p = b.p;
  p.code[1].b = 0;  // an operand a unary op does not take
  EXPECT_THROW(cluster::Validate(p), std::invalid_argument);
}

// ---- every op ----

// One-op programs over a domain of two tiles and a bit, inputs of the op's natural range.
TEST(FusedKernel, EveryOpMatchesTheReferences) {
  const std::vector<int64_t> D = {3, 37, 29};
  for (int opi = static_cast<int>(Op::kNeg); opi <= static_cast<int>(Op::kWhere); ++opi) {
    const Op op = static_cast<Op>(opi);
    for (float imm : {0.f, 1.f}) {
      if (imm == 1.f && op != Op::kGelu && op != Op::kGeluGrad) continue;
      SCOPED_TRACE(std::string(cluster::OpName(op)) + " imm " + std::to_string(imm));
      const bool logic = op == Op::kNot || op == Op::kAnd || op == Op::kOr || op == Op::kXor;
      const bool compare = op >= Op::kLess && op <= Op::kEqual;
      const int ar = cluster::Arity(op);
      Builder b(ar);
      std::vector<Tensor> ins;
      int ops[3] = {-1, -1, -1};
      for (int k = 0; k < ar; ++k) {
        const DType t = logic || (op == Op::kWhere && k == 0) ? DType::kBool : DType::kF32;
        const bool positive = op == Op::kLog || op == Op::kSqrt || (op == Op::kPow && k == 0);
        ins.push_back(RandomTensor(t, D, positive ? 0.05 : -3, 3, compare ? 0.5 : 0));
        ops[k] = b.In(k, t);
      }
      const DType out_t = logic || compare ? DType::kBool : DType::kF32;
      b.Out({b.Op_(op, out_t, ops[0], ops[1], ops[2], op == Op::kLeakyRelu ? 0.1f : imm)});
      Check(b.p, D, ins, 2e-6, 1e-6);
    }
  }
}

// Casts between all four types, and inputs read as a narrower dtype (a Cast folded into the load).
TEST(FusedKernel, CastsRoundLikeTheStorageTypes) {
  const std::vector<int64_t> D = {5000};
  const DType all[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kBool};
  for (DType from : all)
    for (DType to : all) {
      Builder b(1);
      const int x = b.In(0, from);
      const int c = b.Op_(Op::kCast, to, x);
      const int back = b.Op_(Op::kCast, DType::kF32, c);
      const int narrow = b.In(0, to);  // the same input read as `to`
      b.Out({c, back, narrow});
      // Values beyond f16's range (inf), tiny ones (f16 subnormals, zero) and ties at random.
      Tensor t = RandomTensor(from, D, -70000, 70000);
      for (int64_t i = 0; i < t.numel(); i += 7) WriteElem(from, t.bytes, i, Uniform(-1e-6, 1e-6));
      for (int64_t i = 3; i < t.numel(); i += 11) WriteElem(from, t.bytes, i, 0.0);
      Check(b.p, D, {t});
    }
}

// ---- broadcasting ----

TEST(FusedKernel, BroadcastsEveryKindOfInput) {
  const std::vector<int64_t> D = {4, 6, 130};  // 3120 elements: two tiles, the second partial
  const std::vector<std::vector<int64_t>> shapes = {
      {4, 6, 130}, {},        {1},       {1, 1, 1},   {130},  {6, 130},          {1, 6, 130},
      {4, 1, 1},   {4, 6, 1}, {1, 6, 1}, {4, 1, 130}, {6, 1}, {1, 1, 4, 6, 130}, {1, 1, 130}};
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kBool})
    for (const auto& s : shapes) {
      SCOPED_TRACE(std::string(cluster::DTypeName(t)) + " input of rank " + std::to_string(s.size()));
      Builder b(2);
      const int x = b.In(0);
      const int y = b.In(1, t);
      const int z = b.Op_(Op::kMul, DType::kF32, b.Op_(Op::kAdd, DType::kF32, x, y), y);
      b.Out({z, b.Op_(Op::kSub, DType::kF32, y, x)});
      Check(b.p, D, {RandomTensor(DType::kF32, D), RandomTensor(t, s)}, 1e-6, 1e-6);
    }
}

TEST(FusedKernel, RowInputsBroadcastToTheRowShape) {
  const std::vector<int64_t> D = {3, 5, 7, 9};
  for (int k = 1; k <= 3; ++k) {
    const std::vector<int64_t> lead(D.begin(), D.end() - k);
    std::vector<int64_t> kept = lead;
    kept.insert(kept.end(), k, 1);       // D with the reduced axes 1
    std::vector<int64_t> first1 = kept;  // a middle block of the rows
    first1[0] = 1;
    std::vector<int64_t> last1 = kept;  // the rows' last dim broadcast (a strided read)
    last1[D.size() - k - 1] = 1;
    for (const auto& s : {kept, first1, last1, std::vector<int64_t>{}, std::vector<int64_t>(k + 1, 1)}) {
      Builder b(2, k);
      const int x = b.In(0);
      const int r = b.In(1, DType::kF16, true);
      const int r2 = b.Op_(Op::kMul, DType::kF32, r, b.Const(2.f, DType::kF32, true));
      b.Out({b.Op_(Op::kAdd, DType::kF32, x, r2), r2});
      Check(b.p, D, {RandomTensor(DType::kF32, D), RandomTensor(DType::kF16, s)}, 1e-6, 1e-6);
    }
  }
}

TEST(FusedKernel, ShapesThatDoNotBroadcastAreErrorsNamingTheInput) {
  Builder b(2, 1);
  const int x = b.In(0);
  const int r = b.In(1, DType::kF32, true);
  b.Out({b.Op_(Op::kAdd, DType::kF32, x, r)});
  auto expect = [&](std::vector<std::vector<int64_t>> dims, const std::string& want) {
    try {
      FusedKernel k(b.p, {4, 6}, dims, {DType::kF32, DType::kF32}, 1);
      ADD_FAILURE() << "no error, want " << want;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect({{4, 5}, {4, 1}}, "input 0: dims [4,5] do not broadcast to the domain [4,6]");
  expect({{2, 4, 6}, {4}}, "input 0: dims [2,4,6] do not broadcast to the domain [4,6]");
  expect({{4, 6}, {4, 6}}, "input 1: dims [4,6] do not broadcast to the row shape [4,1]");
  expect({{4, 6}, {4}}, "input 1: dims [4] do not broadcast to the row shape [4,1]");
  expect({{6}, {3, 1}}, "input 1: dims [3,1] do not broadcast to the row shape [4,1]");
  EXPECT_THROW(FusedKernel(b.p, {4, 6}, {{4, 6}}, {DType::kF32}, 1), std::invalid_argument);
  // reduce_axes 1 of a rank-0 domain
  EXPECT_THROW(FusedKernel(b.p, {}, {{}, {}}, {DType::kF32, DType::kF32}, 1), std::invalid_argument);
  Program bad = b.p;
  bad.code[2].row = true;
  EXPECT_THROW(FusedKernel(bad, {4, 6}, {{4, 6}, {4, 1}}, {DType::kF32, DType::kF32}, 1), std::invalid_argument);
}

// ---- row reductions ----

Program SoftmaxProgram(DType t, int reduce_axes) {
  Builder b(1, reduce_axes);
  const int x = b.In(0, t);
  const int m = b.Op_(Op::kReduceMax, t, x);
  const int e = b.Op_(Op::kExp, t, b.Op_(Op::kSub, t, x, m));
  const int s = b.Op_(Op::kReduceSum, t, e);
  b.Out({b.Op_(Op::kDiv, t, e, s), m, s});
  return b.p;
}

TEST(FusedKernel, SoftmaxAsAProgram) {
  for (auto [D, k] : {std::pair<std::vector<int64_t>, int>{{4, 7, 33}, 1},
                      {{2, 3, 5000}, 1},
                      {{50, 3}, 1},
                      {{6, 9, 11}, 2},
                      {{2, 2, 3, 3}, 3},
                      {{700, 1}, 1},
                      {{1000}, 1}}) {
    SCOPED_TRACE(::testing::Message() << "rows of " << D.back() << ", reduce_axes " << k);
    const Program p = SoftmaxProgram(DType::kF32, k);
    const Tensor x = RandomTensor(DType::kF32, D, -4, 4);
    Check(p, D, {x}, 1e-5, 1e-7);
    // And against softmax computed directly.
    const KernelRun run = RunKernel(p, D, {x});
    const int64_t R = run.values[1].size(), L = Numel(D) / R;
    for (int64_t r = 0; r < R; ++r) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < L; ++j) m = std::max(m, x.at(r * L + j));
      for (int64_t j = 0; j < L; ++j) s += std::exp(x.at(r * L + j) - m);
      double total = 0;
      for (int64_t j = 0; j < L; ++j) {
        const double want = std::exp(x.at(r * L + j) - m) / s;
        ASSERT_NEAR(run.values[0][r * L + j], want, 2e-6 * want + 1e-9);
        total += run.values[0][r * L + j];
      }
      ASSERT_NEAR(total, 1.0, 1e-5);
      ASSERT_EQ(run.values[1][r], m);
    }
  }
}

Program LayerNormProgram(DType t, float eps) {
  Builder b(3, 1);
  const int x = b.In(0, t), gamma = b.In(1, t), beta = b.In(2, t);
  const int mean = b.Op_(Op::kReduceMean, t, x);
  const int c = b.Op_(Op::kSub, t, x, mean);
  const int var = b.Op_(Op::kReduceMean, t, b.Op_(Op::kMul, t, c, c));
  const int rstd = b.Op_(Op::kReciprocal, t, b.Op_(Op::kSqrt, t, b.Op_(Op::kAdd, t, var, b.Const(eps, t, true))));
  const int y = b.Op_(Op::kAdd, t, b.Op_(Op::kMul, t, b.Op_(Op::kMul, t, c, rstd), gamma), beta);
  b.Out({y, mean, rstd});
  return b.p;
}

TEST(FusedKernel, LayerNormAsAProgram) {
  for (const std::vector<int64_t>& D : {std::vector<int64_t>{8, 16, 96}, {3, 4099}, {5, 1}}) {
    const int64_t H = D.back();
    const std::vector<Tensor> ins = {RandomTensor(DType::kF32, D, -3, 5), RandomTensor(DType::kF32, {H}),
                                     RandomTensor(DType::kF32, {H})};
    const Program p = LayerNormProgram(DType::kF32, 1e-5f);
    Check(p, D, ins, 1e-5, 1e-6);
    const KernelRun run = RunKernel(p, D, ins);
    for (int64_t r = 0; r < Numel(D) / H; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < H; ++j) mean += ins[0].at(r * H + j) / H;
      for (int64_t j = 0; j < H; ++j) var += (ins[0].at(r * H + j) - mean) * (ins[0].at(r * H + j) - mean) / H;
      for (int64_t j = 0; j < H; ++j) {
        const double want = (ins[0].at(r * H + j) - mean) / std::sqrt(var + 1e-5) * ins[1].at(j) + ins[2].at(j);
        ASSERT_NEAR(run.values[0][r * H + j], want, 1e-4 * std::fabs(want) + 1e-4);
      }
    }
  }
}

TEST(FusedKernel, EmptyRowsAndEmptyDomains) {
  Builder b(1, 1);
  const int x = b.In(0);
  b.Out({b.Op_(Op::kReduceSum, DType::kF32, x), b.Op_(Op::kReduceMean, DType::kF32, x),
         b.Op_(Op::kReduceMax, DType::kF32, x), b.Op_(Op::kReduceMin, DType::kF32, x),
         b.Op_(Op::kNeg, DType::kF32, x)});
  const KernelRun run = RunKernel(b.p, {3, 0}, {RandomTensor(DType::kF32, {3, 0})});
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(run.values[0][r], 0.0);
    EXPECT_TRUE(std::isnan(run.values[1][r]));
    EXPECT_EQ(run.values[2][r], -INFINITY);
    EXPECT_EQ(run.values[3][r], INFINITY);
  }
  EXPECT_TRUE(run.values[4].empty());
  const KernelRun none = RunKernel(b.p, {0, 5}, {RandomTensor(DType::kF32, {0, 5})});
  EXPECT_TRUE(none.values[0].empty());
  // A rank-0 domain: one element.
  Builder s(1);
  s.Out({s.Op_(Op::kExp, DType::kF32, s.In(0))});
  Check(s.p, {}, {RandomTensor(DType::kF32, {})});
}

// ---- half programs: bit for bit what the ops compute one by one ----

TEST(FusedKernel, HalfProgramsEqualRoundingAfterEveryOp) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(cluster::DTypeName(t));
    const std::vector<int64_t> D = {6, 300};
    Check(SoftmaxProgram(t, 1), D, {RandomTensor(t, D, -6, 6)});
    Check(LayerNormProgram(t, 1e-3f), D, {RandomTensor(t, D, -3, 5), RandomTensor(t, {300}), RandomTensor(t, {300})});
    // The Gelu block of a transformer MLP and its backward, with a bias, in half with an f32 output.
    Builder b(3);
    const int x = b.Op_(Op::kAdd, t, b.In(0, t), b.In(1, t));
    const int g = b.Op_(Op::kGelu, t, x, -1, -1, 1.f);
    const int dx = b.Op_(Op::kGeluGrad, t, b.In(2, t), x);
    const int relu = b.Op_(Op::kReluGrad, t, dx, b.Op_(Op::kSigmoid, t, g));
    b.Out({g, dx, b.Op_(Op::kCast, DType::kF32, relu), b.Op_(Op::kLess, DType::kBool, g, dx)});
    Check(b.p, {4, 1111}, {RandomTensor(t, {4, 1111}, -4, 4), RandomTensor(t, {1111}), RandomTensor(t, {4, 1111})});
  }
}

// ---- random programs ----

Op RandomOp(bool allow_reduce) {
  static const Op kOps[] = {Op::kNeg,   Op::kAbs,        Op::kSign,       Op::kExp,          Op::kLog,
                            Op::kSqrt,  Op::kReciprocal, Op::kTanh,       Op::kSigmoid,      Op::kRelu,
                            Op::kErf,   Op::kFloor,      Op::kCeil,       Op::kNot,          Op::kLeakyRelu,
                            Op::kGelu,  Op::kIdentity,   Op::kCast,       Op::kAdd,          Op::kSub,
                            Op::kMul,   Op::kDiv,        Op::kPow,        Op::kMax,          Op::kMin,
                            Op::kLess,  Op::kLessEqual,  Op::kGreater,    Op::kGreaterEqual, Op::kEqual,
                            Op::kAnd,   Op::kOr,         Op::kXor,        Op::kReluGrad,     Op::kGeluGrad,
                            Op::kWhere, Op::kReduceSum,  Op::kReduceMean, Op::kReduceMax,    Op::kReduceMin,
                            Op::kAdd,   Op::kMul,        Op::kSub};
  const int n = static_cast<int>(sizeof(kOps) / sizeof(kOps[0]));
  for (;;) {
    const Op op = kOps[RandInt(0, n - 1)];
    if (allow_reduce || !cluster::IsReduction(op)) return op;
  }
}

// Dims of an input that broadcasts to `target` (each dim kept or 1, leading dims sometimes dropped or added).
std::vector<int64_t> RandomBroadcastDims(const std::vector<int64_t>& target) {
  std::vector<int64_t> d;
  const int64_t drop = RandInt(0, 3) == 0 ? RandInt(0, static_cast<int64_t>(target.size())) : 0;
  if (RandInt(0, 5) == 0) d.push_back(1);
  for (size_t i = drop; i < target.size(); ++i) d.push_back(RandInt(0, 2) == 0 ? 1 : target[i]);
  return d;
}

TEST(FusedKernel, RandomProgramsMatchTheReference) {
  // OT_FUSED_SEED=N replays the one program of a failure's "seed N".
  const char* replay = std::getenv("OT_FUSED_SEED");
  const int64_t kPrograms = replay ? 1 : 150;
  for (int64_t iter = 0; iter < kPrograms; ++iter) {
    const uint64_t seed = replay ? std::strtoull(replay, nullptr, 10) : std::random_device{}();
    Gen().seed(seed);
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const int rank = static_cast<int>(RandInt(0, 4));
    std::vector<int64_t> D(rank);
    for (auto& d : D) d = RandInt(1, 7);
    if (rank > 0 && RandInt(0, 2) == 0) D[RandInt(0, rank - 1)] = RandInt(100, 700);  // several tiles
    const int K = rank > 0 && RandInt(0, 1) ? static_cast<int>(RandInt(1, rank)) : 0;
    std::vector<int64_t> row_shape = D, row_target(D.begin(), D.end() - K);
    for (int d = rank - K; d < rank; ++d) row_shape[d] = 1;
    const int num_inputs = static_cast<int>(RandInt(1, 4));
    Builder b(num_inputs, K);
    std::vector<Tensor> ins;
    const DType kTypes[] = {DType::kF32, DType::kF32, DType::kF16, DType::kBF16, DType::kBool};
    for (int k = 0; k < num_inputs; ++k) {
      const bool row = K > 0 && RandInt(0, 2) == 0;
      std::vector<int64_t> dims = RandomBroadcastDims(row ? row_shape : D);
      const DType t = kTypes[RandInt(0, 4)];
      ins.push_back(RandomTensor(t, dims, -3, 3, RandInt(0, 3) == 0 ? 0.5 : 0));
      b.In(k, RandInt(0, 4) == 0 ? kTypes[RandInt(0, 3)] : t, row);
    }
    const int64_t len = RandInt(5, 30);
    while (static_cast<int64_t>(b.p.code.size()) < num_inputs + len) {
      const int n = static_cast<int>(b.p.code.size());
      if (RandInt(0, 9) == 0) {
        b.Const(static_cast<float>(Uniform(-2, 2)), kTypes[RandInt(0, 3)], K > 0 && RandInt(0, 1));
        continue;
      }
      const Op op = RandomOp(K > 0);
      int ops[3] = {-1, -1, -1};
      for (int k = 0; k < cluster::Arity(op); ++k) ops[k] = static_cast<int>(RandInt(std::max(0, n - 8), n - 1));
      if (cluster::IsReduction(op) && b.Row(ops[0])) continue;  // reduces full values only
      const bool boolean = (op >= Op::kLess && op <= Op::kXor) || op == Op::kNot;
      const DType t = boolean ? DType::kBool : kTypes[RandInt(0, 3)];
      float imm = 0.f;
      if (op == Op::kLeakyRelu) imm = static_cast<float>(Uniform(0, 0.5));
      if (op == Op::kGelu || op == Op::kGeluGrad) imm = static_cast<float>(RandInt(0, 1));
      b.Op_(op, t, ops[0], ops[1], ops[2], imm);
    }
    std::vector<int32_t> outs = {static_cast<int32_t>(b.p.code.size()) - 1};
    for (int64_t k = RandInt(0, 2); k > 0; --k) outs.push_back(static_cast<int32_t>(RandInt(0, b.p.code.size() - 1)));
    b.Out(outs);
    ASSERT_NO_THROW(cluster::Validate(b.p));
    // The text form round-trips every random program too.
    ASSERT_EQ(cluster::ToText(cluster::ParseProgram(cluster::ToText(b.p))), cluster::ToText(b.p));
    Check(b.p, D, ins, 0, 0, static_cast<int>(RandInt(1, 4)));
    if (::testing::Test::HasFailure()) break;
  }
}

// Inputs repeated with a period (the attention's [T, T] mask over [B, H, T, T]) are read in place when the tiles
// fit a period -- the tiles shrink to it -- and loaded otherwise; with and without rows, the results are the
// reference's exactly.
TEST(FusedKernel, PeriodicInputsMatchTheReference) {
  struct Case {
    std::vector<int64_t> D, period;
    int reduce_axes;
    int64_t tile;  // the expected tile: one period where it divides the default tile
  };
  for (const Case& c : {Case{{6, 4, 32, 32}, {32, 32}, 0, 1024}, Case{{5, 3, 16, 64}, {16, 64}, 1, 1024},
                        Case{{3, 4, 32, 32}, {32, 32}, 1, 1024}, Case{{9, 20, 20}, {20, 20}, 1, 2040},
                        Case{{3, 7, 300}, {7, 300}, 0, 2048}}) {
    SCOPED_TRACE(::testing::Message() << "period " << Numel(c.period) << ", reduce_axes " << c.reduce_axes);
    Builder b(2, c.reduce_axes);
    const int x = b.In(0), m = b.In(1);
    int y = b.Op_(Op::kAdd, DType::kF32, b.Op_(Op::kMul, DType::kF32, x, b.Const(0.5f, DType::kF32)), m);
    if (c.reduce_axes > 0) y = b.Op_(Op::kSub, DType::kF32, y, b.Op_(Op::kReduceMax, DType::kF32, y));
    b.Out({y});
    const std::vector<Tensor> ins = {RandomTensor(DType::kF32, c.D, -3, 3), RandomTensor(DType::kF32, c.period, -3, 3)};
    FusedKernel k(b.p, c.D, {c.D, c.period}, {DType::kF32, DType::kF32}, 2);
    EXPECT_EQ(k.tile_elements(), c.tile);
    Check(b.p, c.D, ins);
  }
}

// ReduceMax/ReduceMin over eight lanes: a NaN anywhere in a row (any lane, the tail) makes the row's result NaN; a
// row of +-inf and finite values gives the exact extreme.
TEST(FusedKernel, RowMaxAndMinPropagateNaNFromAnyLane) {
  for (int64_t len : {1, 7, 8, 9, 16, 31, 45}) {
    for (Op op : {Op::kReduceMax, Op::kReduceMin}) {
      Builder b(1, 1);
      b.Out({b.Op_(op, DType::kF32, b.In(0))});
      const int64_t rows = len + 2;  // row r < len has a NaN at r; row len has infinities; the last none
      Tensor x = RandomTensor(DType::kF32, {rows, len}, -5, 5);
      for (int64_t r = 0; r < len; ++r) WriteElem(DType::kF32, x.bytes, r * len + r, NAN);
      WriteElem(DType::kF32, x.bytes, len * len + len / 2, INFINITY);
      WriteElem(DType::kF32, x.bytes, len * len, -INFINITY);
      const KernelRun run = RunKernel(b.p, {rows, len}, {x});
      for (int64_t r = 0; r < len; ++r) EXPECT_TRUE(std::isnan(run.values[0][r])) << "len " << len << " row " << r;
      for (int64_t r = len; r < rows; ++r) {
        double want = op == Op::kReduceMax ? -INFINITY : INFINITY;
        for (int64_t j = 0; j < len; ++j)
          want = op == Op::kReduceMax ? std::max(want, x.at(r * len + j)) : std::min(want, x.at(r * len + j));
        EXPECT_EQ(run.values[0][r], want) << "len " << len << " row " << r;
      }
    }
  }
}

// An output stored over an input of the same size (the memory planner's in place): the last instruction writes
// straight into the output unless it reads that input itself; either way the result is that of separate buffers.
TEST(FusedKernel, InPlaceOutputsEqualSeparateOnes) {
  const std::vector<int64_t> D = {7, 1000};
  for (bool last_reads_x : {false, true}) {
    Builder b(1);
    const int x = b.In(0);
    const int e = b.Op_(Op::kExp, DType::kF32, b.Op_(Op::kMul, DType::kF32, x, b.Const(0.25f, DType::kF32)));
    b.Out({last_reads_x ? b.Op_(Op::kSub, DType::kF32, e, x)
                        : b.Op_(Op::kMul, DType::kF32, e, b.Const(3.f, DType::kF32))});
    const Tensor in = RandomTensor(DType::kF32, D, -3, 3);
    const KernelRun want = RunKernel(b.p, D, {in});
    FusedKernel k(b.p, D, {D}, {DType::kF32}, 2);
    std::vector<float> buf(Numel(D));
    std::memcpy(buf.data(), in.bytes.data(), in.bytes.size());
    std::vector<float> ws(k.workspace_bytes() / 4 + 16);
    float* ws64 = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t{63});
    const void* ip[] = {buf.data()};
    void* op[] = {buf.data()};
    k.Run(ip, op, ws64);
    for (int64_t i = 0; i < Numel(D); ++i)
      ASSERT_EQ(buf[i], want.values[0][i]) << (last_reads_x ? "reads x" : "does not read x") << ", element " << i;
  }
}

// ---- threads ----

TEST(FusedKernel, OneTwoAndMoreThreadsGiveTheSameBits) {
  const std::vector<int64_t> D = {97, 1003};
  const Program soft = SoftmaxProgram(DType::kF32, 1);
  const std::vector<Tensor> ins = {RandomTensor(DType::kF32, D, -5, 5)};
  Builder b(2);
  const int x = b.In(0), y = b.In(1);
  b.Out({b.Op_(Op::kGelu, DType::kBF16, b.Op_(Op::kMul, DType::kF32, x, y))});
  const std::vector<Tensor> ins2 = {RandomTensor(DType::kF32, D), RandomTensor(DType::kF32, {1003})};
  for (const auto& [p, in] : {std::pair{soft, ins}, std::pair{b.p, ins2}}) {
    const KernelRun one = RunKernel(p, D, in, 1);
    for (int threads : {2, 3, 8}) {
      const KernelRun many = RunKernel(p, D, in, threads);
      for (size_t j = 0; j < one.outputs.size(); ++j)
        EXPECT_EQ(std::memcmp(one.outputs[j].bytes.data(), many.outputs[j].bytes.data(), one.outputs[j].bytes.size()),
                  0)
            << threads << " threads, output " << j;
    }
  }
}

TEST(FusedKernel, WorkspaceAndTiles) {
  const Program soft = SoftmaxProgram(DType::kF32, 1);
  FusedKernel small(soft, {8, 100}, {{8, 100}}, {DType::kF32}, 3);
  EXPECT_EQ(small.tile_elements(), 2000);  // 20 whole rows
  EXPECT_EQ(small.num_tiles(), 1);
  EXPECT_EQ(small.workspace_bytes() % 64, 0u);
  FusedKernel long_rows(soft, {3, 10000}, {{3, 10000}}, {DType::kF32}, 1);
  EXPECT_EQ(long_rows.tile_elements(), 10000);  // one row per tile
  EXPECT_EQ(long_rows.num_tiles(), 3);
  EXPECT_GE(long_rows.workspace_bytes(), 2 * 10000 * sizeof(float));
  // No more slots than tiles: one tile needs one slot whatever max_threads, and runs in any thread (even one
  // outside every arena).
  FusedKernel one(soft, {2, 10}, {{2, 10}}, {DType::kF32}, 8);
  FusedKernel one_thread(soft, {2, 10}, {{2, 10}}, {DType::kF32}, 1);
  EXPECT_EQ(one.workspace_bytes(), one_thread.workspace_bytes());
  EXPECT_EQ(long_rows.workspace_bytes(),
            FusedKernel(soft, {3, 10000}, {{3, 10000}}, {DType::kF32}, 8).workspace_bytes() / 3);
  const std::vector<Tensor> in = {RandomTensor(DType::kF32, {2, 10})};
  std::vector<float> out0(20, NAN), out1(2, NAN), out2(2, NAN);
  const void* ip[] = {in[0].bytes.data()};
  void* op[] = {out0.data(), out1.data(), out2.data()};
  std::vector<float> ws(one.workspace_bytes() / 4 + 16);
  float* ws64 = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t{63});
  std::thread t([&] { one.Run(ip, op, ws64); });
  t.join();
  const KernelRun want = RunKernel(soft, {2, 10}, in);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(out0[i], want.values[0][i]) << i;
  // More tiles than max_threads, called from a wider arena (and from no arena): the thread slots still fit.
  const std::vector<Tensor> big = {RandomTensor(DType::kF32, {3, 10000})};
  const KernelRun big_want = RunKernel(soft, {3, 10000}, big, 1);
  std::vector<float> b0(30000, NAN), b1(3, NAN), b2(3, NAN);
  const void* bip[] = {big[0].bytes.data()};
  void* bop[] = {b0.data(), b1.data(), b2.data()};
  std::vector<float> bws(long_rows.workspace_bytes() / 4 + 16);
  float* bws64 = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(bws.data()) + 63) & ~uintptr_t{63});
  for (int round = 0; round < 2; ++round) {
    std::fill(b0.begin(), b0.end(), NAN);
    if (round == 0) {
      tbb::task_arena wide(4);
      wide.execute([&] { tbb::parallel_for(0, 1, [&](int) { long_rows.Run(bip, bop, bws64); }); });
    } else {
      std::thread th([&] { long_rows.Run(bip, bop, bws64); });
      th.join();
    }
    for (int i = 0; i < 30000; ++i) ASSERT_EQ(b0[i], big_want.values[0][i]) << "round " << round << " element " << i;
  }
}

}  // namespace
}  // namespace ot::cpu
