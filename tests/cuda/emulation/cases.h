// The cluster programs that tests/cuda/cluster_emulation_test.cc runs as generated CUDA C on the host: shared by
// the generator of their kernels (generate_kernels.cc, run at build time) and the test, so both see the same
// programs in the same order. Every elementwise op per dtype over broadcast inputs, loads that convert storage
// types, row programs (softmax, layer norm, min, a third phase, a bool output) of 0, 1, 7, 100 and 1000 elements
// per row, two reduced axes with a broadcast row input, and an in-place update.
#pragma once
#include <string>
#include <vector>

#include "kernel_common/cluster_program.h"
#include "tests/cuda/program_builder.h"

namespace ot::emu {

using cluster::DType;
using cluster::Op;
using cluster::Program;

struct Case {
  std::string name;  // also the kernel's name
  Program p;
  std::vector<DType> types;  // input storage types
  std::vector<int64_t> domain;
  std::vector<std::vector<int64_t>> dims;
  bool inplace = false;  // output 0 is written over input 0
};

using test::ProgramBuilder;  // tests/cuda/program_builder.h

inline std::vector<Case> Cases() {
  const DType kAll[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kBool};
  std::vector<Case> cs;
  for (DType t : kAll) {
    ProgramBuilder b;
    b.p.num_inputs = 3;
    const int32_t x = b.Add(Op::kInput, t, 0), y = b.Add(Op::kInput, t, 1), z = b.Add(Op::kInput, t, 2);
    for (int o = static_cast<int>(Op::kNeg); o <= static_cast<int>(Op::kWhere); ++o) {
      const Op op = static_cast<Op>(o);
      const float imm = op == Op::kLeakyRelu ? 0.01f : (op == Op::kGelu || op == Op::kGeluGrad) ? 1.f : 0.f;
      const int ar = cluster::Arity(op);
      b.p.outputs.push_back(ar == 1   ? b.Add(op, t, x, -1, -1, imm)
                            : ar == 2 ? b.Add(op, t, x, y, -1, imm)
                                      : b.Add(op, t, z, x, y));
    }
    b.p.outputs.push_back(b.Add(Op::kGelu, t, x));  // the erf forms
    b.p.outputs.push_back(b.Add(Op::kGeluGrad, t, x, y));
    for (DType u : kAll) b.p.outputs.push_back(b.Add(Op::kCast, u, x));
    const std::string tn = cluster::DTypeName(t);
    cs.push_back({"emu_every_op_" + tn, b.p, {t, t, t}, {3, 5, 67}, {{3, 5, 67}, {5, 67}, {3, 1, 67}}});
    ProgramBuilder c;  // storage t loaded as every dtype, broadcast from [9]
    c.p.num_inputs = 1;
    for (DType u : kAll) c.p.outputs.push_back(c.Add(Op::kInput, u, 0));
    cs.push_back({"emu_loads_" + tn, c.p, {t}, {2, 1, 9}, {{9}}});
  }
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    ProgramBuilder b;
    b.p.num_inputs = 3;
    b.p.reduce_axes = 1;
    const DType f = DType::kF32;
    const int32_t x = b.Add(Op::kInput, t, 0), bias = b.Add(Op::kInput, t, 1);
    const int32_t s = b.Add(Op::kInput, f, 2, -1, -1, 0.f, true);
    const int32_t xb = b.Add(Op::kAdd, t, b.Add(Op::kMul, t, x, b.Add(Op::kCast, t, s, -1, -1, 0.f, true)), bias);
    const int32_t mx = b.Add(Op::kReduceMax, f, xb, -1, -1, 0.f, true);
    const int32_t e = b.Add(Op::kExp, f, b.Add(Op::kSub, f, xb, mx));
    const int32_t sum = b.Add(Op::kReduceSum, f, e, -1, -1, 0.f, true);
    const int32_t sm = b.Add(Op::kCast, t, b.Add(Op::kDiv, f, e, sum));
    const int32_t smsum = b.Add(Op::kReduceSum, f, sm, -1, -1, 0.f, true);
    const int32_t mean = b.Add(Op::kReduceMean, f, x, -1, -1, 0.f, true);
    const int32_t d = b.Add(Op::kSub, f, x, mean);
    const int32_t var = b.Add(Op::kReduceMean, f, b.Add(Op::kMul, f, d, d), -1, -1, 0.f, true);
    const int32_t eps = b.Add(Op::kConst, f, -1, -1, -1, 1e-5f, true);
    const int32_t sd = b.Add(Op::kSqrt, f, b.Add(Op::kAdd, f, var, eps, -1, 0.f, true), -1, -1, 0.f, true);
    const int32_t rstd = b.Add(Op::kReciprocal, f, sd, -1, -1, 0.f, true);
    const int32_t ln = b.Add(Op::kCast, t, b.Add(Op::kMul, f, d, rstd));
    const int32_t mn = b.Add(Op::kReduceMin, t, ln, -1, -1, 0.f, true);
    const int32_t gt = b.Add(Op::kGreater, DType::kBool, xb, b.Add(Op::kCast, t, mean, -1, -1, 0.f, true));
    b.p.outputs = {sm, ln, mx, sum, smsum, mn, gt, rstd};
    for (int64_t len : {0, 1, 7, 100, 1000})
      cs.push_back({"emu_rows_" + std::string(cluster::DTypeName(t)) + "_" + std::to_string(len),
                    b.p,
                    {t, t, f},
                    {2, 3, len},
                    {{2, 3, len}, {len}, {2, 3, 1}}});
  }
  {
    ProgramBuilder b;
    b.p.num_inputs = 2;
    b.p.reduce_axes = 2;
    const int32_t x = b.Add(Op::kInput, DType::kF32, 0), r = b.Add(Op::kInput, DType::kF32, 1, -1, -1, 0.f, true);
    const int32_t s = b.Add(Op::kReduceSum, DType::kF32, b.Add(Op::kMul, DType::kF32, x, r), -1, -1, 0.f, true);
    b.p.outputs = {s, b.Add(Op::kSub, DType::kF32, x, s)};
    cs.push_back({"emu_rows_two_axes", b.p, {DType::kF32, DType::kF32}, {4, 3, 5, 6}, {{4, 3, 5, 6}, {3, 1, 1}}});
  }
  {
    ProgramBuilder b;
    b.p.num_inputs = 2;
    const int32_t w = b.Add(Op::kInput, DType::kF32, 0), g = b.Add(Op::kInput, DType::kF32, 1);
    const int32_t lr = b.Add(Op::kConst, DType::kF32, -1, -1, -1, 0.01f);
    const int32_t w2 = b.Add(Op::kSub, DType::kF32, w, b.Add(Op::kMul, DType::kF32, g, lr));
    b.p.outputs = {w2, b.Add(Op::kCast, DType::kBF16, w2)};
    cs.push_back({"emu_inplace_update", b.p, {DType::kF32, DType::kF32}, {100, 37}, {{100, 37}, {100, 37}}, true});
  }
  return cs;
}

}  // namespace ot::emu
