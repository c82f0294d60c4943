// CPU kernel of ai.onnxtrain.MatMulEpilogue(A [..., M, K], B [K, N], bias [N] (optional), operands...)
// {program, row_keepdims} (graph/ops/fused.cc; made by passes/fuse_epilogue.cc under --fuse=full).
// Y = A B (+ bias) over the M' = prod(A's leading dims) rows of the folded batch, in row blocks: each block's GEMM
// (oneDNN; the bias written into the block first and accumulated onto, as MatMulBias does) fills a cache-sized
// block buffer -- the kernel's workspace -- and the cluster program (cpu_ops/fused_elementwise.h) runs over that
// block right away, reading the buffer as its input 0, so Y reaches memory only where the program stores it.
// Blocks: about 1 MiB of Y each (an L2 cache) and at least 256 rows (smaller GEMMs lose more than the cache gains); a
// program operand is either the same for every block (it broadcasts along the rows) or advances with the rows (Y's
// shape, or one value per row); any other operand shape, or a program reducing more than the last axis, runs as one
// block. Every block computes what the whole would (the GEMM's rows are independent and the program is elementwise or
// reduces along a row), up to the order in which oneDNN adds a row's K products: its kernel for a block's last rows may
// differ in the last bits.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "cpu_ops/dnnl_util.h"
#include "cpu_ops/fused_elementwise.h"
#include "cpu_ops/matmul.h"
#include "executor/kernel_registry.h"
#include "executor/kernels/epilogue_blocks.h"
#include "executor/threads.h"
#include "graph/graph.h"
#include "graph/infer_util.h"
#include "graph/tensor.h"
#include "kernel_common/cluster_program.h"
#include "kernel_common/half.h"

namespace ot {

void RegisterMatMulEpilogueKernels(KernelRegistry& r);

namespace {

// One block size: its GEMM and its program.
struct Block {
  std::shared_ptr<cpu::DnnlMatMul> mm;
  std::shared_ptr<cpu::FusedKernel> fk;
};

KernelInfo MatMulEpilogueKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  const bool has_bias = ctx.has_input(2);
  for (int i = 1; i < (has_bias ? 3 : 2); ++i)
    if (ctx.in(i).dtype != t)
      ctx.Fail("input " + std::to_string(i) + " (" + DataTypeName(ctx.in(i).dtype) + ") and A (" + DataTypeName(t) +
               ") differ in dtype");
  const auto& a = ctx.in(0).dims;
  const auto& b = ctx.in(1).dims;
  if (a.size() < 2 || b.size() != 2 || a.back() != b[0])
    ctx.Fail("takes A [..., M, K] and B [K, N]; got A " + DimsToString(a) + ", B " + DimsToString(b));
  if (has_bias && (ctx.in(2).dims.size() != 1 || ctx.in(2).dims[0] != b[1]))
    ctx.Fail("bias " + DimsToString(ctx.in(2).dims) + " does not match N of B " + DimsToString(b));
  const int64_t k = b[0], n = b[1];
  int64_t m = 1;
  for (size_t i = 0; i + 1 < a.size(); ++i) m *= a[i];
  std::vector<int64_t> ydims(a.begin(), a.end() - 1);
  ydims.push_back(n);
  const EpilogueProgram e = ReadEpilogueProgram(ctx, ydims, t);
  const cluster::Program& p = e.p;

  // Blocking: every operand must be row-invariant or advance with the rows.
  bool blockable = p.reduce_axes <= 1;
  std::vector<BlockStride> in_stride(p.num_inputs), out_stride(p.outputs.size());
  for (int i = 1; i < p.num_inputs && blockable; ++i) {
    const auto& d = e.dims[i];
    const int64_t numel = NumElements(d);
    bool lead_ones = true;  // every axis but the last is 1 (or the operand is shorter): the same for every row
    for (size_t q = 0; q + 1 < d.size(); ++q) lead_ones = lead_ones && d[q] == 1;
    in_stride[i].elem_size = SizeOf(ctx.in(i + 2).dtype);
    if (e.is_row[i] && !e.is_full[i]) {
      if (numel == 1) continue;
      if (numel == m)
        in_stride[i] = {true, 1, in_stride[i].elem_size};
      else
        blockable = false;
    } else if (lead_ones && !e.is_row[i]) {
      continue;
    } else if (d == ydims && !e.is_row[i]) {
      in_stride[i] = {true, n, in_stride[i].elem_size};
    } else {
      blockable = false;
    }
  }
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    const bool row = p.code[static_cast<size_t>(p.outputs[o])].row;
    out_stride[o] = {true, row ? 1 : n, SizeOf(ctx.out(static_cast<int>(o)).dtype)};
  }
  int64_t rows_per_block = m;
  if (blockable) {
    const int64_t target = std::max<int64_t>(256, (int64_t{1} << 20) / std::max<int64_t>(1, n * SizeOf(t)));
    const int64_t blocks = std::max<int64_t>(1, (m + target - 1) / target);
    rows_per_block = (m + blocks - 1) / blocks;
  }

