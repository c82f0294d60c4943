#include "cuda_ops/cluster_codegen.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "kernel_common/scalar_math.h"

namespace ot::cuda {

using cluster::DType;
using cluster::Instr;
using cluster::Op;
using cluster::Program;

namespace {

// Shared memory of the block reductions: one double per warp (at most 32) and the broadcast result.
constexpr int64_t kReduceSharedBytes = 33 * 8;

std::string Str(int64_t v) { return std::to_string(v); }

// A float constant as its exact bits (no decimal round trip; inf and NaN need no macros NVRTC lacks).
std::string FloatLit(float f) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "ot::BitsFloat(0x%08xu) /* %.9g */", FloatBits(f), static_cast<double>(f));
  return buf;
}

const char* StorageType(DType t) {
  switch (t) {
    case DType::kF32:
      return "float";
    case DType::kF16:
    case DType::kBF16:
      return "uint16_t";
    case DType::kBool:
      return "uint8_t";
  }
  return "float";
}

// Storage element -> float (bool: 0/1, as the interpreter's LoadOne).
std::string LoadExpr(DType t, const std::string& e) {
  switch (t) {
    case DType::kF32:
      return e;
    case DType::kF16:
      return "ot::HalfBitsToFloat(" + e + ")";
    case DType::kBF16:
      return "ot::Bf16BitsToFloat(" + e + ")";
    case DType::kBool:
      return "(" + e + " != 0 ? 1.f : 0.f)";
  }
  return e;
}

// float -> storage element (the interpreter's StoreTile: bool stores v != 0).
std::string StoreExpr(DType t, const std::string& e) {
  switch (t) {
    case DType::kF32:
      return e;
    case DType::kF16:
      return "ot::FloatToHalfBits(" + e + ")";
    case DType::kBF16:
      return "ot::FloatToBf16Bits(" + e + ")";
    case DType::kBool:
      return "static_cast<uint8_t>(" + e + " != 0.f)";
  }
  return e;
}

// A float rounded to what a tensor of dtype t holds (the interpreter's RoundScalar/RoundVec).
std::string RoundExpr(DType t, const std::string& e) {
  switch (t) {
    case DType::kF32:
      return e;
    case DType::kF16:
      return "ot::math::RoundToHalf(" + e + ")";
    case DType::kBF16:
      return "ot::math::RoundToBf16(" + e + ")";
    case DType::kBool:
      return "(" + e + " != 0.f ? 1.f : 0.f)";
  }
  return e;
}

float RoundHost(DType t, float v) {
  switch (t) {
    case DType::kF32:
      return v;
    case DType::kF16:
      return math::RoundToHalf(v);
    case DType::kBF16:
      return math::RoundToBf16(v);
    case DType::kBool:
      return v != 0.f ? 1.f : 0.f;
  }
  return v;
}

// The interpreter's rounding skips (cpu_ops/fused_elementwise.cc MakesBool/Selects), mirrored so that the same
// values are rounded: an op whose result is already 0/1, or one of its operands' values (or exact in their dtype).
bool MakesBool(Op op) { return (op >= Op::kLess && op <= Op::kXor) || op == Op::kNot; }
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

std::string V(int32_t i) {
  std::string s = "v";  // (not "v" + to_string: GCC 12 warns a false -Wrestrict on that)
  s += std::to_string(i);
  return s;
}

