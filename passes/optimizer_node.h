// Helpers of the passes that extend the OptimizerUpdate node (master_weights, loss_scaling): finding the node and
// inserting operands where graph/ops/optimizer_layout.h places them, keeping the IR's use lists and producer
// indices consistent.
#pragma once
#include <string>
#include <vector>

#include "graph/graph.h"

namespace ot {

// The step graph's ai.onnxtrain.OptimizerUpdate node, or null when it has none. Throws Error when there are
// several (a step graph updates the whole model with one node).
Node* FindOptimizerNode(const Graph& g);

// Inserts `vs` (values without producer) as outputs of `n` before position `pos`; the later outputs' producer
// indices move with them.
void InsertOutputs(Node* n, int pos, const std::vector<Value*>& vs);

// A name for a new value: `name` when no value has it, else a fresh one with that prefix.
std::string FreshName(Graph& g, const std::string& name);

// The state whose update binding's next value is `next`, or null.
Value* BoundState(const Graph& g, const Value* next);

}  // namespace ot
