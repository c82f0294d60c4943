// Structural checks of a Graph: every input defined, one producer per value, use lists consistent, acyclic,
// graph outputs defined, attribute kinds sane. Throws Error naming the first problem.
#pragma once
#include "graph/graph.h"

namespace ot {
void VerifyGraph(const Graph& g);
}  // namespace ot
