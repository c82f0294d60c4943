// Registration of gradient rules, one file per op family.
#pragma once

namespace ot {
class OpRegistry;
void RegisterElementwiseGrads(OpRegistry& r);
void RegisterLinalgGrads(OpRegistry& r);
void RegisterShapeGrads(OpRegistry& r);
void RegisterReductionGrads(OpRegistry& r);
}  // namespace ot