  auto make_block = [&](int64_t rows) {
    Block blk;
    cpu::MatMulSpec s;
    s.type = t == DataType::kFloat16    ? cpu::DnnType::kF16
             : t == DataType::kBFloat16 ? cpu::DnnType::kBF16
                                        : cpu::DnnType::kF32;
    s.m = rows;
    s.k = k;
    s.n = n;
    s.accumulate = has_bias;  // block = bias rows + A B
    blk.mm = std::make_shared<cpu::DnnlMatMul>(s);
    std::vector<int64_t> domain = ydims;
    std::vector<std::vector<int64_t>> bd = e.dims;
    if (rows != m || blockable) {
      domain = {rows, n};
      bd[0] = domain;
      for (int i = 1; i < p.num_inputs; ++i)
        if (in_stride[i].advances)
          bd[i] = in_stride[i].step == n ? std::vector<int64_t>{rows, n} : std::vector<int64_t>{rows, 1};
    }
    try {
      blk.fk = std::make_shared<cpu::FusedKernel>(p, domain, bd, e.types, ThreadCount());
    } catch (const std::invalid_argument& err) {
      ctx.Fail(err.what());
    }
    return blk;
  };
  const Block main = make_block(rows_per_block);
  const int64_t rest = m % rows_per_block;
  const Block tail = rest ? make_block(rest) : main;

  const size_t ybytes = AlignUp64(static_cast<size_t>(rows_per_block * n) * SizeOf(t));
  const size_t mm_ws = AlignUp64(std::max(main.mm->workspace_bytes(), tail.mm->workspace_bytes()));
  const size_t fk_ws = AlignUp64(std::max(main.fk->workspace_bytes(), tail.fk->workspace_bytes()));
  const size_t elem = SizeOf(t);
  KernelInfo info;
  info.workspace_bytes = ybytes + mm_ws + fk_ws;
  info.heap_bytes = std::max(main.mm->heap_bytes(), tail.mm->heap_bytes());
  info.exclusive = true;
  info.fn = [=](const KernelIO& io) {
    OwnedScratch own(nullptr, std::free);
    uint8_t* ws = EpilogueScratch(io, ybytes + mm_ws + fk_ws, "MatMulEpilogue", own);
    uint8_t* ybuf = ws;
    void* mmws = mm_ws ? ws + ybytes : nullptr;
    void* fkws = fk_ws ? ws + ybytes + mm_ws : nullptr;
    const auto* a_ptr = static_cast<const uint8_t*>(io.in[0]);
    std::vector<const void*> ins;
    std::vector<void*> outs;
    for (int64_t r0 = 0; r0 < m; r0 += rows_per_block) {
      const int64_t rows = std::min(rows_per_block, m - r0);
      const Block& blk = rows == rows_per_block ? main : tail;
      if (has_bias) {
        DispatchDType(t, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (std::is_same_v<T, float> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
            cpu::FillScaledBroadcast2D<T>(static_cast<const T*>(io.in[2]), 0, 1, 1.0f, rows, n,
                                          reinterpret_cast<T*>(ybuf));
        });
      }
      blk.mm->Run(a_ptr + static_cast<size_t>(r0 * k) * elem, io.in[1], ybuf, mmws);
      BlockPointers(io, ybuf, in_stride, out_stride, r0, ins, outs);
      blk.fk->Run(ins.data(), outs.data(), fkws);
    }
  };
  return info;
}

}  // namespace

void RegisterMatMulEpilogueKernels(KernelRegistry& r) {
  r.Register("MatMulEpilogue", MatMulEpilogueKernel, kInternalDomain);
}

}  // namespace ot
