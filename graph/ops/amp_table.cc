// The mixed-precision class of every op, as a table (TensorFlow's AutoMixedPrecision lists and PyTorch
// autocast's, adapted to ONNX ops and our internal backward ops). Why each list:
//   allow  -- GEMM and convolution, forward and backward: tensor-core/bf16 work with fp32 accumulation inside,
//             the whole speed-up of mixed precision;
//   infer  -- element-wise arithmetic, activations, pooling, norms and softmax: cheap, memory-bound, safe in half
//             when their inputs already are (our kernels compute them in fp32 and round once when storing);
//   deny   -- ops whose result leaves the half range or loses too much precision: Exp, Log, Pow, the
//             reductions (a sum of many halves), losses, the optimizer, the trigonometric family;
//   clear  -- data movement and comparisons: exact in any precision.
// Ops not listed keep AmpClass::kUnset: fixed output types (Cast, ConstantOfShape, RandomNormal...), integer and
// quantized ops. The amp pass (passes/amp.cc) reads only this table.
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {

void RegisterAmpClasses(OpRegistry& r) {
  auto set = [&](std::initializer_list<const char*> ops, AmpClass c, const std::string& domain = "") {
    for (const char* op : ops) r.SetAmp(domain, op, c);
  };
  set({"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum"}, AmpClass::kAllow);
  set({"ConvGradData", "ConvGradWeight"}, AmpClass::kAllow, kInternalDomain);
  // Recurrent layers store their operands and outputs in half; their kernels compute in fp32 inside (GEMMs, gates,
  // cell state), as cuDNN's half RNNs do.
  set({"RNN", "GRU", "LSTM"}, AmpClass::kAllow);
  set({"RecurrentGrad"}, AmpClass::kAllow, kInternalDomain);

  set({"Add",
       "Sub",
       "Mul",
       "Div",
       "Neg",
       "Abs",
       "Sum",
       "Max",
       "Min",
       "Mean",
       "Where",
       "Relu",
       "LeakyRelu",
       "PRelu",
       "Elu",
       "Selu",
       "Celu",
       "Sigmoid",
       "HardSigmoid",
       "HardSwish",
       "Tanh",
       "Softplus",
       "Softsign",
       "Mish",
       "Gelu",
       "Erf",
       "Clip",
       "Sqrt",
       "Reciprocal",
       "Floor",
       "Ceil",
       "Round",
       "Sign",
       "Dropout",
       "MaxPool",
       "AveragePool",
       "GlobalAveragePool",
       "GlobalMaxPool",
       "InstanceNormalization"},
      AmpClass::kInfer);
  // Softmax and LogSoftmax take the max and the sum in fp32 inside; stored in half.
  r.SetAmp("", "Softmax", AmpClass::kInfer, {}, {}, false, true);
  r.SetAmp("", "LogSoftmax", AmpClass::kInfer, {}, {}, false, true);
  // BatchNormalization in half: X and Y half; scale, bias and the running statistics (inputs 1-4, training-mode
  // outputs 1-2) stay fp32, as ONNX's separate type parameters T1/T2 allow and cuDNN requires.
  r.SetAmp("", "BatchNormalization", AmpClass::kInfer, {1, 2, 3, 4}, {1, 2}, false, true);
  // LayerNormalization: X, Scale, B and Y share ONNX's T (half); the saved mean and inverse std (U) stay fp32.
  r.SetAmp("", "LayerNormalization", AmpClass::kInfer, {}, {1, 2}, false, true);
  r.SetAmp(kInternalDomain, "BatchNormGrad", AmpClass::kInfer, {2, 3, 4}, {1, 2}, false, true);
  r.SetAmp(kInternalDomain, "LayerNormGrad", AmpClass::kInfer, {}, {}, false, true);
  r.SetAmp(kInternalDomain, "LayerNormalization", AmpClass::kInfer, {}, {1, 2}, false, true);  // fused, old opsets
  set({"ReluGrad", "MaxPoolGrad", "AveragePoolGrad", "SoftmaxGrad", "ReduceToShape", "GeluGrad", "Gelu"},
      AmpClass::kInfer, kInternalDomain);

  set({"Exp",
       "Log",
       "Pow",
       "ReduceSum",
       "ReduceMean",
       "ReduceMax",
       "ReduceMin",
       "ReduceProd",
       "ReduceL1",
       "ReduceL2",
       "ReduceLogSum",
       "ReduceLogSumExp",
       "ReduceSumSquare",
       "CumSum",
       "LpNormalization",
       "LpPool",
       "GlobalLpPool",
       "MeanVarianceNormalization",
       "Hardmax",
       "Sin",
       "Cos",
       "Tan",
       "Asin",
       "Acos",
       "Atan",
       "Sinh",
       "Cosh",
       "Asinh",
       "Acosh",
       "Atanh",
       "Shrink",
       "ThresholdedRelu",
       "Mod"},
      AmpClass::kDeny);
  r.SetAmp("", "SoftmaxCrossEntropyLoss", AmpClass::kDeny, {}, {}, true);
  r.SetAmp("", "NegativeLogLikelihoodLoss", AmpClass::kDeny, {}, {}, true);
  r.SetAmp(kInternalDomain, "LossGrad", AmpClass::kDeny, {}, {}, true);
  r.SetAmp(kInternalDomain, "CTCLoss", AmpClass::kDeny, {}, {}, true);
  r.SetAmp(kInternalDomain, "CTCLossGrad", AmpClass::kDeny);
  // The data-parallel gradient mean: float32 buckets, the gradients the update reads (passes/data_parallel.h).
  r.SetAmp(kInternalDomain, "AllReduceStart", AmpClass::kDeny);
  r.SetAmp(kInternalDomain, "AllReduceWait", AmpClass::kDeny);
  r.SetAmp(kInternalDomain, "AllReduceSum", AmpClass::kDeny);
  set({"GatherGrad", "OptimizerUpdate"}, AmpClass::kDeny, kInternalDomain);
  set({"Adagrad", "Adam", "Momentum"}, AmpClass::kDeny, "ai.onnx.preview.training");

  set({"Reshape",         "Transpose", "Flatten", "Squeeze",        "Unsqueeze",      "Concat",
       "Split",           "Slice",     "Gather",  "GatherElements", "GatherND",       "Expand",
       "Identity",        "Tile",      "Pad",     "DepthToSpace",   "SpaceToDepth",   "ScatterND",
       "ScatterElements", "Scatter",   "Trilu",   "TopK",           "ArgMax",         "ArgMin",
       "Equal",           "Less",      "Greater", "LessOrEqual",    "GreaterOrEqual", "IsNaN",
       "IsInf",           "Shape",     "Size"},
      AmpClass::kClear);
  set({"SliceGrad"}, AmpClass::kClear, kInternalDomain);
}

}  // namespace ot
