// Helpers shared by the shape family's CPU kernel factories (executor/kernels/shape*.cc).
#pragma once
#include <string>

#include "executor/kernel_registry.h"
#include "graph/ops/shape_util.h"

namespace ot::shape_kernels {

// Bytes per element of a dtype the kernels can move; UnsupportedError for strings and unknown dtypes.
inline size_t ElemSize(const KernelContext& ctx, DataType t) {
  size_t s = SizeOf(t);
  if (s == 0) ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported");
  return s;
}

// Input values known at plan time, as the graph/ops helpers read them.
inline shape_ops::ValueOf KernelValues(const KernelContext& ctx) {
  return [&ctx](int i) -> const Tensor* {
    return i < static_cast<int>(ctx.input_values.size()) && ctx.has_input(i) ? ctx.input_values[i] : nullptr;
  };
}

void RegisterShapeIndexKernels(KernelRegistry& r);

}  // namespace ot::shape_kernels
