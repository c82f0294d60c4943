// CPU kernel of ai.onnxtrain.ConvEpilogue(X [N, C_in, s...], W, B (optional), operands...) {Conv's attributes,
// program, row_keepdims} (graph/ops/fused.cc; made by passes/fuse_epilogue.cc under --fuse=full).
// Y = Conv(X, W, B) in blocks of images: each block's convolution (oneDNN, cpu::DnnlConv made for that many
// images) fills a cache-sized block buffer -- the kernel's workspace -- and the cluster program
// (cpu_ops/fused_elementwise.h) runs over that block right away, reading the buffer as its input 0, so Y reaches
// memory only where the program stores it (a ReLU after a convolution: Y is written once, as the ReLU's output).
// Blocks: about 1 MiB of Y per oneDNN thread (an L2 cache each), at least one image. A program operand is either the
// same for every image (no batch axis, or a batch axis of 1: a per-channel bias [C, 1, 1], a scalar) or advances with
// the images (a batch axis of N: a residual of Y's shape, one value per row); any other operand, or a program reducing
// more than the last axis, runs as one block. Each image's convolution is independent of the others, so the blocks
// compute what the whole would, up to the order in which oneDNN's kernel for a smaller batch adds an output's C_in x k
// products (its blocking may differ in the last bits).
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "cpu_ops/conv.h"
#include "cpu_ops/dnnl_util.h"
#include "cpu_ops/fused_elementwise.h"
#include "executor/kernel_registry.h"
#include "executor/kernels/conv_geometry.h"
#include "executor/kernels/epilogue_blocks.h"
#include "executor/threads.h"
#include "graph/graph.h"
#include "graph/infer_util.h"
#include "graph/tensor.h"
#include "kernel_common/cluster_program.h"

namespace ot {

void RegisterConvEpilogueKernels(KernelRegistry& r);

namespace {

// One block size: its convolution and its program.
struct Block {
  std::shared_ptr<cpu::DnnlConv> conv;
  std::shared_ptr<cpu::FusedKernel> fk;
};

KernelInfo ConvEpilogueKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  const bool has_bias = ctx.has_input(2);
  if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
    ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported (float32, float16, bfloat16)");
  for (int i = 1; i < (has_bias ? 3 : 2); ++i)
    if (ctx.in(i).dtype != t)
      ctx.Fail("input " + std::to_string(i) + " (" + DataTypeName(ctx.in(i).dtype) + ") and X (" + DataTypeName(t) +
               ") differ in dtype");
  cpu::ConvSpec spec = BuildConvSpec(ctx, 0, 1, 2, /*y_from_geometry=*/true);
  spec.type = t == DataType::kFloat16    ? cpu::DnnType::kF16
              : t == DataType::kBFloat16 ? cpu::DnnType::kBF16
                                         : cpu::DnnType::kF32;
  std::vector<int64_t> ydims{spec.n, spec.c_out};
  ydims.insert(ydims.end(), spec.out_spatial.begin(), spec.out_spatial.end());
  const int64_t n = spec.n, rank = static_cast<int64_t>(ydims.size());
  const int64_t y_image = n ? NumElements(ydims) / n : 0;
  const int64_t x_image = n ? NumElements(ctx.in(0).dims) / n : 0;
  const EpilogueProgram e = ReadEpilogueProgram(ctx, ydims, t);
  const cluster::Program& p = e.p;

