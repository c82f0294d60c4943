// Gradient rule of Einsum. Y[o] = sum over the other labels of prod_j X_j[t_j], so for operand i
//   dX_i[t_i] = sum over the labels not in t_i of dY[o] * prod_{j != i} X_j[t_j]
// which is itself an Einsum: "o,t_0,..(t_i left out)..->t_i'" of dY and the other operands, where t_i' is t_i
// without the labels that appear nowhere else (neither in the output nor in another operand). Those were summed
// over X_i alone in the forward, so the gradient is constant along them: it is unsqueezed and expanded back to
// X_i's shape. A one-operand equation whose gradient is a plain relabelling (dY itself) emits no Einsum.
//   'bij,bjk->bik'  dA = 'bik,bjk->bij'(dY, B)    dB = 'bik,bij->bjk'(dY, A)
//   'ij->ji'        dA = 'ji->ij'(dY)             'ij->i'  dA = Expand(Unsqueeze(dY, 1), shape(A))
// Supported: any number of operands with no label repeated inside a term (no diagonals) and no ellipsis
// (broadcasting); anything else is an error naming the equation.
#include <algorithm>
#include <stdexcept>

#include "graph/grad/grad_rules.h"
#include "graph/grad/grad_util.h"
#include "graph/op_registry.h"
#include "graph/ops/linalg_util.h"

namespace ot {

namespace {

std::string Term(const std::vector<int>& labels) {
  std::string s;
  for (int l : labels) s += static_cast<char>(l < 26 ? 'a' + l : 'A' + (l - 26));
  return s;
}

bool Has(const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); }

void EinsumGrad(GradContext& c) {
  const Node& n = c.node();
  const std::string eq = n.attr_string("equation", "");
  const int num = static_cast<int>(n.inputs.size());
  std::vector<int> ranks;
  for (int i = 0; i < num; ++i) ranks.push_back(grad::Rank(c, c.X(i), "operand " + std::to_string(i)));
  linalg::EinsumEquation e;
  try {
    e = linalg::ParseEinsum(eq, ranks);
  } catch (const std::invalid_argument& ex) {
    c.Fail(ex.what());
  }
  for (const auto& t : e.inputs) {
    for (size_t p = 0; p < t.size(); ++p) {
      if (t[p] >= 52)
        c.Fail("equation '" + eq + "' has an ellipsis (broadcast dims); Einsum's gradient rule supports "
               "equations of letters only");
      if (std::count(t.begin(), t.end(), t[p]) > 1)
        c.Fail("equation '" + eq + "' repeats a label inside a term (a diagonal); Einsum's gradient rule does "
               "not support that");
    }
  }
  for (int i = 0; i < num; ++i) {
    if (!c.needs_grad(i)) continue;
    const std::vector<int>& ti = e.inputs[i];
    std::vector<std::string> terms{Term(e.output)};
    std::vector<Value*> operands{c.dY(0)};
    for (int j = 0; j < num; ++j) {
      if (j == i) continue;
      terms.push_back(Term(e.inputs[j]));
      operands.push_back(c.X(j));
    }
    std::vector<int> kept;
    std::vector<int64_t> missing;  // axes of X_i whose label appears nowhere else
    for (size_t p = 0; p < ti.size(); ++p) {
      bool elsewhere = Has(e.output, ti[p]);
      for (int j = 0; j < num; ++j) elsewhere = elsewhere || (j != i && Has(e.inputs[j], ti[p]));
      if (elsewhere) kept.push_back(ti[p]);
      else missing.push_back(static_cast<int64_t>(p));
    }
    Value* g;
    if (operands.size() == 1 && e.output == kept) {
      g = c.dY(0);
    } else {
      std::string geq;
      for (size_t k = 0; k < terms.size(); ++k) geq += (k ? "," : "") + terms[k];
      geq += "->" + Term(kept);
      g = c.Op("Einsum", operands, {{"equation", Attribute::String(geq)}});
    }
    if (!missing.empty()) {
      g = grad::UnsqueezeAxes(c, g, missing);
      g = c.Op("Expand", {g, c.Op("Shape", {c.X(i)})});
    }
    c.SetGrad(i, g);
  }
}

}  // namespace

void RegisterEinsumGrad(OpRegistry& r) { r.SetGrad("", "Einsum", EinsumGrad); }

}  // namespace ot
