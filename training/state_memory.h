// The step's state -- parameters, optimizer moments, master weights -- moved into one block of host memory that
// the kernel can back with huge pages (kernel_common/host_alloc.h): each step the update streams over all of it
// and the forward and backward read the parameters, and in malloc's heap, as many blocks under 2 MiB, every 4 KiB
// page of it costs a TLB miss (PoolFormer-S12 fp32: the step 0.89x; bench/RESULTS.md, session 38).
#pragma once
#include <cstdint>

namespace ot {

class Graph;

// Moves the initializers of g's update bindings (their Tensor objects keep their identity, so every graph sharing
// one sees the move) into one block; returns its bytes (0 when the state is under 2 MiB and stays where it is).
int64_t PackStateMemory(Graph& g);

}  // namespace ot
