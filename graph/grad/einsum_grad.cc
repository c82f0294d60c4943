// Gradient rule of Einsum. Y[o] = sum over the other labels of prod_j X_j[t_j], so for operand i
//   dX_i[t_i] = sum over the labels not in t_i of dY[o] * prod_{j != i} X_j[t_j]
// which is itself an Einsum: "o,t_0,..(t_i left out)..->t_i'" of dY and the other operands, where t_i' is t_i
// without the labels that appear nowhere else (neither in the output nor in another operand). Those were summed
// over X_i alone in the forward, so the gradient is constant along them: it is unsqueezed and expanded back to
// X_i's shape. A one-operand equation whose gradient is a plain relabelling (dY itself) emits no Einsum.
//   'bij,bjk->bik'  dA = 'bik,bjk->bij'(dY, B)    dB = 'bik,bij->bjk'(dY, A)
//   'ij->ji'        dA = 'ji->ij'(dY)             'ij->i'  dA = Expand(Unsqueeze(dY, 1), shape(A))
// Ellipsis: the gradient Einsum keeps "..." where X_i's term has it, so the kernel broadcasts the ellipsis dims
// as the forward did; dims that X_i has fewer of (a shorter ellipsis) or has as 1 (broadcast) are then summed by
// ReduceToShape. Supported: any number of operands, no label repeated inside a term (no diagonals), and an
// ellipsis, where there is one, kept in the output; anything else is an error naming the equation.
#include <algorithm>
#include <stdexcept>

#include "graph/grad/grad_rules.h"
#include "graph/grad/grad_util.h"
#include "graph/op_registry.h"
#include "graph/ops/linalg_util.h"

namespace ot {

namespace {

constexpr int kEll = -1;  // the ellipsis token of a term

std::string Term(const std::vector<int>& tokens) {
  std::string s;
  for (int l : tokens) s += l == kEll ? std::string("...") : std::string(1, l < 26 ? 'a' + l : 'A' + (l - 26));
  return s;
}

bool Has(const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); }

// The equation's terms as tokens (letters as linalg::EinsumLetter ids, kEll for "..."), operands first, the
// output last (made explicit: "..." then the letters ParseEinsum put in the implicit output).
std::vector<std::vector<int>> Tokens(const std::string& equation, const linalg::EinsumEquation& e) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  std::vector<std::vector<int>> terms(1);
  for (size_t i = 0; i < std::min(arrow, eq.size()); ++i) {
    if (eq[i] == ',')
      terms.emplace_back();
    else if (eq[i] == '.')
      terms.back().push_back(kEll), i += 2;
    else
      terms.back().push_back(linalg::EinsumLetter(eq[i]));
  }
  std::vector<int> out;
  if (arrow != std::string::npos) {
    for (size_t i = arrow + 2; i < eq.size(); ++i) {
      if (eq[i] == '.')
        out.push_back(kEll), i += 2;
      else
        out.push_back(linalg::EinsumLetter(eq[i]));
    }
  } else {
    if (e.ellipsis_rank > 0) out.push_back(kEll);
    for (int l : e.output)
      if (l < 52) out.push_back(l);
  }
  terms.push_back(out);
  if (e.ellipsis_rank == 0)  // an ellipsis that covers no dims anywhere is no dims
    for (auto& t : terms) t.erase(std::remove(t.begin(), t.end(), kEll), t.end());
  return terms;
}

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
  const int E = e.ellipsis_rank;
  std::vector<std::vector<int>> terms = Tokens(eq, e);
  const std::vector<int> out = terms.back();
  terms.pop_back();
  for (const auto& t : terms)
    for (int l : t)
      if (l != kEll && std::count(t.begin(), t.end(), l) > 1)
        c.Fail("equation '" + eq +
               "' repeats a label inside a term (a diagonal); Einsum's gradient rule does "
               "not support that");
  if (E > 0 && !Has(out, kEll))
    c.Fail("equation '" + eq +
           "' sums its ellipsis (broadcast) dims away; Einsum's gradient rule needs them in "
           "the output");
  for (int i = 0; i < num; ++i) {
    if (!c.needs_grad(i)) continue;
    const std::vector<int>& ti = terms[i];
    const bool ell = Has(ti, kEll);
    // X_i's ellipsis covers fewer dims than the output's: the gradient's extra leading dims are summed by
    // ReduceToShape, which aligns dims from the right, so no letter may come before the ellipsis.
    const int ell_i = ranks[i] - static_cast<int>(ti.size()) + (ell ? 1 : 0);
    if (ell && ell_i < E && ti.front() != kEll)
      c.Fail("equation '" + eq + "': operand " + std::to_string(i) +
             " has letters before an ellipsis that "
             "covers fewer dims than the output's; Einsum's gradient rule does not support that");
    std::vector<std::string> gterms{Term(out)};
    std::vector<Value*> operands{c.dY(0)};
    for (int j = 0; j < num; ++j) {
      if (j == i) continue;
      gterms.push_back(Term(terms[j]));
      operands.push_back(c.X(j));
    }
    std::vector<int> kept;
    std::vector<int64_t> missing;  // axes (of the gradient Einsum's result + them) whose letter appears nowhere else
    int64_t axis = 0;
    for (int l : ti) {
      if (l == kEll) {
        kept.push_back(l);
        axis += E;
        continue;
      }
      bool elsewhere = Has(out, l);
      for (int j = 0; j < num; ++j) elsewhere = elsewhere || (j != i && Has(terms[j], l));
      if (elsewhere)
        kept.push_back(l);
      else
        missing.push_back(axis);
      ++axis;
    }
    Value* g;
    if (operands.size() == 1 && out == kept) {
      g = c.dY(0);
    } else {
      std::string geq;
      for (size_t k = 0; k < gterms.size(); ++k) geq += (k ? "," : "") + gterms[k];
      geq += "->" + Term(kept);
      g = c.Op("Einsum", operands, {{"equation", Attribute::String(geq)}});
    }
    if (!missing.empty()) {
      g = grad::UnsqueezeAxes(c, g, missing);
      g = c.Op("Expand", {g, c.Op("Shape", {c.X(i)})});  // bidirectional: keeps broadcast ellipsis dims
    }
    // Ellipsis dims that X_i has fewer of, or of size 1 where another operand's are larger, are summed.
    if (ell) g = c.ReduceToShape(g, c.X(i));
    c.SetGrad(i, g);
  }
}

}  // namespace

void RegisterEinsumGrad(OpRegistry& r) { r.SetGrad("", "Einsum", EinsumGrad); }

}  // namespace ot
