#include "passes/fuse_softmax_ce.h"

#include <algorithm>
#include <vector>

#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {

using namespace fuse;

bool IsGraphOutput(const Graph& g, const Value* v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

bool IsState(const Graph& g, const Value* v) {
  for (const auto& b : g.update_bindings)
    if (b.next == v || b.state == v) return true;
  return false;
}

// True when the (Log)Softmax node `s` over an input of rank r normalizes along axis 1 of [N, C, d1...] (see the
// header: before opset 13 the op flattens to 2-D at `axis`, which is the class axis only for a 2-D input).
bool AlongClassAxis(const Node* s, int r) {
  const bool legacy = s->opset < 13;
  int64_t axis = s->attr_int("axis", legacy ? 1 : -1);
  if (axis < -r || axis >= r) return false;
  if (axis < 0) axis += r;
  if (axis != 1) return false;
  return !legacy || r == 2;
}

// The pattern ending at the NLL node `nll`: the scores, the log-probability value, and the nodes to delete
// (producers of lp, then the NLL node). False when the graph differs.
struct Match {
  Value* scores = nullptr;
  Value* lp = nullptr;
  bool keep_lp = false;  // lp is a graph output: the fused node's log_prob output becomes it
  std::vector<Node*> nodes;
};

bool MatchLoss(const Graph& g, Node* nll, Match& m) {
  if (nll->inputs.size() < 2 || !nll->has_input(0) || !nll->has_input(1)) return false;
  m.lp = nll->inputs[0];
  // lp: read by the NLL node once, by no other node, and no training state.
  if (m.lp->uses.size() != 1 || IsState(g, m.lp)) return false;
  m.keep_lp = IsGraphOutput(g, m.lp);
  Node* p = m.lp->producer;
  Node* softmax = nullptr;
  if (IsOp(p, "LogSoftmax")) {
    softmax = p;
    m.nodes = {p};
  } else if (IsOp(p, "Log") && p->has_input(0)) {
    Value* prob = p->inputs[0];
    if (!Private(g, prob) || !IsOp(prob->producer, "Softmax")) return false;
    softmax = prob->producer;
    m.nodes = {softmax, p};
  } else {
    return false;
  }
  if (!softmax->has_input(0) || softmax->outputs.size() != 1) return false;
  m.scores = softmax->inputs[0];
  if (!m.scores->shape.known_rank() || m.scores->shape.rank() < 2) return false;
  if (!AlongClassAxis(softmax, m.scores->shape.rank())) return false;
  // One float dtype throughout (the fused loss computes in the scores' type and writes the loss in it).
  const DataType t = m.scores->dtype;
  if (!IsFloat(t) || m.lp->dtype != t || !nll->has_output(0) || nll->outputs[0]->dtype != t) return false;
  for (Node* n : m.nodes)
    if (n->outputs[0]->dtype != t) return false;
  if (nll->has_input(2) && nll->inputs[2]->dtype != t) return false;
  // lp only as the log-probabilities (not also as the target or weight).
  for (size_t i = 1; i < nll->inputs.size(); ++i)
    if (nll->inputs[i] == m.lp) return false;
  m.nodes.push_back(nll);
  return true;
}

}  // namespace

bool FuseSoftmaxCrossEntropyPass::Run(Graph& g) {
  fused_ = 0;
  InferShapes(g, /*strict=*/false);  // scores' rank and the dtypes
  bool again = true;
  while (again) {  // restart after each rewrite: it deletes nodes
    again = false;
    for (const auto& up : g.nodes()) {
      Node* nll = up.get();
      if (!IsOp(nll, "NegativeLogLikelihoodLoss")) continue;
      Match m;
      if (!MatchLoss(g, nll, m)) continue;
      std::vector<Value*> ins = {m.scores, nll->inputs[1]};
      if (nll->has_input(2)) ins.push_back(nll->inputs[2]);
      std::vector<Value*> outs = {nll->outputs[0]};
      if (m.keep_lp) outs.push_back(m.lp);
      const std::map<std::string, Attribute> attrs = nll->attrs;  // reduction, ignore_index: the same meaning
      const int opset = nll->opset;
      const std::string scope = Scope(nll->name);
      RemoveMatched(g, m.nodes);
      Node* n = g.AddNode("SoftmaxCrossEntropyLoss", ins, outs,
                          scope.empty() ? g.UniqueName("SoftmaxCrossEntropyLoss") : scope + "/SoftmaxCrossEntropyLoss");
      n->domain = "";
      n->opset = opset;
      n->attrs = attrs;
      ++fused_;
      again = true;
      break;
    }
  }
  return fused_ > 0;
}

}  // namespace ot
