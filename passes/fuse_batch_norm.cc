#include "passes/fuse_batch_norm.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "graph/graph.h"
#include "graph/infer_util.h"
#include "passes/fold_report.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {

// BatchNormalization's mode as its kernel reads it (executor/kernels/norm.cc), for opsets 9 and later.
bool Training(const Node* bn) {
  if (bn->opset >= 14) return bn->attr_int("training_mode", 0) != 0;
  return bn->has_output(1) || bn->has_output(2);
}

// The axes of a ReduceSum (its input 1 from opset 13, else the attribute), normalized to [0, rank); nullopt when
// they are not constant or out of range.
std::optional<std::set<int64_t>> ReduceAxes(const Node* r, int rank) {
  std::vector<int64_t> axes;
  if (r->opset >= 13) {
    if (!r->has_input(1)) return std::nullopt;
    std::optional<Tensor> t = fuse::ConstantTensor(r->inputs[1]);
    if (!t || t->dtype() != DataType::kInt64) return std::nullopt;
    for (int64_t i = 0; i < t->numel(); ++i) axes.push_back(static_cast<int64_t>(t->GetDouble(i)));
  } else {
    axes = r->attr_ints("axes");
  }
  std::set<int64_t> s;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    s.insert(a < 0 ? a + rank : a);
  }
  return s;
}

}  // namespace

