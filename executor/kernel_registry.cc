#include "executor/kernel_registry.h"

namespace ot {

void RegisterTrainingPreviewKernels(KernelRegistry& r);   // executor/kernels/training_preview.cc
void RegisterGeluGradKernels(KernelRegistry& r);          // executor/kernels/gelu_grad.cc
void RegisterFusedLinalgKernels(KernelRegistry& r);       // executor/kernels/fused_linalg.cc
void RegisterFusedElementwiseKernels(KernelRegistry& r);  // executor/kernels/fused_elementwise.cc
void RegisterMatMulEpilogueKernels(KernelRegistry& r);    // executor/kernels/matmul_epilogue.cc
void RegisterConvEpilogueKernels(KernelRegistry& r);      // executor/kernels/conv_epilogue.cc
void RegisterRecurrentKernels(KernelRegistry& r);         // executor/kernels/recurrent.cc
void RegisterCtcKernels(KernelRegistry& r);               // executor/kernels/ctc.cc
void RegisterCollectiveKernels(KernelRegistry& r);        // executor/kernels/allreduce.cc

const TensorDesc& KernelContext::in(int i) const {
  if (!has_input(i)) Fail("input " + std::to_string(i) + " is missing");
  return inputs[i];
}

const TensorDesc& KernelContext::out(int i) const {
  if (i >= static_cast<int>(outputs.size())) Fail("output " + std::to_string(i) + " does not exist");
  return outputs[i];
}

void KernelContext::RequireDType(int i, std::initializer_list<DataType> allowed) const {
  DataType t = in(i).dtype;
  for (DataType a : allowed)
    if (a == t) return;
  Unsupported("input " + std::to_string(i) + " dtype " + DataTypeName(t) + " is not supported");
}

const KernelRegistry& KernelRegistry::Cpu() {
  static const KernelRegistry* reg = [] {
    auto* r = new KernelRegistry();
    RegisterElementwiseKernels(*r);
    RegisterReductionKernels(*r);
    RegisterNormKernels(*r);
    RegisterLinalgKernels(*r);
    RegisterShapeKernels(*r);
    RegisterInternalKernels(*r);
    RegisterNormGradKernels(*r);
    RegisterConvGradKernels(*r);
    RegisterOptimizerKernels(*r);
    RegisterTrainingPreviewKernels(*r);
    RegisterGeluGradKernels(*r);
    RegisterFusedLinalgKernels(*r);
    RegisterFusedElementwiseKernels(*r);
    RegisterMatMulEpilogueKernels(*r);
    RegisterConvEpilogueKernels(*r);
    RegisterRecurrentKernels(*r);
    RegisterCtcKernels(*r);
    RegisterCollectiveKernels(*r);
    return r;
  }();
  return *reg;
}

void KernelRegistry::Register(const std::string& op_type, KernelFactory f, const std::string& domain) {
  factories_[{domain == "ai.onnx" ? "" : domain, op_type}] = std::move(f);
}

const KernelFactory* KernelRegistry::Find(const std::string& domain, const std::string& op_type) const {
  auto it = factories_.find({domain == "ai.onnx" ? "" : domain, op_type});
  return it == factories_.end() ? nullptr : &it->second;
}

}  // namespace ot
