// A readable text form of a Graph, one node per line:
//   %y: float32[batch,10] = Gemm(%x, %W, %b) {transB=1}   # node 'fc'
#pragma once
#include <string>

#include "graph/graph.h"

namespace ot {
std::string PrintGraph(const Graph& g);
}  // namespace ot