  // Blocking by images: every operand must be the same for every image or advance with them.
  const int64_t row_len = p.reduce_axes == 1 && rank > 0 ? ydims.back() : 1;
  bool blockable = p.reduce_axes <= 1 && n > 1;
  std::vector<BlockStride> in_stride(p.num_inputs), out_stride(p.outputs.size());
  for (int i = 1; i < p.num_inputs && blockable; ++i) {
    const auto& d = e.dims[i];
    const int64_t numel = NumElements(d);
    in_stride[i].elem_size = SizeOf(ctx.in(i + 2).dtype);
    if (e.is_row[i] && !e.is_full[i]) {
      // One value per row of Y (rows of row_len along the last axis), or one in all.
      if (numel == 1) continue;
      if (numel == NumElements(ydims) / row_len)
        in_stride[i] = {true, y_image / row_len, in_stride[i].elem_size};
      else
        blockable = false;
    } else if (e.is_row[i]) {
      blockable = false;
    } else if (static_cast<int64_t>(d.size()) < rank || d[0] == 1) {
      continue;  // no batch axis (right-aligned broadcast) or a batch axis of 1
    } else if (static_cast<int64_t>(d.size()) == rank && d[0] == n) {
      in_stride[i] = {true, numel / n, in_stride[i].elem_size};
    } else {
      blockable = false;
    }
  }
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    const bool row = p.code[static_cast<size_t>(p.outputs[o])].row;
    out_stride[o] = {true, row ? y_image / row_len : y_image, SizeOf(ctx.out(static_cast<int>(o)).dtype)};
  }
  const size_t elem = SizeOf(t);
  int64_t images_per_block = std::max<int64_t>(n, 1);
  if (blockable) {
    // About 1 MiB of Y per oneDNN thread (an L2 each), as cpu::DnnlConv's own blocks.
    const int64_t block_bytes = (int64_t{1} << 20) * cpu::OmpThreads();
    const int64_t image_bytes = std::max<int64_t>(1, y_image * static_cast<int64_t>(elem));
    const int64_t target = std::max<int64_t>(1, block_bytes / image_bytes);
    const int64_t blocks = std::max<int64_t>(1, (n + target - 1) / target);
    images_per_block = (n + blocks - 1) / blocks;
  }

  // W known for the plan's lifetime (an initializer): each block's primitive keeps it in its own layout.
  const Tensor* w_const = ctx.input_values.size() > 1 ? ctx.input_values[1] : nullptr;
  auto make_block = [&](int64_t images) {
    Block blk;
    cpu::ConvSpec s = spec;
    s.n = images;
    blk.conv = std::make_shared<cpu::DnnlConv>(s, w_const ? w_const->raw() : nullptr);
    std::vector<int64_t> domain = ydims;
    std::vector<std::vector<int64_t>> bd = e.dims;
    if (images != n) {
      domain[0] = images;
      bd[0] = domain;
      for (int i = 1; i < p.num_inputs; ++i) {
        if (!in_stride[i].advances) continue;
        if (e.is_row[i])
          bd[i] = {images * (y_image / row_len)};
        else
          bd[i][0] = images;
      }
    }
    try {
      blk.fk = std::make_shared<cpu::FusedKernel>(p, domain, bd, e.types, ThreadCount());
    } catch (const std::invalid_argument& err) {
      ctx.Fail(err.what());
    }
    return blk;
  };
  const Block main = make_block(images_per_block);
  const int64_t rest = n % images_per_block;
  const Block tail = rest ? make_block(rest) : main;

  const size_t ybytes = AlignUp64(static_cast<size_t>(images_per_block * y_image) * elem);
  const size_t fk_ws = AlignUp64(std::max(main.fk->workspace_bytes(), tail.fk->workspace_bytes()));
  KernelInfo info;
  info.workspace_bytes = ybytes + fk_ws;
  info.heap_bytes = cpu::DnnlCallHeapBytes(5);
  info.exclusive = true;
  info.fn = [=](const KernelIO& io) {
    OwnedScratch own(nullptr, std::free);
    uint8_t* ybuf = EpilogueScratch(io, ybytes + fk_ws, "ConvEpilogue", own);
    void* fkws = fk_ws ? ybuf + ybytes : nullptr;
    const auto* x_ptr = static_cast<const uint8_t*>(io.in[0]);
    std::vector<const void*> ins;
    std::vector<void*> outs;
    for (int64_t i0 = 0; i0 < n; i0 += images_per_block) {
      const int64_t images = std::min(images_per_block, n - i0);
      const Block& blk = images == images_per_block ? main : tail;
      blk.conv->Run(x_ptr + static_cast<size_t>(i0 * x_image) * elem, io.in[1], has_bias ? io.in[2] : nullptr, ybuf);
      BlockPointers(io, ybuf, in_stride, out_stride, i0, ins, outs);
      blk.fk->Run(ins.data(), outs.data(), fkws);
    }
  };
  return info;
}

}  // namespace

void RegisterConvEpilogueKernels(KernelRegistry& r) { r.Register("ConvEpilogue", ConvEpilogueKernel, kInternalDomain); }

}  // namespace ot
