// The geometry of an RNN, GRU or LSTM node and of its ai.onnxtrain.RecurrentGrad, read one way for both backends
// (executor/kernels/recurrent.cc, executor/cuda/kernels_recurrent.cc): cell, directions, layout, clip, input_forget,
// linear_before_reset, sizes, and every operand's dims checked against the concrete ones (failing naming the node and
// the operand).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cpu_ops/rnn.h"
#include "executor/kernel_registry.h"

namespace ot {

// The states' dims: [dirs, batch, hidden] (layout 0) or [batch, dirs, hidden] (layout 1).
std::vector<int64_t> RecurrentStateDims(const cpu::RnnSpec& s);

// A forward node or the first 8 inputs of a RecurrentGrad: `cell` LSTM, GRU or RNN; `batch_major`: layout 1.
cpu::RnnSpec RecurrentGeometry(const KernelContext& ctx, const std::string& cell, bool batch_major);

// A RecurrentGrad node: its cell and layout attributes, the forward's operands and dY, dY_h, dY_c (inputs 8-10).
cpu::RnnSpec RecurrentGradGeometry(const KernelContext& ctx);

}  // namespace ot
