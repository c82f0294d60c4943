// Pooling geometry from a node's attributes, shared by the forward pooling kernels (linalg_pool.cc) and their
// backward (internal_conv.cc), so both read kernel_shape/strides/dilations/pads/auto_pad/ceil_mode one way.
#pragma once
#include <vector>

#include "cpu_ops/pool.h"
#include "executor/kernel_registry.h"

namespace ot {

// x: the pooled input's dims [N, C, spatial...]; y: the pooled output's dims. `global` (Global*Pool): one
// window over all of the spatial dims. Fails (naming the node) when y disagrees with the attributes.
cpu::PoolSpec PoolGeometry(const KernelContext& ctx, cpu::PoolKind kind, const std::vector<int64_t>& x,
                           const std::vector<int64_t>& y, bool global);

}  // namespace ot
