// Data movement on the GPU (cuda_ops/data_kernels.h and strided copies): Transpose, Gather and its gradient
// (GatherGrad along axis 0, deterministic), Split and Concat (one 2-D strided copy per part), Expand and Tile
// (cuda_ops/strided_copy.h: broadcast / repeat as strided reads with stride 0; any dtype of 1, 2, 4 or 8 bytes, moved
// as bits). Expand's gradient is a ReduceSum-to-shape, and GlobalAveragePool's and the Reduce* gradients use Expand.
#include <cuda_runtime.h>

#include <memory>
#include <numeric>
#include <stdexcept>

#include "cuda_ops/data_kernels.h"
#include "cuda_ops/strided_copy.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/device_flag.h"
#include "graph/graph.h"
#include "graph/infer_util.h"

namespace ot {
namespace {

size_t ElemSize(const KernelContext& ctx, DataType t) {
  const size_t e = SizeOf(t);
  if (e != 1 && e != 2 && e != 4 && e != 8) ctx.Unsupported("elements of " + DataTypeName(t) + " on the GPU");
  return e;
}

KernelInfo TransposeKernel(const KernelContext& ctx) {
  const auto& dims = ctx.in(0).dims;
  std::vector<int64_t> perm = ctx.node.attr_ints("perm");
  if (perm.empty()) {
    perm.resize(dims.size());
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  try {
    cuda::SimplifyTranspose(dims, perm);
  } catch (const std::invalid_argument& e) {
    ctx.Fail(e.what());
  }
  const std::string what = ctx.node.Describe();
  return KernelInfo{[=](const KernelIO& io) {
    RunLauncher(what, [&] { cuda::Transpose(io.in[0], io.out[0], esz, dims, perm, io.stream); });
  }};
}

cuda::IndexType IndexTypeOf(const KernelContext& ctx, int i) {
  const DataType t = ctx.in(i).dtype;
  if (t == DataType::kInt64) return cuda::IndexType::kI64;
  if (t == DataType::kInt32) return cuda::IndexType::kI32;
  ctx.Unsupported("indices of " + DataTypeName(t));
}

KernelInfo GatherKernel(const KernelContext& ctx) {
  const auto& dims = ctx.in(0).dims;
  const int axis = NormalizeAxis(ctx.node.attr_int("axis", 0), static_cast<int>(dims.size()), ctx.node.Describe());
  const int64_t outer = DimsProduct(dims, 0, axis), axis_dim = dims[axis],
                inner = DimsProduct(dims, axis + 1, dims.size());
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  const cuda::IndexType it = IndexTypeOf(ctx, 1);
  const int64_t num = ctx.in(1).numel();
  auto flag = std::make_shared<DeviceFlag>();
  const std::string what = ctx.node.Describe();
  KernelInfo info{[=](const KernelIO& io) {
    RunLauncher(what, [&] {
      cuda::Gather(io.in[0], outer, axis_dim, inner, esz, it, io.in[1], num, io.out[0], flag->dev, io.stream);
    });
    flag->CopyBack(io.stream);
  }};
  info.after_run = FlagCheck(flag, what + ": an index is out of range");
  return info;
}

// GatherGrad(dY, indices, shape(X)) {axis} -> dX
KernelInfo GatherGradKernel(const KernelContext& ctx) {
  const auto& x = ctx.out(0).dims;
  const int axis = NormalizeAxis(ctx.node.attr_int("axis", 0), static_cast<int>(x.size()), ctx.node.Describe());
  // Along an inner axis: one axis-0 gradient per outer index (dY [outer, num, inner] into dX [outer, V, inner]).
  const int64_t outer = DimsProduct(x, 0, axis), vocab = x[axis], dim = DimsProduct(x, axis + 1, x.size()),
                num = ctx.in(1).numel();
  const size_t dy_step = static_cast<size_t>(num * dim) * SizeOf(ctx.in(0).dtype),
               dx_step = static_cast<size_t>(vocab * dim) * SizeOf(ctx.out(0).dtype);
  const cuda::FloatType dyt = DeviceFloatType(ctx, ctx.in(0).dtype, "GatherGrad"),
                        dxt = DeviceFloatType(ctx, ctx.out(0).dtype, "GatherGrad");
  const cuda::IndexType it = IndexTypeOf(ctx, 1);
  if (ctx.in(0).numel() != outer * num * dim) ctx.Fail("dY does not match the indices and X's shape");
  size_t ws = 0;
  try {
    ws = cuda::GatherGradWorkspaceBytes(num, vocab);
  } catch (const std::exception& e) {
    ctx.Fail(e.what());
  }
  auto flag = std::make_shared<DeviceFlag>();
  const std::string what = ctx.node.Describe();
  KernelInfo info{[=](const KernelIO& io) {
    RunLauncher(what, [&] {
      for (int64_t o = 0; o < outer; ++o)
        cuda::GatherGrad(dyt, static_cast<const uint8_t*>(io.in[0]) + o * dy_step, it, io.in[1], num, vocab, dim, dxt,
                         static_cast<uint8_t*>(io.out[0]) + o * dx_step, flag->dev, io.workspace, ws, io.stream);
    });
    flag->CopyBack(io.stream);
  }};
  info.workspace_bytes = ws;
  info.after_run = FlagCheck(flag, what + ": an index is out of range");
  return info;
}

// Copies `rows` rows of `width` bytes between buffers whose rows are `dpitch` / `spitch` bytes apart.
void Copy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows, void* stream) {
  if (!width || !rows) return;
  CudaCheck(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice,
                              static_cast<cudaStream_t>(stream)),
            "strided copy");
}

KernelInfo SplitKernel(const KernelContext& ctx) {
  const auto& dims = ctx.in(0).dims;
  const int axis = NormalizeAxis(ctx.node.attr_int("axis", 0), static_cast<int>(dims.size()), ctx.node.Describe());
  const size_t esz = SizeOf(ctx.in(0).dtype);
  const int64_t outer = DimsProduct(dims, 0, axis), inner = DimsProduct(dims, axis + 1, dims.size());
  std::vector<int64_t> parts;
  for (size_t o = 0; o < ctx.outputs.size(); ++o)
    parts.push_back(ctx.has_output(static_cast<int>(o)) ? ctx.out(static_cast<int>(o)).dims[axis] : -1);
  int64_t total = 0;
  for (int64_t p : parts) total += std::max<int64_t>(p, 0);
  if (total != dims[axis]) ctx.Unsupported("a Split whose absent outputs leave a part of unknown size");
  return KernelInfo{[=](const KernelIO& io) {
    int64_t at = 0;
    for (size_t o = 0; o < parts.size(); ++o) {
      if (parts[o] < 0) continue;
      Copy2D(io.out[o], static_cast<size_t>(parts[o] * inner) * esz,
             static_cast<const uint8_t*>(io.in[0]) + static_cast<size_t>(at * inner) * esz,
             static_cast<size_t>(dims[axis] * inner) * esz, static_cast<size_t>(parts[o] * inner) * esz,
             static_cast<size_t>(outer), io.stream);
      at += parts[o];
    }
  }};
}

KernelInfo ConcatKernel(const KernelContext& ctx) {
  const auto& dims = ctx.out(0).dims;
  const int axis = NormalizeAxis(ctx.node.attr_int("axis", 0), static_cast<int>(dims.size()), ctx.node.Describe());
  const size_t esz = SizeOf(ctx.out(0).dtype);
  const int64_t outer = DimsProduct(dims, 0, axis), inner = DimsProduct(dims, axis + 1, dims.size());
  std::vector<int64_t> parts;
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    parts.push_back(ctx.has_input(static_cast<int>(i)) ? ctx.in(static_cast<int>(i)).dims[axis] : 0);
  return KernelInfo{[=](const KernelIO& io) {
    int64_t at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!parts[i]) continue;
      Copy2D(static_cast<uint8_t*>(io.out[0]) + static_cast<size_t>(at * inner) * esz,
             static_cast<size_t>(dims[axis] * inner) * esz, io.in[i], static_cast<size_t>(parts[i] * inner) * esz,
             static_cast<size_t>(parts[i] * inner) * esz, static_cast<size_t>(outer), io.stream);
      at += parts[i];
    }
  }};
}

