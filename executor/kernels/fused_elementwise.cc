// CPU kernel of ai.onnxtrain.FusedElementwise (graph/ops/fused.cc): parses the node's program once, works out the
// domain from the concrete input dims (the broadcast of the full inputs) and hands both to the interpreter
// (cpu_ops/fused_elementwise.h), which runs the cluster in one pass over cache-sized tiles. Its scratch registers
// are the kernel's declared workspace; an output may take the memory of a full, unbroadcast input of the same
// element size (the interpreter loads a tile before it stores it).
#include "cpu_ops/fused_elementwise.h"

#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "executor/kernel_registry.h"
#include "executor/threads.h"
#include "graph/graph.h"
#include "graph/infer_util.h"
#include "kernel_common/cluster_program.h"
#include "passes/cluster_program_builder.h"

namespace ot {

namespace {

KernelInfo FusedElementwiseKernel(const KernelContext& ctx) {
  cluster::Program p;
  try {
    p = cluster::ParseProgram(ctx.node.attr_string("program", ""));
  } catch (const std::invalid_argument& e) {
    ctx.Fail(std::string("bad program: ") + e.what());
  }
  std::vector<std::vector<int64_t>> dims;
  std::vector<cluster::DType> types;
  for (int i = 0; i < p.num_inputs; ++i) {
    cluster::DType t;
    if (!ToClusterType(ctx.in(i).dtype, &t))
      ctx.Unsupported("input " + std::to_string(i) + " is " + DataTypeName(ctx.in(i).dtype));
    types.push_back(t);
    dims.push_back(ctx.in(i).dims);
  }
  std::vector<std::vector<int64_t>> full;
  std::vector<bool> is_full(p.num_inputs, false);
  for (const cluster::Instr& ins : p.code)
    if (ins.op == cluster::Op::kInput && !ins.row) is_full[ins.a] = true;
  for (int i = 0; i < p.num_inputs; ++i)
    if (is_full[i]) full.push_back(dims[i]);
  const std::vector<int64_t> domain = BroadcastDims(full, ctx.node.Describe());
  const int64_t n = NumElements(domain);
  std::shared_ptr<cpu::FusedKernel> k;
  try {
    k = std::make_shared<cpu::FusedKernel>(p, domain, dims, types, ThreadCount());
  } catch (const std::invalid_argument& e) {
    ctx.Fail(e.what());
  }
  KernelInfo info;
  info.workspace_bytes = k->workspace_bytes();
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    if (p.code[p.outputs[o]].row || ctx.out(static_cast<int>(o)).numel() != n) continue;
    for (int i = 0; i < p.num_inputs; ++i)
      if (is_full[i] && ctx.in(i).numel() == n && SizeOf(ctx.in(i).dtype) == SizeOf(ctx.out(static_cast<int>(o)).dtype))
        info.inplace.push_back({static_cast<int>(o), i});
  }
  info.fn = [k](const KernelIO& io) {
    if (io.workspace || k->workspace_bytes() == 0) {
      k->Run(io.in, io.out, io.workspace);
      return;
    }
    // Called outside a plan (folding at plan time, tests): scratch of its own.
    std::unique_ptr<void, void (*)(void*)> ws(std::aligned_alloc(64, (k->workspace_bytes() + 63) / 64 * 64), std::free);
    if (!ws) throw Error("out of host memory for a fused kernel's " + std::to_string(k->workspace_bytes()) + " bytes");
    k->Run(io.in, io.out, ws.get());
  };
  return info;
}

}  // namespace

void RegisterFusedElementwiseKernels(KernelRegistry& r) {
  r.Register("FusedElementwise", FusedElementwiseKernel, kInternalDomain);
}

}  // namespace ot