// The float expression of an elementwise instruction over its operands' names: the interpreter's ApplyOp formulas.
std::string OpExpr(const Instr& in) {
  const std::string a = in.a >= 0 ? V(in.a) : "", b = in.b >= 0 ? V(in.b) : "", c = in.c >= 0 ? V(in.c) : "";
  const bool tanh_form = in.imm != 0.f;
  switch (in.op) {
    case Op::kNeg:
      return "-" + a;
    case Op::kAbs:
      return "fabsf(" + a + ")";
    case Op::kSign:
      return "ot::math::Sign(" + a + ")";
    case Op::kExp:
      return "ot::math::Exp(" + a + ")";
    case Op::kLog:
      return "logf(" + a + ")";
    case Op::kSqrt:
      return "sqrtf(" + a + ")";
    case Op::kReciprocal:
      return "1.f / " + a;
    case Op::kTanh:
      return "ot::math::Tanh(" + a + ")";
    case Op::kSigmoid:
      return "ot::math::Sigmoid(" + a + ")";
    case Op::kRelu:
      return "ot::math::Relu(" + a + ")";
    case Op::kErf:
      return "ot::math::Erf(" + a + ")";
    case Op::kFloor:
      return "floorf(" + a + ")";
    case Op::kCeil:
      return "ceilf(" + a + ")";
    case Op::kNot:
      return "(" + a + " == 0.f ? 1.f : 0.f)";
    case Op::kLeakyRelu:
      return "ot::math::LeakyRelu(" + a + ", " + FloatLit(in.imm) + ")";
    case Op::kGelu:
      return (tanh_form ? "ot::math::GeluTanh(" : "ot::math::GeluErf(") + a + ")";
    case Op::kIdentity:
    case Op::kCast:
      return a;  // the rounding to the dtype does the cast
    case Op::kAdd:
      return a + " + " + b;
    case Op::kSub:
      return a + " - " + b;
    case Op::kMul:
      return a + " * " + b;
    case Op::kDiv:
      return a + " / " + b;
    case Op::kPow:
      return "static_cast<float>(pow(static_cast<double>(" + a + "), static_cast<double>(" + b + ")))";
    case Op::kMax:
      return "ot::math::NanMax(" + a + ", " + b + ")";
    case Op::kMin:
      return "ot::math::NanMin(" + a + ", " + b + ")";
    case Op::kLess:
      return "(" + a + " < " + b + " ? 1.f : 0.f)";
    case Op::kLessEqual:
      return "(" + a + " <= " + b + " ? 1.f : 0.f)";
    case Op::kGreater:
      return "(" + a + " > " + b + " ? 1.f : 0.f)";
    case Op::kGreaterEqual:
      return "(" + a + " >= " + b + " ? 1.f : 0.f)";
    case Op::kEqual:
      return "(" + a + " == " + b + " ? 1.f : 0.f)";
    case Op::kAnd:
      return "((" + a + " != 0.f) & (" + b + " != 0.f) ? 1.f : 0.f)";
    case Op::kOr:
      return "((" + a + " != 0.f) | (" + b + " != 0.f) ? 1.f : 0.f)";
    case Op::kXor:
      return "((" + a + " != 0.f) != (" + b + " != 0.f) ? 1.f : 0.f)";
    case Op::kReluGrad:
      return "ot::math::ReluGrad(" + a + ", " + b + ")";
    case Op::kGeluGrad:
      return (tanh_form ? "ot::math::GeluGradTanh(" : "ot::math::GeluGradErf(") + a + ", " + b + ")";
    case Op::kWhere:
      return "(" + a + " != 0.f ? " + b + " : " + c + ")";
    default:
      break;
  }
  throw std::logic_error(std::string("cluster codegen: ") + cluster::OpName(in.op) + " is not elementwise");
}

class Generator {
 public:
  Generator(const Program& p, const std::string& name, const ClusterKernelSpec& spec) : p_(p), name_(name) {
    cluster::Validate(p);
    if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
      throw std::invalid_argument("cluster codegen: kernel name '" + name + "' is not a C identifier");
    for (char ch : name)
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'))
        throw std::invalid_argument("cluster codegen: kernel name '" + name + "' is not a C identifier");
    types_ = spec.input_types;
    if (types_.empty()) {
      types_.assign(p.num_inputs, DType::kF32);
      std::vector<bool> seen(p.num_inputs, false);
      for (const Instr& in : p.code)
        if (in.op == Op::kInput && !seen[in.a]) {
          seen[in.a] = true;
          types_[in.a] = in.dtype;
        }
    }
    if (static_cast<int>(types_.size()) != p.num_inputs)
      throw std::invalid_argument("cluster codegen: " + Str(types_.size()) + " input types for a program of " +
                                  Str(p.num_inputs) + " inputs");
    Analyze();
  }

