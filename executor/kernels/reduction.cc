// CPU kernel factories of the reduction family: Reduce*, ArgMax/ArgMin, CumSum.
#include <cstring>
#include <map>

#include "cpu_ops/reduce.h"
#include "executor/kernel_registry.h"
#include "graph/infer_util.h"

namespace ot {

namespace {

using cpu::ReduceKind;

const std::map<std::string, ReduceKind>& ReduceKinds() {
  static const std::map<std::string, ReduceKind> m = {{"ReduceSum", ReduceKind::kSum},
                                                      {"ReduceMean", ReduceKind::kMean},
                                                      {"ReduceMax", ReduceKind::kMax},
                                                      {"ReduceMin", ReduceKind::kMin},
                                                      {"ReduceProd", ReduceKind::kProd},
                                                      {"ReduceL1", ReduceKind::kL1},
                                                      {"ReduceL2", ReduceKind::kL2},
                                                      {"ReduceLogSum", ReduceKind::kLogSum},
                                                      {"ReduceLogSumExp", ReduceKind::kLogSumExp},
                                                      {"ReduceSumSquare", ReduceKind::kSumSquare}};
  return m;
}

// Calls f(T{}) for the dtypes the reduction kernels are instantiated for; false for any other dtype.
template <typename F>
bool DispatchReduce(DataType t, F&& f) {
  switch (t) {
    case DataType::kFloat32:
      f(float{});
      return true;
    case DataType::kFloat64:
      f(double{});
      return true;
    case DataType::kFloat16:
      f(float16{});
      return true;
    case DataType::kBFloat16:
      f(bfloat16{});
      return true;
    case DataType::kInt32:
      f(int32_t{});
      return true;
    case DataType::kInt64:
      f(int64_t{});
      return true;
    case DataType::kInt8:
      f(int8_t{});
      return true;
    case DataType::kUint8:
      f(uint8_t{});
      return true;
    case DataType::kUint32:
      f(uint32_t{});
      return true;
    case DataType::kUint64:
      f(uint64_t{});
      return true;
    default:
      return false;
  }
}

void RequireReduceType(const KernelContext& ctx, DataType t) {
  if (!DispatchReduce(t, [](auto) {})) ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported");
}

KernelInfo MakeReduce(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const ReduceKind kind = ReduceKinds().at(n.op_type);
  const DataType dt = ctx.in(0).dtype;
  const std::vector<int64_t> dims = ctx.in(0).dims;
  const int rank = static_cast<int>(dims.size());
  const bool from_input = n.op_type == "ReduceSum" ? n.opset >= 13 : n.opset >= 18;
  std::vector<int64_t> axes;
  if (from_input) {
    if (ctx.has_input(1)) {
      if (!ctx.input_values[1]) ctx.Fail("axes must be known when the plan is made");
      axes = ctx.input_values[1]->ToInt64Vector();
    }
  } else {
    axes = n.attr_ints("axes");
  }
  const bool noop = n.attr_int("noop_with_empty_axes", 0) != 0;
  RequireReduceType(ctx, dt);
  if (axes.empty() && noop) {
    const size_t bytes = ctx.in(0).nbytes();
    return {[bytes](const KernelIO& io) {
      if (bytes) std::memcpy(io.out[0], io.in[0], bytes);
    }};
  }
  std::vector<bool> red(rank, axes.empty());
  for (int64_t a : axes) red[NormalizeAxis(a, rank, n.Describe())] = true;
  const cpu::ReduceGeometry g = cpu::MakeReduceGeometry(dims, red);
  return {[=](const KernelIO& io) {
    DispatchReduce(dt, [&](auto tag) {
      using T = decltype(tag);
      cpu::Reduce<T>(kind, g, io.In<T>(0), io.Out<T>(0));
    });
  }};
}

// [outer, n, inner] around one axis.
void SplitAt(const std::vector<int64_t>& dims, int axis, int64_t& outer, int64_t& n, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int d = 0; d < axis; ++d) outer *= dims[d];
  n = dims[axis];
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
}

KernelInfo MakeArg(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const bool is_max = n.op_type == "ArgMax";
  const DataType dt = ctx.in(0).dtype;
  const auto& dims = ctx.in(0).dims;
  const int axis = NormalizeAxis(n.attr_int("axis", 0), static_cast<int>(dims.size()), n.Describe());
  const bool last = n.attr_int("select_last_index", 0) != 0;
  int64_t outer, len, inner;
  SplitAt(dims, axis, outer, len, inner);
  if (len == 0) ctx.Fail("cannot take the arg max/min over an empty axis");
  RequireReduceType(ctx, dt);
  return {[=](const KernelIO& io) {
    DispatchReduce(dt, [&](auto tag) {
      using T = decltype(tag);
      cpu::ArgReduce<T>(is_max, last, outer, len, inner, io.In<T>(0), io.Out<int64_t>(0));
    });
  }};
}

KernelInfo MakeCumSum(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const DataType dt = ctx.in(0).dtype;
  const DataType at = ctx.in(1).dtype;
  const std::vector<int64_t> dims = ctx.in(0).dims;
  const bool exclusive = n.attr_int("exclusive", 0) != 0;
  const bool reverse = n.attr_int("reverse", 0) != 0;
  if (ctx.in(1).numel() != 1) ctx.Fail("axis must hold one value");
  if (at != DataType::kInt32 && at != DataType::kInt64) ctx.Fail("axis must be int32 or int64");
  RequireReduceType(ctx, dt);
  const std::string what = n.Describe();
  if (dims.empty()) {  // a scalar: the sum of one element (or 0 when exclusive)
    return {[=](const KernelIO& io) {
      DispatchReduce(dt, [&](auto tag) {
        using T = decltype(tag);
        cpu::CumSum<T>(exclusive, reverse, 1, 1, 1, io.In<T>(0), io.Out<T>(0));
      });
    }};
  }
  // The axis is read from its buffer each run (it does not change shapes, so the plan need not know it).
  return {[=](const KernelIO& io) {
    const int64_t a = at == DataType::kInt32 ? *io.In<int32_t>(1) : *io.In<int64_t>(1);
    const int axis = NormalizeAxis(a, static_cast<int>(dims.size()), what);
    int64_t outer, len, inner;
    SplitAt(dims, axis, outer, len, inner);
    DispatchReduce(dt, [&](auto tag) {
      using T = decltype(tag);
      cpu::CumSum<T>(exclusive, reverse, outer, len, inner, io.In<T>(0), io.Out<T>(0));
    });
  }};
}

}  // namespace

void RegisterReductionKernels(KernelRegistry& r) {
  for (const auto& [op, kind] : ReduceKinds()) r.Register(op, MakeReduce);
  r.Register("ArgMax", MakeArg);
  r.Register("ArgMin", MakeArg);
  r.Register("CumSum", MakeCumSum);
}

}  // namespace ot
