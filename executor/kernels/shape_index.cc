// CPU kernel factories of the shape family, part 2: Gather*, Scatter*, Shape, Size, Constant,
// ConstantOfShape, Range, Trilu, OneHot, EyeLike, TopK. Index inputs are validated on every call: an index out
// of range raises Error naming the node, never an out-of-bounds access.
#include <cstring>
#include <type_traits>

#include "cpu_ops/gather.h"
#include "cpu_ops/scatter.h"
#include "cpu_ops/shape_misc.h"
#include "cpu_ops/slice.h"
#include "executor/kernel_registry.h"
#include "executor/kernels/shape_internal.h"
#include "graph/infer_util.h"

namespace ot::shape_kernels {
namespace {

bool IsInt64(DataType t) { return t == DataType::kInt64; }

void RequireIndices(const KernelContext& ctx, int i) {
  const DataType t = ctx.in(i).dtype;
  if (t != DataType::kInt32 && t != DataType::kInt64) ctx.Fail("indices must be int32 or int64");
}

// Throws Error naming the node when the indices hold a value outside [-dim, dim).
template <typename I>
void CheckIndices(const std::string& who, const I* idx, int64_t n, int64_t dim) {
  int64_t bad = cpu::FindBadIndex(idx, n, dim);
  if (bad >= 0)
    throw Error(who + ": index " + std::to_string(static_cast<int64_t>(idx[bad])) + " at position " +
                std::to_string(bad) + " is out of range for a dim of size " + std::to_string(dim));
}

KernelInfo GatherKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  RequireIndices(ctx, 1);
  const std::vector<int64_t>& dd = ctx.in(0).dims;
  const int r = static_cast<int>(dd.size());
  const int axis = NormalizeAxis(ctx.node.attr_int("axis", 0), r, ctx.node.Describe());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= dd[d];
  for (int d = axis + 1; d < r; ++d) inner *= dd[d];
  const int64_t axis_dim = dd[axis], n = ctx.in(1).numel(), inner_bytes = inner * static_cast<int64_t>(esz);
  const bool i64 = IsInt64(ctx.in(1).dtype);
  const std::string who = ctx.node.Describe();
  return {[=](const KernelIO& io) {
    if (i64) {
      CheckIndices(who, io.In<int64_t>(1), n, axis_dim);
      cpu::Gather(io.in[0], io.In<int64_t>(1), n, io.out[0], outer, axis_dim, inner_bytes);
    } else {
      CheckIndices(who, io.In<int32_t>(1), n, axis_dim);
      cpu::Gather(io.in[0], io.In<int32_t>(1), n, io.out[0], outer, axis_dim, inner_bytes);
    }
  }};
}

KernelInfo GatherElementsKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  RequireIndices(ctx, 1);
  const std::vector<int64_t> dd = ctx.in(0).dims, id = ctx.in(1).dims;
  const int axis = NormalizeAxis(ctx.node.attr_int("axis", 0), static_cast<int>(dd.size()), ctx.node.Describe());
  const int64_t n = ctx.in(1).numel();
  const bool i64 = IsInt64(ctx.in(1).dtype);
  const std::string who = ctx.node.Describe();
  return {[=](const KernelIO& io) {
    if (i64) {
      CheckIndices(who, io.In<int64_t>(1), n, dd[axis]);
      cpu::GatherElements(io.in[0], dd, io.In<int64_t>(1), id, axis, io.out[0], esz);
    } else {
      CheckIndices(who, io.In<int32_t>(1), n, dd[axis]);
      cpu::GatherElements(io.in[0], dd, io.In<int32_t>(1), id, axis, io.out[0], esz);
    }
  }};
}

KernelInfo GatherNDKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  const std::vector<int64_t> dd = ctx.in(0).dims, id = ctx.in(1).dims;
  const int b = static_cast<int>(ctx.node.opset >= 12 ? ctx.node.attr_int("batch_dims", 0) : 0);
  const int64_t k = id.back();
  const std::vector<int64_t> index_dims(dd.begin() + b, dd.begin() + b + k);
  const int64_t tuples = k > 0 ? ctx.in(1).numel() / k : 0;
  const std::string who = ctx.node.Describe();
  return {[=](const KernelIO& io) {
    const int64_t* idx = io.In<int64_t>(1);
    int64_t bad = cpu::FindBadIndexND(idx, tuples, index_dims);
    if (bad >= 0)
      throw Error(who + ": index " + std::to_string(idx[bad]) + " at position " + std::to_string(bad) +
                  " is out of range");
    cpu::GatherND(io.in[0], dd, idx, id, b, io.out[0], esz);
  }};
}