  ClusterKernel Make() {
    ClusterKernel k;
    k.name = name_;
    k.rows = has_rows_;
    k.num_reduction_phases = phases_;
    k.input_types = types_;
    for (int32_t o : p_.outputs) k.output_types.push_back(p_.code[o].dtype);
    k.args_bytes = 8 * (4 + kClusterMaxRank * (1 + std::max(p_.num_inputs, 1)));
    k.source = Source();
    return k;
  }

 private:
  // Dead code (what the outputs need), the launch shape, and the phase of every needed value: level 0 for values
  // of the inputs alone, a reduction one more than its operand, any other op the most of its operands.
  void Analyze() {
    const size_t n = p_.code.size();
    needed_.assign(n, false);
    for (int32_t o : p_.outputs) needed_[o] = true;
    for (size_t i = n; i-- > 0;) {
      if (!needed_[i] || p_.code[i].op == Op::kInput) continue;
      for (int32_t o : Operands(p_.code[i])) needed_[o] = true;
    }
    level_.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      if (!needed_[i]) continue;
      const Instr& in = p_.code[i];
      has_rows_ |= in.row;
      if (in.op == Op::kInput || in.op == Op::kConst) continue;
      int l = 0;
      for (int32_t o : Operands(in)) l = std::max(l, level_[o]);
      level_[i] = cluster::IsReduction(in.op) ? l + 1 : l;
      if (cluster::IsReduction(in.op)) phases_ = std::max(phases_, level_[i]);
    }
  }

  static std::vector<int32_t> Operands(const Instr& in) {
    std::vector<int32_t> r;
    const int ar = cluster::Arity(in.op);
    if (in.op == Op::kInput) return r;
    const int32_t ops[3] = {in.a, in.b, in.c};
    for (int k = 0; k < ar; ++k) r.push_back(ops[k]);
    return r;
  }

  // The full instructions that `roots` need, in program order (row operands are values of the row scope).
  std::vector<int32_t> FullClosure(const std::vector<int32_t>& roots) const {
    std::vector<bool> in(p_.code.size(), false);
    std::vector<int32_t> stack;
    for (int32_t r : roots)
      if (!p_.code[r].row) stack.push_back(r);
    while (!stack.empty()) {
      const int32_t i = stack.back();
      stack.pop_back();
      if (in[i]) continue;
      in[i] = true;
      for (int32_t o : Operands(p_.code[i]))
        if (!p_.code[o].row) stack.push_back(o);
    }
    std::vector<int32_t> r;
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i]) r.push_back(static_cast<int32_t>(i));
    return r;
  }

  // `long long o<k>` = the element offset of input k at flat domain index `idx`, for each k in `inputs`: the
  // coordinates of idx over the (coalesced) dims dotted with the input's strides. An unrolled loop with constant
  // indices, so the argument block stays in parameter memory; rank <= 1 does no division.
  std::string Offsets(const std::set<int32_t>& inputs, const std::string& idx, const std::string& ind) const {
    if (inputs.empty()) return "";
    std::string s;
    for (int32_t k : inputs) s += ind + "long long o" + Str(k) + " = 0;\n";
    s += ind + "{\n" + ind + "  long long rem = " + idx + ";\n";
    s += ind + "#pragma unroll\n" + ind + "  for (int d = " + Str(kClusterMaxRank - 1) + "; d > 0; --d) {\n";
    s += ind + "    if (d < a.rank) {\n";
    s += ind + "      const long long c = rem % a.dims[d];\n" + ind + "      rem /= a.dims[d];\n";
    for (int32_t k : inputs) s += ind + "      o" + Str(k) + " += c * a.strides[" + Str(k) + "][d];\n";
    s += ind + "    }\n" + ind + "  }\n";
    for (int32_t k : inputs) s += ind + "  o" + Str(k) + " += rem * a.strides[" + Str(k) + "][0];\n";
    s += ind + "}\n";
    return s;
  }

  // `const float v<i> = ...;` (or `v<i> = ...;` when declared already) for an instruction that is not a reduction.
  std::string Compute(int32_t i, bool declare = true) const {
    const Instr& in = p_.code[i];
    std::string e;
    if (in.op == Op::kInput) {
      const DType st = types_[in.a];
      e = LoadExpr(st, "in" + Str(in.a) + "[o" + Str(in.a) + "]");
      if (in.dtype != st && in.dtype != DType::kF32 && st != DType::kBool) e = RoundExpr(in.dtype, e);
    } else if (in.op == Op::kConst) {
      e = FloatLit(RoundHost(in.dtype, in.imm));
    } else {
      e = OpExpr(in);
      bool skip = Selects(in.op);
      const std::vector<int32_t> ops = Operands(in);
      for (size_t k = 0; k < ops.size(); ++k)
        if (!(in.op == Op::kWhere && k == 0)) skip &= p_.code[ops[k]].dtype == in.dtype;
      if (in.dtype == DType::kBool && MakesBool(in.op)) skip = true;
      if (!skip) e = RoundExpr(in.dtype, e);
    }
    return (declare ? "const float " : "") + V(i) + " = " + e + ";  // " + cluster::OpName(in.op) + "\n";
  }

  // The loads and computations of `code` (full instructions in program order) at flat index `idx`.
  std::string Body(const std::vector<int32_t>& code, const std::string& idx, const std::string& ind) const {
    std::set<int32_t> inputs;
    for (int32_t i : code)
      if (p_.code[i].op == Op::kInput) inputs.insert(p_.code[i].a);
    std::string s = Offsets(inputs, idx, ind);
    for (int32_t i : code) s += ind + Compute(i);
    return s;
  }

  std::string FullStores(const std::string& idx, const std::string& ind) const {
    std::string s;
    for (size_t j = 0; j < p_.outputs.size(); ++j) {
      const Instr& in = p_.code[p_.outputs[j]];
      if (!in.row) s += ind + "out" + Str(j) + "[" + idx + "] = " + StoreExpr(in.dtype, V(p_.outputs[j])) + ";\n";
    }
    return s;
  }

  std::string Signature() const {
    std::string s = "extern \"C\" __global__ void __launch_bounds__(" + Str(kClusterMaxThreads) + ") " + name_ +
                    "(const __grid_constant__ OtArgs a";
    for (int k = 0; k < p_.num_inputs; ++k) s += ", const " + std::string(StorageType(types_[k])) + "* in" + Str(k);
    for (size_t j = 0; j < p_.outputs.size(); ++j)
      s += ", " + std::string(StorageType(p_.code[p_.outputs[j]].dtype)) + "* out" + Str(j);
    return s + ") {\n";
  }

  std::string Preamble() const {
    std::string s = "// Generated by cuda_ops/cluster_codegen.cc from the cluster program:\n";
    std::string text = cluster::ToText(p_), line;
    for (char ch : text) {
      if (ch == '\n') {
        s += "//   " + line + "\n";
        line.clear();
      } else {
        line += ch;
      }
    }
    s += "// Launch: ";
    s += has_rows_ ? "one block per row (grid-stride over rows), " + Str(phases_) + " reduction phase(s).\n"
                   : "grid-stride loop over the flat domain.\n";
    s += "#include \"kernel_common/scalar_math.h\"\n\n";
    s += "// Argument block (cuda_ops/cluster_codegen.h MakeClusterArgs): strides in elements, 0 where broadcast.\n";
    s += "struct OtArgs {\n  long long numel, rows, row_len, rank;\n  long long dims[" + Str(kClusterMaxRank) +
         "];\n  long long strides[" + Str(std::max(p_.num_inputs, 1)) + "][" + Str(kClusterMaxRank) + "];\n};\n\n";
    if (has_rows_ && phases_ > 0) {
      s += R"(// Block-wide reduction in a fixed order: each warp folds its lanes by shuffle-down (lane l takes l + o),
// lane 0 of each warp leaves its partial in sm[warp], warp 0 folds those the same way and leaves the result in
// sm[32] for every thread. Every thread of the block calls it (blockDim.x is a multiple of 32). Two barriers: a
// later call writes sm[0..31] only after all threads passed this call's second barrier, and sm[32] only after
// all threads passed its own first barrier (so they have read this call's result).
template <typename T, typename F>
__device__ __forceinline__ T ot_block_reduce(T v, T identity, T* sm, F f) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_down_sync(0xffffffffu, v, o));
  if (lane == 0) sm[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nwarps ? sm[lane] : identity;
    for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_down_sync(0xffffffffu, v, o));
    if (lane == 0) sm[32] = v;
  }
  __syncthreads();
  return sm[32];
}
struct OtSum {
  __device__ double operator()(double x, double y) const { return x + y; }
};
struct OtMax {  // NaN, once seen, stays (cpu_ops/reduce.cc's combine)
  __device__ float operator()(float x, float y) const { return ot::math::ReduceMaxStep(x, y); }
};
struct OtMin {
  __device__ float operator()(float x, float y) const { return ot::math::ReduceMinStep(x, y); }
};

)";
    }
    return s;
  }

  std::string FlatKernel() const {
    std::vector<int32_t> roots(p_.outputs.begin(), p_.outputs.end());
    std::string s = Signature();
    s += "  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;\n";
    s += "  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.numel; i += step) "
         "{\n";
    s += Body(FullClosure(roots), "i", "    ");
    s += "    // every input of element i is read: the stores may overwrite it (in place)\n";
    s += FullStores("i", "    ");
    s += "  }\n}\n";
    return s;
  }

  // Row values (not reductions) of level l, at row scope.
  std::string RowValues(int l, const std::string& ind) const {
    std::string s;
    std::set<int32_t> inputs;
    for (size_t i = 0; i < p_.code.size(); ++i) {
      const Instr& in = p_.code[i];
      if (needed_[i] && in.row && in.op == Op::kInput && level_[i] == l) inputs.insert(in.a);
    }
    s += Offsets(inputs, "row_at", ind);
    for (size_t i = 0; i < p_.code.size(); ++i) {
      const Instr& in = p_.code[i];
      if (needed_[i] && in.row && !cluster::IsReduction(in.op) && level_[i] == l)
        s += ind + Compute(static_cast<int32_t>(i));
    }
    return s;
  }

  std::string RowKernel() const {
    std::string s = Signature();
    if (phases_ > 0) {
      s += "  extern __shared__ double ot_smem[];  // " + Str(kReduceSharedBytes) + " bytes: ot_block_reduce\n";
    }
    s += "  for (long long r = blockIdx.x; r < a.rows; r += gridDim.x) {\n";
    s += "    const long long base = r * a.row_len;  // flat index of the row's first element\n";
    s += "    // where row inputs are read: the row's first element, or with empty rows the row itself "
         "(MakeClusterArgs\n"
         "    // then describes the domain with the reduced axes 1)\n";
    s += "    const long long row_at = a.row_len > 0 ? base : r;\n";
    const std::string ind = "    ";
    s += ind + "// row values of the inputs alone\n" + RowValues(0, ind);
    for (int ph = 0; ph < phases_; ++ph) {
      std::vector<int32_t> reds, roots;
      for (size_t i = 0; i < p_.code.size(); ++i)
        if (needed_[i] && cluster::IsReduction(p_.code[i].op) && level_[i] == ph + 1) {
          reds.push_back(static_cast<int32_t>(i));
          roots.push_back(p_.code[i].a);
        }
      s += ind + "// phase " + Str(ph) + ": reductions of values that need " + Str(ph) + " earlier reduction(s)\n";
      for (int32_t r : reds) s += ind + "float " + V(r) + ";\n";
      s += ind + "{\n";
      for (int32_t r : reds) {
        const Op op = p_.code[r].op;
        if (op == Op::kReduceSum || op == Op::kReduceMean)
          s += ind + "  double acc" + Str(r) + " = 0.0;\n";
        else
          s += ind + "  float acc" + Str(r) + " = " + FloatLit(op == Op::kReduceMax ? -INFINITY : INFINITY) + ";\n";
      }
      s += ind + "  for (long long j = threadIdx.x; j < a.row_len; j += blockDim.x) {\n";
      s += ind + "    const long long i = base + j;\n";
      s += Body(FullClosure(roots), "i", ind + "    ");
      for (int32_t r : reds) {
        const Instr& in = p_.code[r];
        if (in.op == Op::kReduceSum || in.op == Op::kReduceMean)
          s += ind + "    acc" + Str(r) + " += static_cast<double>(" + V(in.a) + ");\n";
        else
          s += ind + "    acc" + Str(r) +
               " = ot::math::" + (in.op == Op::kReduceMax ? "ReduceMaxStep" : "ReduceMinStep") + "(acc" + Str(r) +
               ", " + V(in.a) + ");\n";
      }
      s += ind + "  }\n";
      for (int32_t r : reds) {
        const Instr& in = p_.code[r];
        std::string e;
        if (in.op == Op::kReduceSum || in.op == Op::kReduceMean) {
          e = "ot_block_reduce(acc" + Str(r) + ", 0.0, ot_smem, OtSum())";
          if (in.op == Op::kReduceMean) e = "(" + e + ") / static_cast<double>(a.row_len)";
          e = "static_cast<float>(" + e + ")";
        } else {
          const bool mx = in.op == Op::kReduceMax;
          e = "ot_block_reduce(acc" + Str(r) + ", " + FloatLit(mx ? -INFINITY : INFINITY) +
              ", reinterpret_cast<float*>(ot_smem), " + (mx ? "OtMax()" : "OtMin()") + ")";
        }
        s += ind + "  " + V(r) + " = " + RoundExpr(in.dtype, e) + ";  // " + cluster::OpName(in.op) + "\n";
      }
      s += ind + "}\n" + RowValues(ph + 1, ind);
    }
    s += ind + "// outputs: element j of the row after every input of j was read (in place is safe)\n";
    std::vector<int32_t> full_roots;
    for (int32_t o : p_.outputs)
      if (!p_.code[o].row) full_roots.push_back(o);
    if (!full_roots.empty()) {
      s += ind + "for (long long j = threadIdx.x; j < a.row_len; j += blockDim.x) {\n";
      s += ind + "  const long long i = base + j;\n";
      s += Body(FullClosure(full_roots), "i", ind + "  ");
      s += FullStores("i", ind + "  ");
      s += ind + "}\n";
    }
    std::string row_stores;
    for (size_t j = 0; j < p_.outputs.size(); ++j) {
      const Instr& in = p_.code[p_.outputs[j]];
      if (in.row) row_stores += ind + "  out" + Str(j) + "[r] = " + StoreExpr(in.dtype, V(p_.outputs[j])) + ";\n";
    }
    if (!row_stores.empty()) s += ind + "if (threadIdx.x == 0) {\n" + row_stores + ind + "}\n";
    s += "  }\n}\n";
    return s;
  }

  std::string Source() const { return Preamble() + (has_rows_ ? RowKernel() : FlatKernel()); }

  const Program& p_;
  std::string name_;
  std::vector<DType> types_;
  std::vector<bool> needed_;
  std::vector<int> level_;
  bool has_rows_ = false;
  int phases_ = 0;
};

