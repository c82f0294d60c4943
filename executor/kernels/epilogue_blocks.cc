#include "executor/kernels/epilogue_blocks.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "graph/error.h"
#include "graph/infer_util.h"
#include "graph/tensor.h"
#include "passes/cluster_program_builder.h"

namespace ot {

EpilogueProgram ReadEpilogueProgram(const KernelContext& ctx, const std::vector<int64_t>& ydims, DataType y_type) {
  EpilogueProgram e;
  try {
    e.p = cluster::ParseProgram(ctx.node.attr_string("program", ""));
  } catch (const std::invalid_argument& err) {
    ctx.Fail(std::string("bad program: ") + err.what());
  }
  const cluster::Program& p = e.p;
  if (p.num_inputs != static_cast<int>(ctx.inputs.size()) - 2)
    ctx.Fail("the program reads " + std::to_string(p.num_inputs) + " inputs (Y and " +
             std::to_string(static_cast<int>(ctx.inputs.size()) - 3) + " operands expected)");
  cluster::DType yt;
  if (y_type == DataType::kBool || !ToClusterType(y_type, &yt))
    ctx.Unsupported("dtype " + DataTypeName(y_type) + " is not supported");
  e.dims = {ydims};
  e.types = {yt};
  for (int i = 1; i < p.num_inputs; ++i) {
    cluster::DType ct;
    if (!ToClusterType(ctx.in(i + 2).dtype, &ct))
      ctx.Unsupported("operand " + std::to_string(i) + " is " + DataTypeName(ctx.in(i + 2).dtype));
    e.dims.push_back(ctx.in(i + 2).dims);
    e.types.push_back(ct);
  }
  e.is_full.assign(p.num_inputs, false);
  e.is_row.assign(p.num_inputs, false);
  for (const cluster::Instr& ins : p.code)
    if (ins.op == cluster::Op::kInput) (ins.row ? e.is_row : e.is_full)[ins.a] = true;
  if (!e.is_full[0] || e.is_row[0]) ctx.Fail("the program must load Y (input 0) as a full value");
  std::vector<std::vector<int64_t>> full;
  for (int i = 0; i < p.num_inputs; ++i)
    if (e.is_full[i]) full.push_back(e.dims[i]);
  if (BroadcastDims(full, ctx.node.Describe()) != ydims)
    ctx.Fail("the program's domain is not Y's shape " + DimsToString(ydims));
  return e;
}

uint8_t* EpilogueScratch(const KernelIO& io, size_t bytes, const char* op, OwnedScratch& own) {
  if (io.workspace) return static_cast<uint8_t*>(io.workspace);
  own.reset(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (!own) throw Error(std::string("out of host memory for a ") + op + "'s " + std::to_string(bytes) + " bytes");
  return static_cast<uint8_t*>(own.get());
}

void BlockPointers(const KernelIO& io, const void* y_block, const std::vector<BlockStride>& in,
                   const std::vector<BlockStride>& out, int64_t first, std::vector<const void*>& ins,
                   std::vector<void*>& outs) {
  ins.resize(in.size());
  outs.resize(out.size());
  ins[0] = y_block;
  for (size_t i = 1; i < in.size(); ++i) {
    const auto* base = static_cast<const uint8_t*>(io.in[i + 2]);
    ins[i] = in[i].advances ? base + static_cast<size_t>(first * in[i].step) * in[i].elem_size : base;
  }
  for (size_t o = 0; o < out.size(); ++o) {
    auto* base = static_cast<uint8_t*>(io.out[o]);
    outs[o] = out[o].advances ? base + static_cast<size_t>(first * out[o].step) * out[o].elem_size : base;
  }
}

}  // namespace ot