cpu::ScatterReduction ParseReduction(const KernelContext& ctx) {
  const std::string red = ctx.node.attr_string("reduction", "none");
  if (red == "none") return cpu::ScatterReduction::kNone;
  if (red == "add") return cpu::ScatterReduction::kAdd;
  if (red == "mul") return cpu::ScatterReduction::kMul;
  if (red == "max") return cpu::ScatterReduction::kMax;
  if (red == "min") return cpu::ScatterReduction::kMin;
  ctx.Unsupported("reduction '" + red + "' is not supported");
}

KernelInfo ScatterElementsKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  ElemSize(ctx, t);
  RequireIndices(ctx, 1);
  const std::vector<int64_t> dd = ctx.in(0).dims, id = ctx.in(1).dims;
  if (ctx.in(2).dims != id) ctx.Fail("updates shape differs from indices shape");
  const int axis = NormalizeAxis(ctx.node.attr_int("axis", 0), static_cast<int>(dd.size()), ctx.node.Describe());
  const int64_t n = ctx.in(1).numel();
  const bool i64 = IsInt64(ctx.in(1).dtype);
  const cpu::ScatterReduction red = ParseReduction(ctx);
  const std::string who = ctx.node.Describe();
  return {[=](const KernelIO& io) {
    DispatchDType(t, [&](auto tag) {
      using T = decltype(tag);
      if (i64) {
        CheckIndices(who, io.In<int64_t>(1), n, dd[axis]);
        cpu::ScatterElements(io.In<T>(0), dd, io.In<int64_t>(1), io.In<T>(2), id, axis, red, io.Out<T>(0));
      } else {
        CheckIndices(who, io.In<int32_t>(1), n, dd[axis]);
        cpu::ScatterElements(io.In<T>(0), dd, io.In<int32_t>(1), io.In<T>(2), id, axis, red, io.Out<T>(0));
      }
    });
  }};
}

KernelInfo ScatterNDKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  ElemSize(ctx, t);
  const std::vector<int64_t> dd = ctx.in(0).dims, id = ctx.in(1).dims;
  const int64_t k = id.back();
  const std::vector<int64_t> index_dims(dd.begin(), dd.begin() + k);
  const int64_t tuples = k > 0 ? ctx.in(1).numel() / k : 0;
  const cpu::ScatterReduction red = ParseReduction(ctx);
  const std::string who = ctx.node.Describe();
  return {[=](const KernelIO& io) {
    const int64_t* idx = io.In<int64_t>(1);
    int64_t bad = cpu::FindBadIndexND(idx, tuples, index_dims);
    if (bad >= 0)
      throw Error(who + ": index " + std::to_string(idx[bad]) + " at position " + std::to_string(bad) +
                  " is out of range");
    DispatchDType(t, [&](auto tag) {
      using T = decltype(tag);
      cpu::ScatterND(io.In<T>(0), dd, idx, id, io.In<T>(2), red, io.Out<T>(0));
    });
  }};
}

// A kernel that writes fixed bytes (Shape, Size, Constant).
KernelInfo BytesKernel(std::vector<uint8_t> bytes) {
  return {[bytes = std::move(bytes)](const KernelIO& io) {
    if (!bytes.empty()) std::memcpy(io.out[0], bytes.data(), bytes.size());
  }};
}

template <typename T>
std::vector<uint8_t> AsBytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

KernelInfo ShapeKernel(const KernelContext& ctx) {
  const std::vector<int64_t>& d = ctx.in(0).dims;
  auto [s, e] = shape_ops::ShapeRange(ctx.node, static_cast<int>(d.size()));
  return BytesKernel(AsBytes(std::vector<int64_t>(d.begin() + s, d.begin() + e)));
}

KernelInfo ConstantKernel(const KernelContext& ctx) {
  Tensor v = shape_ops::ConstantValue(ctx.node);
  ElemSize(ctx, v.dtype());
  const auto* p = static_cast<const uint8_t*>(v.raw());
  return BytesKernel(std::vector<uint8_t>(p, p + v.nbytes()));
}

KernelInfo ConstantOfShapeKernel(const KernelContext& ctx) {
  const DataType t = ctx.out(0).dtype;
  const size_t esz = ElemSize(ctx, t);
  std::vector<uint8_t> value(esz, 0);
  if (const Attribute* a = ctx.node.attr("value")) std::memcpy(value.data(), a->t.raw(), esz);
  const int64_t n = ctx.out(0).numel();
  return {[=](const KernelIO& io) { cpu::FillElements(io.out[0], n, value.data(), esz); }};
}

KernelInfo RangeKernel(const KernelContext& ctx) {
  const DataType t = ctx.out(0).dtype;
  const int64_t n = ctx.out(0).numel();
  return {[=](const KernelIO& io) {
    DispatchDType(t, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int16_t> ||
                    std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, float16> ||
                    std::is_same_v<T, bfloat16>)
        cpu::Range<T>(io.In<T>(0)[0], io.In<T>(2)[0], n, io.Out<T>(0));
    });
  }};
}

