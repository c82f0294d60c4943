#include "passes/loss.h"

#include "graph/error.h"
#include "graph/op_registry.h"

namespace ot {

namespace {
bool IsScalarFloat(const Value* v) {
  return IsFloat(v->dtype) && v->shape.known_rank() && v->shape.NumElements() && *v->shape.NumElements() == 1;
}

std::string OutputList(const Graph& g) {
  std::string s;
  for (const Value* v : g.outputs)
    s += (s.empty() ? "" : ", ") + v->name + " " + DataTypeName(v->dtype) + v->shape.ToString();
  return s;
}
}  // namespace

void LossPass::AppendCtc(Graph& g, Value* logits, Value* labels, Value* loss) const {
  if (logits->shape.rank() != 3)
    throw Error("--logits: '" + opts_.logits + "' is " + logits->shape.ToString() +
                "; --loss ctc reads [frames, batch, classes] (--logits-layout btc: [batch, frames, classes])");
  if (opts_.logits_layout != "tbc" && opts_.logits_layout != "btc")
    throw Error("--logits-layout: '" + opts_.logits_layout + "' is neither tbc nor btc");
  if (opts_.ctc_reduction != "mean" && opts_.ctc_reduction != "sum")
    throw Error("--ctc-reduction: '" + opts_.ctc_reduction + "' is neither mean nor sum");
  const Dim& classes = logits->shape[2];
  if (opts_.blank < 0 || (classes.is_static() && opts_.blank >= classes.value))
    throw Error("--blank " + std::to_string(opts_.blank) + " is not a class of '" + opts_.logits + "' (" +
                logits->shape.ToString() + ")");
  const Dim batch = logits->shape[opts_.logits_layout == "tbc" ? 1 : 0];
  Value* lens[2] = {nullptr, nullptr};
  const std::string* names[2] = {&opts_.logit_lengths, &opts_.label_lengths};
  const char* flags[2] = {"--logit-lengths", "--label-lengths"};
  for (int i = 0; i < 2; ++i) {
    const std::string& name = *names[i];
    if (name.empty() || g.FindValue(name) || name == opts_.labels || (i == 1 && name == opts_.logit_lengths))
      throw Error(std::string(flags[i]) + ": give a new input name for the lengths (got '" + name + "')");
    lens[i] = g.AddValue(name);
    lens[i]->dtype = DataType::kInt64;
    lens[i]->shape = Shape({batch});
    g.inputs.push_back(lens[i]);
  }
  labels->dtype = DataType::kInt64;
  labels->shape = Shape({batch, Dim::Symbol(opts_.labels + "_width")});
  Node* n = g.AddNode("CTCLoss", {logits, labels, lens[0], lens[1]}, {loss}, "loss/CTCLoss");
  n->domain = kInternalDomain;
  n->opset = 1;
  if (!g.opset_imports.count(kInternalDomain)) g.opset_imports[kInternalDomain] = 1;
  n->attrs["blank"] = Attribute::Int(opts_.blank);
  n->attrs["reduction"] = Attribute::String(opts_.ctc_reduction);
  n->attrs["zero_infinity"] = Attribute::Int(opts_.zero_infinity ? 1 : 0);
  n->attrs["layout"] = Attribute::String(opts_.logits_layout);
}

bool LossPass::Run(Graph& g) {
  InferShapes(g, /*strict=*/false);
  if (opts_.kind.empty()) {
    if (!opts_.output.empty()) {
      const Value* v = g.FindValue(opts_.output);
      if (!v)
        throw Error("--loss-output: the model has no value '" + opts_.output + "' (outputs: " + OutputList(g) + ")");
      if (!IsScalarFloat(v))
        throw Error("--loss-output: '" + opts_.output + "' is " + DataTypeName(v->dtype) + v->shape.ToString() +
                    ", not a scalar float");
      loss_ = opts_.output;
      return false;
    }
    const Value* found = nullptr;
    for (const Value* v : g.outputs)
      if (IsScalarFloat(v)) {
        if (found)
          throw Error("the model has several scalar float outputs ('" + found->name + "', '" + v->name +
                      "'): name the loss with --loss-output");
        found = v;
      }
    if (!found)
      throw Error("the model has no scalar float output to train on (outputs: " + OutputList(g) +
                  "); use --loss cross_entropy|mse --logits NAME --labels NAME");
    loss_ = found->name;
    return false;
  }

  if (opts_.kind != "cross_entropy" && opts_.kind != "mse" && opts_.kind != "ctc")
    throw Error("--loss: unknown loss '" + opts_.kind + "' (cross_entropy, mse or ctc)");
  Value* logits = g.FindValue(opts_.logits);
  if (opts_.logits.empty() || !logits)
    throw Error("--logits: the model has no value '" + opts_.logits + "' (outputs: " + OutputList(g) + ")");
  if (!IsFloat(logits->dtype) || !logits->shape.known_rank())
    throw Error("--logits: '" + opts_.logits + "' must be a float tensor of known rank");
  if (opts_.labels.empty() || g.FindValue(opts_.labels))
    throw Error("--labels: give a new input name for the labels (got '" + opts_.labels + "')");
  if (g.FindValue("loss")) throw Error("the model already has a value named 'loss'");

  Value* labels = g.AddValue(opts_.labels);
  g.inputs.push_back(labels);
  Value* loss = g.AddValue("loss");
  if (opts_.kind == "ctc") {
    AppendCtc(g, logits, labels, loss);
  } else if (opts_.kind == "cross_entropy") {
    if (logits->shape.rank() < 2) throw Error("--logits: '" + opts_.logits + "' must be [batch, classes, ...]");
    if (g.OpsetOf("") < 12) throw Error("--loss cross_entropy needs a model of opset 12 or newer");
    std::vector<Dim> dims = logits->shape.dims();
    dims.erase(dims.begin() + 1);
    labels->dtype = DataType::kInt64;
    labels->shape = Shape(dims);
    Node* n = g.AddNode("SoftmaxCrossEntropyLoss", {logits, labels}, {loss}, "loss/SoftmaxCrossEntropyLoss");
    n->attrs["reduction"] = Attribute::String("mean");
  } else {
    labels->dtype = logits->dtype;
    labels->shape = logits->shape;
    Value* diff = g.AddValue(g.UniqueName("loss_diff"));
    g.AddNode("Sub", {logits, labels}, {diff}, "loss/Sub");
    Value* sq = g.AddValue(g.UniqueName("loss_sq"));
    g.AddNode("Mul", {diff, diff}, {sq}, "loss/Mul");
    Node* mean = g.AddNode("ReduceMean", {sq}, {loss}, "loss/ReduceMean");
    mean->attrs["keepdims"] = Attribute::Int(0);
  }
  g.outputs.push_back(loss);
  InferShapes(g, false);
  loss_ = "loss";
  return true;
}

}  // namespace ot
