// Float64 finite-difference checks of ai.onnxtrain.CTCLoss's gradient rule (graph/grad/ctc_grad.cc) through autodiff
// and the executor, at static dims and with symbolic dims at two sizes (more frames and classes): both layouts, both
// reductions, a sample cut short by its logit length, and zero_infinity with a sample whose labels cannot fit. The
// kernel's own checks (every path enumerated): tests/cpu_ops/ctc_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/passes/grad_check.h"

namespace ot {
namespace {

using test::Attrs;
using test::CheckGradients;

// Three samples: labels {1, 1, 2}, {2}, {3, 1}; their logit lengths `lens`.
void Check(const std::string& layout, const std::string& reduction, std::vector<int64_t> lens, bool zero_inf) {
  const int64_t T = 5, B = 3, C = 4;
  const std::vector<int64_t> dims = layout == "tbc" ? std::vector<int64_t>{T, B, C} : std::vector<int64_t>{B, T, C};
  const std::vector<int64_t> second =
      layout == "tbc" ? std::vector<int64_t>{T + 2, B, C + 1} : std::vector<int64_t>{B, T + 2, C + 1};
  auto body = [&](Graph& g, const std::vector<Value*>& p) -> Value* {
    g.opset_imports[kInternalDomain] = 1;
    Value* labels = g.AddInitializer("k_labels", Tensor::FromInt64({1, 1, 2, 2, 0, 0, 3, 1, 0}, {B, 3}));
    Value* logit_lens = g.AddInitializer("k_logit_lens", Tensor::FromInt64(lens, {B}));
    Value* label_lens = g.AddInitializer("k_label_lens", Tensor::FromInt64({3, 1, 2}, {B}));
    Attrs a{{"layout", Attribute::String(layout)},
            {"reduction", Attribute::String(reduction)},
            {"zero_infinity", Attribute::Int(zero_inf ? 1 : 0)}};
    Value* loss = test::Emit(g, "CTCLoss", {p[0], labels, logit_lens, label_lens}, a);
    loss->producer->domain = kInternalDomain;
    loss->producer->opset = 1;
    return loss;
  };
  CheckGradients({dims}, {}, body, 17, -2, 2, {second});
}

TEST(GradientCheck, CtcLossBothLayoutsAndReductions) {
  for (const char* layout : {"tbc", "btc"})
    for (const char* red : {"mean", "sum"}) Check(layout, red, {5, 3, 4}, false);
}

TEST(GradientCheck, CtcLossZeroInfinity) {
  // Sample 0 needs 4 frames ({1, 1, 2}: a blank between the ones) and has 3: it adds 0 and gets no gradient.
  Check("tbc", "mean", {3, 5, 2}, true);
}

}  // namespace
}  // namespace ot