KernelInfo TriluKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  const std::vector<int64_t>& d = ctx.in(0).dims;
  const int r = static_cast<int>(d.size());
  const int64_t rows = d[r - 2], cols = d[r - 1], batch = rows * cols != 0 ? ctx.in(0).numel() / (rows * cols) : 0;
  const bool upper = ctx.node.attr_int("upper", 1) != 0;
  const bool k_input = ctx.has_input(1);
  if (k_input && ctx.in(1).numel() != 1) ctx.Fail("k must hold one value");
  return {[=](const KernelIO& io) {
    const int64_t k = k_input ? io.In<int64_t>(1)[0] : 0;
    cpu::Trilu(io.in[0], io.out[0], batch, rows, cols, k, upper, esz);
  }};
}

KernelInfo OneHotKernel(const KernelContext& ctx) {
  const DataType it = ctx.in(0).dtype, vt = ctx.in(2).dtype;
  if (it == DataType::kBool) ctx.Unsupported("bool indices are not supported");
  const size_t esz = ElemSize(ctx, vt);
  ElemSize(ctx, it);
  const std::vector<int64_t>& id = ctx.in(0).dims;
  const int r = static_cast<int>(id.size()) + 1;
  int64_t axis = ctx.node.attr_int("axis", -1);
  if (axis < 0) axis += r;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= id[d];
  for (int d = static_cast<int>(axis); d < r - 1; ++d) inner *= id[d];
  const int64_t depth = ctx.out(0).dims[axis], n = ctx.in(0).numel();
  return {[=](const KernelIO& io) {
    std::vector<int64_t> idx(n);
    DispatchDType(it, [&](auto tag) {
      using T = decltype(tag);
      const T* p = io.In<T>(0);
      for (int64_t i = 0; i < n; ++i) idx[i] = static_cast<int64_t>(static_cast<double>(p[i]));
    });
    const auto* v = static_cast<const uint8_t*>(io.in[2]);
    cpu::OneHot(idx.data(), outer, inner, depth, v, v + esz, io.out[0], esz);
  }};
}

KernelInfo EyeLikeKernel(const KernelContext& ctx) {
  const DataType t = ctx.out(0).dtype;
  const size_t esz = ElemSize(ctx, t);
  Tensor one(t, {1});
  one.SetDouble(0, 1.0);
  std::vector<uint8_t> ob(static_cast<const uint8_t*>(one.raw()), static_cast<const uint8_t*>(one.raw()) + esz);
  const int64_t rows = ctx.out(0).dims[0], cols = ctx.out(0).dims[1], k = ctx.node.attr_int("k", 0);
  return {[=](const KernelIO& io) { cpu::EyeLike(io.out[0], rows, cols, k, ob.data(), esz); }};
}

KernelInfo TopKKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (t == DataType::kBool) ctx.Unsupported("bool input is not supported");
  ElemSize(ctx, t);
  const std::vector<int64_t>& d = ctx.in(0).dims;
  const int r = static_cast<int>(d.size());
  const int axis = NormalizeAxis(ctx.node.attr_int("axis", -1), r, ctx.node.Describe());
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= d[i];
  for (int i = axis + 1; i < r; ++i) inner *= d[i];
  const int64_t axis_dim = d[axis], k = ctx.out(0).dims[axis];
  const bool largest = ctx.node.opset < 11 || ctx.node.attr_int("largest", 1) != 0;
  const bool sorted = ctx.node.opset < 11 || ctx.node.attr_int("sorted", 1) != 0;
  const bool want_idx = ctx.has_output(1);
  return {[=](const KernelIO& io) {
    std::vector<int64_t> scratch(want_idx ? 0 : outer * k * inner);
    int64_t* idx = want_idx ? io.Out<int64_t>(1) : scratch.data();
    DispatchDType(t, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>)
        cpu::TopK<T>(io.In<T>(0), outer, axis_dim, inner, k, largest, sorted, io.Out<T>(0), idx);
    });
  }};
}

}  // namespace

void RegisterShapeIndexKernels(KernelRegistry& r) {
  r.Register("Gather", GatherKernel);
  r.Register("GatherElements", GatherElementsKernel);
  r.Register("GatherND", GatherNDKernel);
  r.Register("ScatterElements", ScatterElementsKernel);
  r.Register("Scatter", ScatterElementsKernel);
  r.Register("ScatterND", ScatterNDKernel);
  r.Register("Shape", ShapeKernel);
  r.Register("Size",
             [](const KernelContext& ctx) { return BytesKernel(AsBytes(std::vector<int64_t>{ctx.in(0).numel()})); });
  r.Register("Constant", ConstantKernel);
  r.Register("ConstantOfShape", ConstantOfShapeKernel);
  r.Register("Range", RangeKernel);
  r.Register("Trilu", TriluKernel);
  r.Register("OneHot", OneHotKernel);
  r.Register("EyeLike", EyeLikeKernel);
  r.Register("TopK", TopKKernel);
}

}  // namespace ot::shape_kernels
