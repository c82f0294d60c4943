// Registration of gradient rules, one file per op family.
#pragma once

namespace ot {
class OpRegistry;
void RegisterElementwiseGrads(OpRegistry& r);
void RegisterLinalgGrads(OpRegistry& r);
void RegisterShapeGrads(OpRegistry& r);
void RegisterReductionGrads(OpRegistry& r);
void RegisterNormGrads(OpRegistry& r);  // Softmax, LogSoftmax, losses, LayerNorm, BatchNorm (graph/grad/norm_grad.cc)
void RegisterConvGrads(OpRegistry& r);  // Conv, pooling (graph/grad/conv_grad.cc)
void RegisterDataGrads(OpRegistry& r);  // Gather, Concat, Split, Slice, Pad, Expand, Tile, Where, ... (data_grad.cc)
// Registered after RegisterDataGrads: RegisterIndexGrads' Slice rule (any steps) replaces data_grad.cc's.
void RegisterActivationGrads(OpRegistry& r);     // Abs, LeakyRelu, Clip, ..., Sum/Mean, ReduceMax/Min/L2/...
void RegisterIndexGrads(OpRegistry& r);          // Slice, Gather/ScatterElements, GatherND, TopK, CumSum, ...
void RegisterConvTransposeGrads(OpRegistry& r);  // ConvTranspose, GlobalMaxPool (conv_transpose_grad.cc)
void RegisterEinsumGrad(OpRegistry& r);          // graph/grad/einsum_grad.cc
void RegisterInstanceNormGrad(OpRegistry& r);    // Instance-, MeanVariance-, LpNormalization (instance_norm_grad.cc)
void RegisterRecurrentGrads(OpRegistry& r);      // RNN, GRU, LSTM (recurrent_grad.cc)
void RegisterCtcGrads(OpRegistry& r);            // ai.onnxtrain.CTCLoss (ctc_grad.cc)
void RegisterCollectiveGrads(OpRegistry& r);     // ai.onnxtrain.AllReduceSum (collective_grad.cc)
void RegisterOptimizerOps(OpRegistry& r);        // internal optimizer update ops (graph/ops/internal_optim.cc)
}  // namespace ot