int64_t Product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= d[i];
  return n;
}

std::string DimsText(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

ClusterLaunch ClusterKernel::Launch(int64_t numel, int64_t rows_n, int64_t row_len) const {
  ClusterLaunch l;
  l.rows = rows;
  if (!rows) {
    l.block = kClusterMaxThreads;
    l.grid = std::min<int64_t>((numel + l.block - 1) / l.block, kClusterMaxGrid);
    return l;
  }
  // Whole warps (the block reduction shuffles full warps), no more than the row has elements.
  l.block = static_cast<int>(std::clamp<int64_t>((row_len + 31) / 32 * 32, 32, kClusterMaxThreads));
  l.grid = std::min<int64_t>(rows_n, kClusterMaxGrid);
  l.shared_bytes = num_reduction_phases > 0 ? kReduceSharedBytes : 0;
  return l;
}

ClusterKernel GenerateClusterKernel(const Program& p, const std::string& kernel_name, const ClusterKernelSpec& spec) {
  return Generator(p, kernel_name, spec).Make();
}

std::string GenerateClusterSource(const Program& p, const std::string& kernel_name) {
  return GenerateClusterKernel(p, kernel_name).source;
}

ClusterArgs MakeClusterArgs(const Program& p, const std::vector<int64_t>& domain,
                            const std::vector<std::vector<int64_t>>& input_dims) {
  cluster::Validate(p);
  const int rank = static_cast<int>(domain.size());
  if (static_cast<int>(input_dims.size()) != p.num_inputs)
    throw std::invalid_argument("cluster args: " + Str(input_dims.size()) + " input dims for " + Str(p.num_inputs) +
                                " inputs");
  if (p.reduce_axes > rank)
    throw std::invalid_argument("cluster args: reduce_axes " + Str(p.reduce_axes) + " exceeds the rank of " +
                                DimsText(domain));
  for (int64_t d : domain)
    if (d < 0) throw std::invalid_argument("cluster args: negative dim in the domain " + DimsText(domain));
  const int lead = rank - p.reduce_axes;
  std::vector<bool> as_row(p.num_inputs, false);
  for (const Instr& in : p.code)
    if (in.op == Op::kInput && in.row) as_row[in.a] = true;
  // Strides over the domain's axes, 0 where the input broadcasts (or the axis has one element).
  std::vector<std::vector<int64_t>> st(p.num_inputs, std::vector<int64_t>(rank, 0));
  for (int k = 0; k < p.num_inputs; ++k) {
    const std::vector<int64_t>& in = input_dims[k];
    const int ir = static_cast<int>(in.size());
    int64_t s = 1;
    for (int d = ir - 1; d >= 0; --d) {
      const int td = rank - ir + d;
      // A row input broadcasts to D with the reduced axes 1 (the interpreter's row shape).
      const int64_t target = td < 0 ? 1 : (as_row[k] && td >= lead ? 1 : domain[td]);
      if (in[d] < 0 || (in[d] != 1 && in[d] != target))
        throw std::invalid_argument("cluster args: input " + Str(k) + " dims " + DimsText(in) +
                                    " do not broadcast to the " + (as_row[k] ? "row shape of " : "domain ") +
                                    DimsText(domain));
      if (td >= 0 && in[d] != 1) st[k][td] = s;
      s *= in[d];
    }
  }
  // Empty rows (row_len 0, rows > 0): no full element is visited, but row inputs are still read per row, which
  // the kernel then indexes by the row number: the strides describe D with the reduced axes 1.
  const int64_t row_len = Product(domain, lead, rank), rows = Product(domain, 0, lead);
  std::vector<int64_t> index_domain = domain;
  if (row_len == 0 && rows > 0) {
    for (int d = lead; d < rank; ++d) index_domain[d] = 1;
    for (int k = 0; k < p.num_inputs; ++k)
      for (int d = lead; d < rank; ++d) st[k][d] = 0;
  }
  // Coalesce: drop axes of one element, merge an axis into the one outside it when every input walks both as one.
  std::vector<int64_t> cd;
  std::vector<std::vector<int64_t>> cs(p.num_inputs);
  for (int d = 0; d < rank; ++d) {
    const int64_t n = index_domain[d];
    if (n == 1) continue;
    bool merge = !cd.empty();
    for (int k = 0; k < p.num_inputs && merge; ++k) merge = cs[k].back() == st[k][d] * n;
    if (merge) {
      cd.back() *= n;
      for (int k = 0; k < p.num_inputs; ++k) cs[k].back() = st[k][d];
    } else {
      cd.push_back(n);
      for (int k = 0; k < p.num_inputs; ++k) cs[k].push_back(st[k][d]);
    }
  }
  if (static_cast<int>(cd.size()) > kClusterMaxRank)
    throw std::invalid_argument("cluster args: the domain " + DimsText(domain) + " has " + Str(cd.size()) +
                                " axes after coalescing; the kernels take at most " + Str(kClusterMaxRank));
  ClusterArgs r;
  r.numel = Product(domain, 0, rank);
  r.rows = rows;
  r.row_len = row_len;
  const int nin = std::max(p.num_inputs, 1);
  r.words.assign(4 + kClusterMaxRank * (1 + nin), 0);
  r.words[0] = r.numel;
  r.words[1] = r.rows;
  r.words[2] = r.row_len;
  r.words[3] = static_cast<int64_t>(cd.size());
  for (int d = 0; d < kClusterMaxRank; ++d) r.words[4 + d] = d < static_cast<int>(cd.size()) ? cd[d] : 1;
  for (int k = 0; k < p.num_inputs; ++k)
    for (size_t d = 0; d < cd.size(); ++d) r.words[4 + kClusterMaxRank * (1 + k) + d] = cs[k][d];
  return r;
}

}  // namespace ot::cuda