bool BatchNormFoldPass::Run(Graph& g) {
  FoldReport rep(sizes_, report_, "batch norm");
  // Positions in the executor's order (the node list need not be one: pattern fusion appends its nodes).
  std::unordered_map<const Node*, size_t> pos;
  for (const Node* n : g.TopologicalOrder()) pos.emplace(n, pos.size());

  bool changed = false;
  std::vector<Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  // Nodes this pass removed (freed): `nodes` still lists them, so the loops skip them.
  std::unordered_set<const Node*> removed;
  for (Node* bn : nodes) {
    // relu: BatchNormalization -> Relu.
    if (removed.count(bn)) continue;
    if (!fuse::IsOp(bn, "BatchNormalization") || !rep.kernel(bn) || bn->opset < 9 || bn->has_output(3) ||
        bn->has_output(4))
      continue;
    Value* y = bn->outputs[0];
    if (!fuse::Private(g, y)) continue;
    Node* relu = y->uses[0].node;
    if (!fuse::IsOp(relu, "Relu") || !rep.kernel(relu)) continue;
    Value* r = relu->outputs[0];
    const bool training = Training(bn);
    const std::string relu_label = FoldReport::Label(relu);
    removed.insert(relu);
    g.RemoveNode(relu);
    bn->op_type = "BatchNormRelu";
    bn->domain = kInternalDomain;
    bn->opset = 1;
    bn->attrs.erase("spatial");
    bn->attrs["training_mode"] = Attribute::Int(training ? 1 : 0);
    bn->outputs[0] = r;
    r->producer = bn;
    r->producer_output = 0;
    y->producer = nullptr;
    if (!g.opset_imports.count(kInternalDomain)) g.opset_imports[kInternalDomain] = 1;
    rep.Record(bn, {"BatchNormalization " + bn->name, relu_label}, 2 * rep.bytes(y));
    changed = true;
  }

  for (Node* bg : nodes) {
    if (removed.count(bg)) continue;
    if (!fuse::IsInternalOp(bg, "BatchNormGrad") || !rep.kernel(bg) || bg->attr_int("relu", 0) != 0) continue;
    const bool training = bg->attr_int("training", 1) != 0;
    // relu grad: ReluGrad -> BatchNormGrad's dY.
    Value* dy = bg->inputs[0];
    Node* rg = dy ? dy->producer : nullptr;
    if (fuse::IsInternalOp(rg, "ReluGrad") && rep.kernel(rg) && fuse::Private(g, dy)) {
      Value *dr = rg->inputs[0], *r = rg->inputs[1];
      const FusionSizes::Facts *fd = rep.facts(dy), *fdr = rep.facts(dr), *fr = rep.facts(r);
      if (fd && fdr && fr && fdr->dims.dims == fd->dims.dims && fr->dims.dims == fd->dims.dims &&
          fdr->dims.dtype == fd->dims.dtype && fr->dims.dtype == fd->dims.dtype) {
        // R held from its last reader until BatchNormGrad (dR takes dY's place over that interval).
        int64_t extended = 0;
        if (!fr->resident && !fr->output) {
          bool later = false;
          for (const Use& u : r->uses)
            if (u.node != rg && pos[u.node] > pos[bg]) later = true;
          if (!later) extended = rep.bytes(r);
        }
        if (opts_.memory_budget > 0 && extended > 0 && peak_ + extended > opts_.memory_budget) {
          rep.Refuse(rg, bg,
                     "keeping Relu's output alive until BatchNormGrad (+" + std::to_string(extended) +
                         " bytes) would pass the memory budget");
        } else {
          peak_ += extended;
          const std::string rg_label = FoldReport::Label(rg);
          removed.insert(rg);
          g.RemoveNode(rg);
          g.SetInput(bg, 0, dr);
          if (training) {  // inputs 3, 4 (the given statistics of inference) stay absent
            g.SetInput(bg, 3, nullptr);
            g.SetInput(bg, 4, nullptr);
          }
          g.SetInput(bg, 5, r);
          bg->attrs["relu"] = Attribute::Int(1);
          dy->producer = nullptr;
          rep.Record(bg, {"BatchNormGrad " + bg->name, rg_label}, 2 * rep.bytes(dy));
          changed = true;
        }
      }
    }

    // bias sum: ReduceSum of dX over every axis but the channels.
    Value* dx = bg->outputs[0];
    const FusionSizes::Facts *fx = rep.facts(dx), *fin = rep.facts(bg->inputs[1]);
    // Not channels-last: its kernel has no dX-sum output (cpu_ops/norm.h).
    if (!fx || !fin || bg->has_output(3) || bg->attr_int("channels_last", 0) != 0) continue;
    const std::vector<int64_t>& d = fx->dims.dims;
    const int rank = static_cast<int>(d.size());
    Node* sum = nullptr;
    for (const Use& u : dx->uses)
      if (fuse::IsOp(u.node, "ReduceSum") && u.input_index == 0 && rep.kernel(u.node) && !sum) {
        std::optional<std::set<int64_t>> axes = ReduceAxes(u.node, rank);
        std::set<int64_t> want;
        for (int a = 0; a < rank; ++a)
          if (a != 1) want.insert(a);
        if (rank >= 3 && axes && *axes == want) sum = u.node;
      }
    if (!sum) continue;
    const DataType t = fx->dims.dtype;
    const int64_t spatial = rank >= 3 ? NumElements(std::vector<int64_t>(d.begin() + 2, d.end())) : 0;
    const FusionSizes::Facts *fs = rep.facts(sum->outputs[0]), *fg = rep.facts(bg->inputs[0]);
    if ((t != DataType::kFloat32 && t != DataType::kFloat64) || fin->dims.dtype != t || !fg || fg->dims.dtype != t ||
        !fs || fs->dims.dtype != t) {
      rep.Refuse(bg, sum, "the channel sum folds for float32/float64 dY, X and dX only");
      continue;
    }
    if (d[1] < 2 || spatial < 16) {
      rep.Refuse(bg, sum,
                 "ReduceSum sums " + DimsToString(d) +
                     " in another order than plane by plane (one channel, or planes under 16 elements)");
      continue;
    }
    Value* out = sum->outputs[0];
    const bool keepdims = sum->attr_int("keepdims", 1) != 0;
    const std::string sum_label = FoldReport::Label(sum);
    removed.insert(sum);
    g.RemoveNode(sum);
    if (bg->outputs.size() < 4) bg->outputs.resize(4, nullptr);
    bg->outputs[3] = out;
    out->producer = bg;
    out->producer_output = 3;
    bg->attrs["sum_keepdims"] = Attribute::Int(keepdims ? 1 : 0);
    rep.Record(bg, {"BatchNormGrad " + bg->name, sum_label}, rep.bytes(dx));
    changed = true;
  }
  return changed;
}

}  // namespace ot
