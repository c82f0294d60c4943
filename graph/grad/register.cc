#include "graph/grad/grad_rules.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {
void RegisterGradients(OpRegistry& r) {
  RegisterElementwiseGrads(r);
  RegisterLinalgGrads(r);
  RegisterShapeGrads(r);
  RegisterReductionGrads(r);
  RegisterNormGrads(r);
  RegisterConvGrads(r);
  RegisterDataGrads(r);
  RegisterActivationGrads(r);
  RegisterIndexGrads(r);
  RegisterConvTransposeGrads(r);
  RegisterEinsumGrad(r);
  RegisterInstanceNormGrad(r);
  RegisterRecurrentGrads(r);
  RegisterCtcGrads(r);
  RegisterCollectiveGrads(r);
  RegisterOptimizerOps(r);
}
}  // namespace ot
