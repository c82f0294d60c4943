#include "passes/fuse_matmul_bias.h"

#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {

using namespace fuse;

struct Match {
  Node* matmul = nullptr;
  Node* add = nullptr;
  Node* relu = nullptr;  // folded ReLU, or nullptr
  Value* a = nullptr;
  Value* b = nullptr;
  Value* bias = nullptr;
};

// The bias fits when it is [N] (any rank of A) or [1, N] (2-D A only: Gemm's C broadcasts over rows; the
// MatMulBias schema takes a 1-D bias) with N equal to B's last dim.
bool BiasFits(const Value* bias, const Dim& n, bool two_d) {
  const Shape& s = bias->shape;
  if (!s.known_rank()) return false;
  if (s.rank() == 1) return s[0] == n;
  if (s.rank() == 2 && two_d) return s[0].is_static() && s[0].value == 1 && s[1] == n;
  return false;
}

bool MatchLinear(const Graph& g, Node* mm, Match& m) {
  if (mm->inputs.size() != 2 || !mm->has_input(0) || !mm->has_input(1) || mm->outputs.size() != 1) return false;
  m.matmul = mm;
  m.a = mm->inputs[0];
  m.b = mm->inputs[1];
  const Shape& as = m.a->shape;
  const Shape& bs = m.b->shape;
  if (!as.known_rank() || !bs.known_rank() || as.rank() < 2 || bs.rank() != 2) return false;
  const DataType t = m.a->dtype;
  if (!IsFloat(t) || m.b->dtype != t) return false;
  m.add = OnlyUser(g, mm->outputs[0]);  // the GEMM result feeds the Add only
  if (!IsOp(m.add, "Add") || m.add->outputs.size() != 1) return false;
  m.bias = Other(m.add, mm->outputs[0]);
  if (!m.bias || m.bias->dtype != t) return false;
  if (!BiasFits(m.bias, bs[1], as.rank() == 2)) return false;
  Node* relu = OnlyUser(g, m.add->outputs[0]);
  if (IsOp(relu, "Relu") && relu->outputs.size() == 1 && relu->outputs[0]->dtype == t) {
    // MatMulBias takes a 1-D bias only; a [1, N] bias keeps the Relu apart (Gemm, then Relu).
    if (m.bias->shape.rank() == 1) m.relu = relu;
  }
  return true;
}

}  // namespace

bool FuseMatMulBiasPass::Run(Graph& g) {
  gemms_ = matmul_biases_ = 0;
  InferShapes(g, /*strict=*/false);  // ranks, dims and dtypes of A, B and the bias
  bool again = true;
  while (again) {  // restart after each rewrite: it deletes nodes
    again = false;
    for (const auto& up : g.nodes()) {
      Node* mm = up.get();
      if (!IsOp(mm, "MatMul")) continue;
      Match m;
      if (!MatchLinear(g, mm, m)) continue;
      const bool gemm = m.a->shape.rank() == 2 && !m.relu;
      Value* y = (m.relu ? m.relu : m.add)->outputs[0];
      const std::string scope = Scope(mm->name);
      const int opset = mm->opset;
      std::vector<Node*> nodes = {m.matmul, m.add};
      if (m.relu) nodes.push_back(m.relu);
      RemoveMatched(g, nodes);
      const char* op = gemm ? "Gemm" : "MatMulBias";
      Node* n = g.AddNode(op, {m.a, m.b, m.bias}, {y}, scope.empty() ? g.UniqueName(op) : scope + "/" + op);
      if (gemm) {
        n->domain = "";
        n->opset = opset;
        ++gemms_;
      } else {
        n->domain = kInternalDomain;
        n->opset = 1;
        n->attrs["activation"] = Attribute::String(m.relu ? "relu" : "none");
        ++matmul_biases_;
      }
      again = true;
      break;
    }
  }
  return gemms_ + matmul_biases_ > 0;
}

}  // namespace ot
