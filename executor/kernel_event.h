// One kernel of a traced run (Plan::set_tracing): what `--profile` writes as a Chrome-trace event.
#pragma once
#include <cstdint>
#include <vector>

#include "executor/kernel_registry.h"
#include "graph/graph.h"

namespace ot {

struct KernelEvent {
  const Node* node = nullptr;
  int64_t start_ns = 0, end_ns = 0;  // from the start of the run
  int thread = 0;                    // TBB thread slot in the executor's arena (0: the calling thread)
  int64_t bytes_in = 0, bytes_out = 0;
  std::vector<TensorDesc> inputs, outputs;  // dtype and dims of each present operand
};

}  // namespace ot
