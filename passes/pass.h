// A pass rewrites a Graph in place: a name and Run(Graph&) -> changed. Each pass states its rewrite in its
// header comment (docs/ARCHITECTURE.md, "The pipeline").
#pragma once
#include <string>

#include "graph/graph.h"

namespace ot {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  virtual bool Run(Graph& g) = 0;
};

}  // namespace ot