// Expand(X, shape) -> Y. Y's dims (the plan's) are already broadcast(X, shape), so shape's values are not needed
// here. Same element count (a broadcast that only adds leading 1s, or none): Y holds X's bytes, a view or one copy.
KernelInfo ExpandKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  if (ctx.out(0).dtype != ctx.in(0).dtype) ctx.Fail("Y's dtype differs from X's");
  const std::vector<int64_t> id = ctx.in(0).dims, od = ctx.out(0).dims;
  try {
    cuda::ExpandStrides(id, od);
  } catch (const std::invalid_argument& e) {
    ctx.Fail(e.what());
  }
  if (ctx.out(0).numel() == 0) return MakeInfo([](const KernelIO&) {});
  if (ctx.out(0).numel() == ctx.in(0).numel()) return DeviceCopyKernel(ctx);
  const std::string what = ctx.node.Describe();
  return MakeInfo([=](const KernelIO& io) {
    RunLauncher(what, [&] { cuda::Expand(io.in[0], id, io.out[0], od, esz, io.stream); });
  });
}

// Tile(X, repeats) -> Y; repeats must be known when the plan is made (a constant or folded shape arithmetic).
KernelInfo TileKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  if (ctx.out(0).dtype != ctx.in(0).dtype) ctx.Fail("Y's dtype differs from X's");
  const std::vector<int64_t> id = ctx.in(0).dims;
  if (ctx.input_values.size() < 2 || !ctx.input_values[1])
    ctx.Unsupported("Tile with repeats unknown when the plan is made");
  const std::vector<int64_t> reps = ctx.input_values[1]->ToInt64Vector();
  if (reps.size() != id.size()) ctx.Fail("repeats length differs from the input rank");
  for (size_t k = 0; k < id.size(); ++k)
    if (reps[k] < 0 || id[k] * reps[k] != ctx.out(0).dims[k]) ctx.Fail("Y's dims are not X's times repeats");
  if (id.size() > 8) ctx.Unsupported("Tile of rank " + std::to_string(id.size()) + " on the GPU (up to 8)");
  if (ctx.out(0).numel() == 0) return MakeInfo([](const KernelIO&) {});
  // Y non-empty and as large as X: every repeat is 1, a copy.
  if (ctx.out(0).numel() == ctx.in(0).numel()) return DeviceCopyKernel(ctx);
  const std::string what = ctx.node.Describe();
  return MakeInfo([=](const KernelIO& io) {
    RunLauncher(what, [&] { cuda::Tile(io.in[0], id, reps, io.out[0], esz, io.stream); });
  });
}

}  // namespace

void RegisterCudaDataKernels(KernelRegistry& r) {
  r.Register("Transpose", TransposeKernel);
  r.Register("Gather", GatherKernel);
  r.Register("GatherGrad", GatherGradKernel, kInternalDomain);
  r.Register("Split", SplitKernel);
  r.Register("Concat", ConcatKernel);
  r.Register("Expand", ExpandKernel);
  r.Register("Tile", TileKernel);
}

}  // namespace ot
