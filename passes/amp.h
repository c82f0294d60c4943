// amp: automatic mixed precision -- colours every node of the step graph half (float16 or bfloat16) or fp32 from
// its op's AMP class in the registry (graph/ops/amp_table.cc), as TensorFlow's AutoMixedPrecision does, and
// inserts the Casts that make the colouring hold.
//
// Colouring, over float32 edges only (integer/bool edges carry no precision), in this order:
//   1. allow ops are half; deny ops, ops named by --keep-fp32 / --keep-fp32-node, and infer ops whose every
//      consumer is a loss (the softmax that feeds a loss) are fp32 seeds;
//   2. deny propagates forward: a clear/infer node on a forward path from a deny node through clear/infer nodes
//      becomes fp32 when the path goes on to an infer or deny node (a run of clear nodes right before an allow node
//      is left free), so fp32 regions stay fp32 until real half work begins;
//   3. clear/infer nodes both downstream and upstream of half nodes (through clear/infer nodes) become half;
//   4. infer nodes whose float inputs all come from half nodes become half (TF's follow-allow rule of its oneDNN
//      bf16 mode): element-wise work after a GEMM -- and the backward's chains of gradients -- stays half, so what
//      the backward saves is half;
//   5. clear nodes connected to half nodes through clear nodes become half.
// Rewrite: each node is visited in topological order; a half node's float32 inputs (except the op's
// amp_fp32_inputs: BatchNorm's scale/bias/statistics) are read in half and a fp32 node's inputs in fp32, through
// one Cast per (producer output, dtype) shared by every consumer; then the node's types are re-inferred (a half
// node's float outputs are half, except its amp_fp32_outputs). Graph outputs and update-binding targets keep their
// names and fp32 type: a half producer writes "<name>.half" and a Cast restores the name. Cast chains are folded
// (Cast(Cast(x)) where the first is exact becomes one Cast, or x itself when the types meet). Values that were not
// float32 in the model (an fp16 model's tensors, integers) are never touched.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "passes/pass.h"

namespace ot {

struct AmpOptions {
  DataType half = DataType::kUndefined;      // kFloat16 or kBFloat16; kUndefined: the pass does nothing
  std::vector<std::string> keep_fp32_ops;    // --keep-fp32 OP,...
  std::vector<std::string> keep_fp32_nodes;  // --keep-fp32-node NAME,...
};

// What the pass did, for `onnx-train passes --amp` and the log.
struct AmpReport {
  struct OpCount {
    int half = 0, fp32 = 0;
  };
  std::map<std::string, OpCount> ops;  // op type -> node counts by precision (Casts the pass added excluded)
  int casts_inserted = 0;              // Casts of the final graph that the pass added
  int casts_folded = 0;
  std::vector<std::string> half_nodes;  // node names, in topological order
};

class AmpPass : public Pass {
 public:
  explicit AmpPass(AmpOptions o) : opts_(std::move(o)) {}
  std::string name() const override { return "amp"; }
  bool Run(Graph& g) override;
  const AmpReport& report() const { return report_; }

 private:
  AmpOptions opts_;
  AmpReport report_;
};

// "fp16" / "bf16" (also "float16", "bfloat16") -> the DataType; throws Error naming the flag otherwise.
DataType ParseAmpDtype(const std::string& s);
// The table `onnx-train passes --amp` prints: op, half nodes, fp32 nodes; then the Cast count.
std::string FormatAmpReport(const AmpReport& r, DataType half);

}  // namespace ot
