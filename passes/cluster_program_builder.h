// Builds the program of a fused cluster (kernel_common/cluster_program.h) from a set of IR nodes, with the
// concrete dims of their values, through each op's lowering in the registry (graph/ops/fuse_table.cc).
//
// Domain and rows. The domain D is the largest shape among the nodes' float/bool operands and results. When the
// cluster has row reductions they all reduce the same trailing axes of D (reduce_axes); a cluster input whose dims
// are 1 (or missing) on those axes is loaded as a row value, any other input must broadcast to D. Every node
// result that leaves the cluster must have D's dims (a full value) or D's with the reduced axes 1 or dropped (a
// row value); a result used only inside may be smaller than D when it broadcasts to D (it is then recomputed for
// every element of D -- the sizing prices that). Scalar constants (an initializer of one element that is not
// training state) become immediate constants instead of inputs.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "kernel_common/cluster_program.h"

namespace ot {

struct ValueDims {
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;
};
// Concrete dims of the values a cluster touches; null when unknown.
using DimsOf = std::function<const ValueDims*(const Value*)>;

struct BuiltCluster {
  std::string error;  // non-empty: why these nodes cannot form one program
  cluster::Program program;
  std::vector<Value*> inputs;   // in program input order
  std::vector<Value*> outputs;  // in program output order
  std::vector<int64_t> domain;
  std::vector<int64_t> row_keepdims;  // per output: 1 when a row output keeps the reduced axes as 1
  // The work of one run in bytes touched: each input instruction reads one element of its input's dtype and each
  // computing instruction makes one 4-byte float, per element it is evaluated at (every element of the domain for
  // a full value, one per row for a row value). A producer whose small result is broadcast into a larger domain is
  // recomputed at every element there: merging it raises this (the sizing's "does not pay"); a plain merge lowers
  // it by the load of the value that became internal.
  int64_t work_bytes = 0;
};

// The program of `nodes` (any order; they are evaluated in a topological order of their own edges). `escapes`:
// the nodes' results that must be stored (used outside, graph outputs, next state), in that order.
// `g`: the graph, to tell training state (never inlined as a constant) from constants.
BuiltCluster BuildClusterProgram(const Graph& g, const std::vector<const Node*>& nodes,
                                 const std::vector<const Value*>& escapes, const DimsOf& dims);

// The storage type of a dtype in a program (kF32/kF16/kBF16/kBool); false for any other dtype.
// Sets a fused node's attributes (graph/ops/fused.cc): its program in text form, row_keepdims, and fused_ops, the
// ops it replaced.
void SetClusterAttributes(Node* f, const cluster::Program& p, const std::vector<int64_t>& row_keepdims,
                          const std::vector<std::string>& ops);

bool ToClusterType(DataType t, cluster::DType* out);
DataType FromClusterType(cluster::DType t);

}  // namespace ot
