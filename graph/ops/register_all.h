// One registration function per op family (graph/ops/<family>.cc). Explicit calls, not static
// initialisers, so a static library never drops a family.
#pragma once

namespace ot {
class OpRegistry;
void RegisterElementwiseOps(OpRegistry& r);      // unary, binary, comparison, logical, variadic, Cast, Clip, Dropout...
void RegisterReductionOps(OpRegistry& r);        // Reduce*, ArgMax/ArgMin, CumSum
void RegisterNormOps(OpRegistry& r);             // BatchNorm, LayerNorm, InstanceNorm, Softmax, LogSoftmax, losses
void RegisterLinalgOps(OpRegistry& r);           // MatMul, Gemm, Conv, ConvTranspose, pooling, Einsum
void RegisterRecurrentOps(OpRegistry& r);        // RNN, GRU, LSTM (graph/ops/recurrent.cc)
void RegisterCtcOps(OpRegistry& r);              // ai.onnxtrain.CTCLoss (graph/ops/ctc.cc)
void RegisterCollectiveOps(OpRegistry& r);       // ai.onnxtrain.AllReduce (graph/ops/collective.cc)
void RegisterShapeOps(OpRegistry& r);            // Reshape ... OneHot: shape and data movement
void RegisterInternalOps(OpRegistry& r);         // ai.onnxtrain: ReduceToShape, ReluGrad, ... (backward helpers)
void RegisterFusedLinalgOps(OpRegistry& r);      // ai.onnxtrain.MatMulBias: schema, gradient, AMP (internal_fused.cc)
void RegisterTrainingPreviewOps(OpRegistry& r);  // ai.onnx.preview.training: Adagrad, Adam, Momentum, Gradient
void RegisterGradients(OpRegistry& r);           // gradient rules (graph/grad/*.cc), after every schema
void RegisterAmpClasses(OpRegistry& r);          // mixed-precision classes (graph/ops/amp_table.cc), after every schema
void RegisterFusedOps(OpRegistry& r);            // ai.onnxtrain.FusedElementwise (graph/ops/fused.cc)
void RegisterFusionFacts(OpRegistry& r);         // fusible kinds and cluster lowerings (graph/ops/fuse_table.cc)
void RegisterDimsValues(OpRegistry& r);  // data propagation of size computations (graph/ops/dims_value_table.cc)

inline void RegisterAllOps(OpRegistry& r) {
  RegisterElementwiseOps(r);
  RegisterReductionOps(r);
  RegisterNormOps(r);
  RegisterLinalgOps(r);
  RegisterRecurrentOps(r);
  RegisterCtcOps(r);
  RegisterCollectiveOps(r);
  RegisterShapeOps(r);
  RegisterInternalOps(r);
  RegisterFusedLinalgOps(r);
  RegisterTrainingPreviewOps(r);
  RegisterGradients(r);
  RegisterAmpClasses(r);
  RegisterFusedOps(r);
  RegisterFusionFacts(r);
  RegisterDimsValues(r);
}
}  // namespace ot
