// A small cluster-program builder for the CUDA code-generator tests: each call appends an instruction and returns
// its index.
#pragma once
#include <cstdint>

#include "kernel_common/cluster_program.h"

namespace ot::test {

struct ProgramBuilder {
  cluster::Program p;
  int32_t Add(cluster::Op op, cluster::DType t, int32_t a = -1, int32_t b = -1, int32_t c = -1, float imm = 0.f,
              bool row = false) {
    cluster::Instr in;
    in.op = op;
    in.dtype = t;
    in.a = a;
    in.b = b;
    in.c = c;
    in.imm = imm;
    in.row = row;
    p.code.push_back(in);
    return static_cast<int32_t>(p.code.size() - 1);
  }
  int32_t Input(int k, cluster::DType t, bool row = false) { return Add(cluster::Op::kInput, t, k, -1, -1, 0.f, row); }
  void Out(int32_t i) { p.outputs.push_back(i); }
};

}  // namespace ot::test
