// cpu_ops/fused_elementwise (the CPU interpreter of cluster programs): kernel_common/cluster_program's text form, every
// op, and broadcasting, against the reference of tests/cpu_ops/fused_reference.h, which evaluates a program element
// by element:
//   - in float64 (ops computed in double, nothing rounded but Casts): checks the formulas, with a tolerance;
//   - "exact" (ops computed in float with the formulas of the op-by-op kernels, every result rounded to its
//     dtype with kernel_common/half.h): what the ops would compute one by one; the interpreter must match it
//     exactly. Row sums accumulate in double over four interleaved lanes, ((l0 + l1) + (l2 + l3)) + tail, the
//     order the interpreter documents.
// Outputs are pre-filled with NaN (bool outputs with the byte 0xAB), so an element left unwritten fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/cpu_ops/fused_reference.h"

namespace ot::cpu {
namespace {

using namespace fused_test;  // NOLINT: the tests' reference
using cluster::DType;
using cluster::Instr;
using cluster::Op;
using cluster::Program;

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

// Pow by one exponent for every element: 2 and 1 take a multiply and a copy (an RMS norm's x^2 and its gradient's
// x^1), 3 the general pow; all three give exactly the reference's pow in double rounded to float, over random values
// and the edges (zeros of both signs, infinities, NaN, squares that overflow or fall to subnormals or zero).
TEST(FusedKernel, PowOfOneExponentIsExact) {
  const std::vector<int64_t> D = {2, 3000};
  for (double e : {2.0, 1.0, 3.0}) {
    SCOPED_TRACE("exponent " + std::to_string(e));
    Builder b(2);
    const int x = b.In(0);
    const int y = b.In(1);
    b.Out({b.Op_(Op::kPow, DType::kF32, x, y)});
    Tensor t = RandomTensor(DType::kF32, D, -50, 50);
    const double edges[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e20, -3e19, 1e-20, -2e-23, 1e-30};
    for (int64_t i = 0; i < 10; ++i) WriteElem(DType::kF32, t.bytes, i * 37, edges[i]);
    Tensor ex = RandomTensor(DType::kF32, {}, 0, 1);
    WriteElem(DType::kF32, ex.bytes, 0, e);
    Check(b.p, D, {t, ex});
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

}  // namespace
}  // namespace ot::cpu
