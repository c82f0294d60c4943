// The program of a fused cluster (passes/cluster_fusion builds it, cpu_ops/fused_elementwise interprets it,
// cuda_ops turns it into CUDA C): a straight-line list of scalar instructions over one iteration domain, with no
// IR types, so passes, cpu_ops and cuda_ops can all include it without depending on each other.
//
// Semantics. The domain is a concrete shape D (given when the kernel is made, not in the program). The last
// `reduce_axes` axes of D are the row: every value is either
//   full  one element per element of D, or
//   row   one element per row (D with the reduced axes set to 1).
// An instruction computes its value element by element from earlier instructions (operands a, b, c are indices
// into `code`); a binary/ternary op mixing a row and a full operand broadcasts the row value along its row. A
// row reduction turns a full value into a row value. Every value is computed in float and rounded to its dtype
// when it is made (an f16 value holds what an f16 tensor would), so a cluster computes what its ops computed one
// by one. Bool values hold 0 or 1.
// An input is a tensor that broadcasts (numpy rules, aligned on the right) to D (a full kInput) or to the row shape
// (a row kInput). An output stores one full or row value: a full output has D's elements, a row output one
// element per row (its dims may be D with the reduced axes 1 or dropped: the same element order).
// In place: an interpreter reads every input element of a tile before it stores any output element of that tile,
// so an output may share the memory of an input with D's elements (full, not broadcast) and the output's dtype
// size; the executor's memory planner relies on this.
#pragma once
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ot::cluster {

// Storage types of values, inputs and outputs.
enum class DType : uint8_t { kF32, kF16, kBF16, kBool };

enum class Op : uint8_t {
  kInput,  // a = input index
  kConst,  // imm
  // unary (a)
  kNeg,
  kAbs,
  kSign,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kTanh,
  kSigmoid,
  kRelu,
  kErf,
  kFloor,
  kCeil,
  kNot,
  kLeakyRelu,  // imm = alpha
  kGelu,       // imm = 0: erf form, 1: tanh form
  kIdentity,   // a copy (a Cast to the same type)
  kCast,       // a rounded to this instruction's dtype (to bool: a != 0)
  // binary (a, b)
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMax,
  kMin,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,
  kEqual,
  kAnd,
  kOr,
  kXor,
  kReluGrad,  // b > 0 ? a : 0 (a select, not a product: a NaN dY where b <= 0 gives 0): dY and X (or Y) of Relu
  kGeluGrad,  // dY = a, X = b; imm as kGelu
  // ternary
  kWhere,  // a ? b : c
  // row reductions of a full value (a) to a row value
  kReduceSum,
  kReduceMean,
  kReduceMax,
  kReduceMin,
};

struct Instr {
  Op op = Op::kConst;
  int32_t a = -1, b = -1, c = -1;
  float imm = 0.f;
  DType dtype = DType::kF32;
  bool row = false;  // a row value (see above)
};

struct Program {
  int32_t num_inputs = 0;
  std::vector<Instr> code;
  std::vector<int32_t> outputs;  // the instruction each output stores
  int32_t reduce_axes = 0;       // trailing axes of the domain that the row reductions reduce (0: none)
};

// Facts about ops.
inline int Arity(Op op) {
  switch (op) {
    case Op::kInput:
    case Op::kConst:
      return 0;
    case Op::kWhere:
      return 3;
    default:
      break;
  }
  if (op >= Op::kAdd && op <= Op::kGeluGrad) return 2;
  return 1;
}
inline bool IsReduction(Op op) { return op >= Op::kReduceSum && op <= Op::kReduceMin; }
// Instruction i changes no bit: an Identity, or a Cast to its operand's own dtype, of its operand's row-ness.
inline bool IsPlainCopy(const Program& p, int32_t i) {
  const Instr& c = p.code[i];
  return (c.op == Op::kIdentity || c.op == Op::kCast) && c.dtype == p.code[c.a].dtype && c.row == p.code[c.a].row;
}
// Instructions that compute something: not inputs, constants or plain copies.
inline int ComputingInstructions(const Program& p) {
  int n = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(p.code.size()); ++i)
    n += p.code[i].op != Op::kInput && p.code[i].op != Op::kConst && !IsPlainCopy(p, i);
  return n;
}

// Text form (the FusedElementwise node's `program` attribute; parsing round-trips exactly):
//   inputs N
//   reduce_axes K                        (only when K > 0)
//   %I = OPNAME [%A [%B [%C]]] [imm=FLOAT] [input=N] : DTYPE [row]
//   outputs %I %J ...
// OPNAME is the Op's name in lower case without the k (input, const, neg, ..., reduce_min); FLOAT is printed
// with %.9g; DTYPE is f32, f16, bf16 or bool. Instructions are numbered from 0 in order.
const char* OpName(Op op);
DType ParseDType(const std::string& s);  // throws std::invalid_argument
const char* DTypeName(DType t);
std::string ToText(const Program& p);
// Throws std::invalid_argument naming the line for malformed text, an operand that is not an earlier instruction,
// an arity mismatch, or an input index out of range.
Program ParseProgram(const std::string& text);
// Checks the invariants above (operands earlier, arity, row flags consistent: reductions make rows of fulls, an
// op of only row operands is row, one with a full operand is full; every output refers to an instruction).
// Throws std::invalid_argument saying what is wrong; used by both parse and the builders.
void Validate(const Program& p);

}  // namespace ot::cluster

#include "kernel_common/cluster_program_text.h"  // inline definitions of the functions above
