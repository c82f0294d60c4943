// fp16_range: keeps constants of fp16 regions inside float16's range (runs after the amp pass, for --amp=fp16).
//
// Rewrite, for each Cast to float16 whose input is a constant (an initializer that is not training state, or a
// Constant node's output):
//   - finite elements beyond +-65504 (a -1e9 or -1e12 attention mask) become +-`infinity` (--fp16-infinity,
//     default 1e4, bert4keras' choice: a masked logit stays finite, and exp() of it after the max is subtracted is
//     exactly 0), instead of turning into infinities whose products and differences are NaN;
//   - a scalar constant with 0 < |v| < min(2^-14, epsilon) (below fp16's normal range, e.g. a LayerNorm epsilon of
//     1e-12 added in an Add) that feeds an Add or Sub becomes +-`epsilon` (--fp16-epsilon, default 1e-5), since it
//     would flush to zero and the division it guards could divide by zero.
//   The Cast then reads a new initializer "<name>.fp16_range" (the original is kept for fp32 readers).
// And for each float16 node with an `epsilon` attribute below that floor whose op does not compute in fp32 inside (the
// registry's amp_fp32_inside): the attribute is raised to `epsilon`.
// Every change is reported by node (changes()).
#pragma once
#include <string>
#include <vector>

#include "passes/pass.h"

namespace ot {

struct Fp16RangeOptions {
  double infinity = 1e4;
  double epsilon = 1e-5;
};

class Fp16RangePass : public Pass {
 public:
  explicit Fp16RangePass(Fp16RangeOptions o = {}) : opts_(o) {}
  std::string name() const override { return "fp16_range"; }
  bool Run(Graph& g) override;
  // One line per change: "node 'x' (Cast): constant 'mask': 12 values beyond fp16 range -> +-10000".
  const std::vector<std::string>& changes() const { return changes_; }

 private:
  Fp16RangeOptions opts_;
  std::vector<std::string> changes_;
};

}  // namespace ot
