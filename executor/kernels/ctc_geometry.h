// The geometry of an ai.onnxtrain.CTCLoss / CTCLossGrad node, read one way for both backends (executor/kernels/ctc.cc,
// executor/cuda/kernels_ctc.cc): layout, blank, zero_infinity, sizes, the reduction's name, and the labels' and
// lengths' dtypes and batch checked against the concrete operands (failing naming the node).
#pragma once
#include "cpu_ops/ctc.h"
#include "executor/kernel_registry.h"

namespace ot {

// `first`: the input index of the logits (the labels and the two lengths follow). `mean`: the reduction is mean
// (else sum).
cpu::CtcSpec CtcGeometry(const KernelContext& ctx, int first, bool* mean);

}  // namespace ot
